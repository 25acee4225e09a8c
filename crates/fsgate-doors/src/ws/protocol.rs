//! The files channel's wire format: JSON text messages in, [`Op`]s out, and the
//! responses and pushed events back. Described for clients in docs/ws-protocol.md.

use base64::Engine;
use fsgate_gateway::ops;
use serde_json::{Map, Value, json};

use super::channel::CHANNEL;
use super::permission;
use crate::door::{Decoded, Door, Ops, Ran};
use fsgate_base::error::{GatewayError, code};
use fsgate_gateway::Gateway;
use fsgate_gateway::ask::Answer;
use fsgate_gateway::ops::format_permissions;
use fsgate_gateway::ops::{Encoding, Op, OpId, Output, PathStyle};
use fsgate_gateway::watch::{Change, ChangeKind};

/// What a client message asks for.
#[derive(Debug)]
pub enum Incoming {
    /// A request for the gateway (a filesystem operation, or a type no one serves):
    /// decoded by [`Ws`].
    Request(WsRequest),
    /// Push change events for this subtree only (replacing the previous subscription).
    Subscribe {
        /// `type` and `requestId`.
        head: Head,
        /// Workspace-rooted path of the subtree.
        path: String,
    },
    /// Stop pushing change events.
    Unsubscribe {
        /// `type` and `requestId`.
        head: Head,
    },
    /// The client's answer to a `permission` question.
    Permission {
        /// `type` and `requestId` (the question's id).
        head: Head,
        /// The question's id.
        id: String,
        /// The answer.
        answer: Answer,
    },
    /// A message that cannot be served: record it and answer with `reply` (an error
    /// response; see `message`).
    Bad {
        /// What the reply echoes.
        head: Head,
        /// The error response.
        reply: Value,
    },
}

/// A request on the channel, its envelope read, its fields not yet.
#[derive(Debug)]
pub struct WsRequest {
    head: Head,
    msg: Map<String, Value>,
}

/// The files channel's wire (see [`crate::door`]): a request's fields in, its
/// response's text out, bounded by the message limit `max`; paths workspace-rooted.
#[derive(Debug, Clone, Copy)]
pub struct Ws {
    /// The message limit an answer must fit.
    pub max: usize,
}

/// What a response echoes: the request's head, and whether a read asked for base64.
#[derive(Debug, Clone)]
pub struct Echo {
    /// `type` and `requestId`.
    pub head: Head,
    /// The client asked for `"encoding": "base64"` on a read.
    pub base64: bool,
}

impl Door for Ws {
    type Wire = WsRequest;
    type Tag = Echo;
    type Answer = String;
    /// Every request type is one operation.
    type Task = std::convert::Infallible;

    fn decode(&self, _gw: &Gateway, wire: WsRequest) -> Decoded<Ws> {
        let WsRequest { head, msg } = wire;
        match op_of(&head, &Fields { msg: &msg }) {
            Ok(Some((op, base64))) => Decoded::Op {
                op,
                tag: Echo { head, base64 },
            },
            Ok(None) => {
                let msg = format!(
                    "unknown request type {:?}; expected list, read, write, mkdir, delete, rename, stat, subscribe, unsubscribe or permission",
                    head.kind
                );
                let reply = error_response(&head, code::METHOD_NOT_FOUND, &msg, None);
                message(head, reply)
            }
            Err(e) => {
                let reply = gateway_error_response(&head, &e);
                message(head, reply)
            }
        }
    }

    fn encode(&self, gw: &Gateway, tag: &Echo, out: Output) -> String {
        let v = data_response(&tag.head, render(gw, out, tag.base64));
        encode_reply(&tag.head, &v, self.max)
    }

    fn refuse(&self, tag: &Echo, e: &GatewayError) -> String {
        gateway_error_response(&tag.head, e).to_string()
    }

    fn run(&self, _: &Gateway, _: &Ops<'_>, _: &Echo, task: Self::Task) -> Ran<Ws> {
        match task {}
    }
}

/// A message that is no operation, answered with `reply` once recorded: under its
/// `type`, or as `invalid-message` when it has neither a type nor a `requestId`.
pub(crate) fn message(head: Head, reply: Value) -> Decoded<Ws> {
    let name = if head.request_id.is_none() && head.kind == "error" {
        "invalid-message".to_string()
    } else {
        head.kind.clone()
    };
    Decoded::Message {
        name,
        outcome: outcome_of(&reply),
        answer: reply.to_string(),
        tag: Echo {
            head,
            base64: false,
        },
    }
}

/// The outcome an error response carries, for its audit record.
pub(crate) fn outcome_of(reply: &Value) -> Result<(), (i64, String)> {
    match reply.get("errorInfo") {
        None => Ok(()),
        Some(e) => Err((
            e["code"].as_i64().unwrap_or(code::INTERNAL),
            e["message"].as_str().unwrap_or_default().to_string(),
        )),
    }
}

/// The part of a request its response echoes.
#[derive(Debug, Clone)]
pub struct Head {
    /// The request's `type`.
    pub kind: String,
    /// The request's `requestId`, any JSON value but null.
    pub request_id: Option<Value>,
}

/// A protocol-level error (not from the gateway).
fn bad(head: &Head, code: i64, message: impl Into<String>) -> Incoming {
    let reply = error_response(head, code, &message.into(), None);
    Incoming::Bad {
        head: head.clone(),
        reply,
    }
}

/// Parses one text message.
pub fn parse(text: &str) -> Incoming {
    let unknown = Head {
        kind: "error".into(),
        request_id: None,
    };
    let msg: Map<String, Value> = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return bad(
                &unknown,
                code::INVALID_REQUEST,
                "a message must be a JSON object",
            );
        }
        Err(e) => return bad(&unknown, code::PARSE_ERROR, format!("invalid JSON: {e}")),
    };
    let head = Head {
        kind: msg
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string(),
        request_id: msg.get("requestId").filter(|v| !v.is_null()).cloned(),
    };
    match msg.get("channel").and_then(Value::as_str) {
        Some(CHANNEL) => {}
        Some(other) => {
            return bad(
                &head,
                code::INVALID_REQUEST,
                format!("unknown channel {other:?}; only \"files\" is served"),
            );
        }
        None => {
            return bad(
                &head,
                code::INVALID_REQUEST,
                "missing \"channel\": \"files\"",
            );
        }
    }
    if msg.get("type").and_then(Value::as_str).is_none() {
        return bad(&head, code::INVALID_REQUEST, "missing \"type\"");
    }
    let fields = Fields { msg: &msg };
    match to_incoming(&head, &fields) {
        Ok(Some(incoming)) => incoming,
        Ok(None) => Incoming::Request(WsRequest { head, msg }),
        Err(e) => Incoming::Bad {
            reply: gateway_error_response(&head, &e),
            head,
        },
    }
}

/// Typed access to a message's fields.
struct Fields<'a> {
    msg: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn string(&self, name: &str) -> Result<Option<String>, GatewayError> {
        match self.msg.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(GatewayError::InvalidParams(format!(
                "\"{name}\" must be a string"
            ))),
        }
    }

    fn required(&self, name: &str) -> Result<String, GatewayError> {
        self.string(name)?
            .ok_or_else(|| GatewayError::InvalidParams(format!("missing \"{name}\"")))
    }

    fn flag(&self, name: &str) -> Result<bool, GatewayError> {
        match self.msg.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(GatewayError::InvalidParams(format!(
                "\"{name}\" must be a boolean"
            ))),
        }
    }

    /// `encoding`: true for base64, false for utf-8 (the default).
    fn base64(&self) -> Result<bool, GatewayError> {
        match self.string("encoding")?.as_deref() {
            None | Some("utf-8" | "utf8") => Ok(false),
            Some("base64") => Ok(true),
            Some(other) => Err(GatewayError::InvalidParams(format!(
                "unknown encoding {other:?}; use \"utf-8\" or \"base64\""
            ))),
        }
    }
}

/// The channel's own messages (subscriptions, permission replies); None for a request
/// for the gateway.
fn to_incoming(head: &Head, f: &Fields<'_>) -> Result<Option<Incoming>, GatewayError> {
    let incoming = match head.kind.as_str() {
        "subscribe" => Incoming::Subscribe {
            head: head.clone(),
            path: f.string("path")?.unwrap_or_else(|| "/".into()),
        },
        "unsubscribe" => Incoming::Unsubscribe { head: head.clone() },
        "permission" => permission_reply(head, f)?,
        _ => return Ok(None),
    };
    Ok(Some(incoming))
}

/// The channel's message type that asks for `op`, if the channel offers it.
pub(crate) fn type_of(op: OpId) -> Option<&'static str> {
    Some(match op {
        OpId::Ls => "list",
        OpId::ReadFile => "read",
        OpId::Write => "write",
        OpId::Mkdir => "mkdir",
        OpId::Rm => "delete",
        OpId::Rename => "rename",
        OpId::Stat => "stat",
        // Not the channel's, nor an operation added later until it offers it.
        _ => return None,
    })
}

/// A request's operation, and whether a read asked for base64; None for a type no one
/// serves.
fn op_of(head: &Head, f: &Fields<'_>) -> Result<Option<(Op, bool)>, GatewayError> {
    let kind = head.kind.as_str();
    let Some(id) = OpId::ALL
        .iter()
        .copied()
        .find(|&op| type_of(op) == Some(kind))
    else {
        return Ok(None);
    };
    let base64 = id == OpId::ReadFile && f.base64()?;
    let op = decode(id, f)?;
    if head.request_id.is_none() {
        return Err(GatewayError::InvalidParams("missing \"requestId\"".into()));
    }
    Ok(Some((op, base64)))
}

/// A request's fields as `op`, the operation its type names.
fn decode(op: OpId, f: &Fields<'_>) -> Result<Op, GatewayError> {
    Ok(match op {
        OpId::Ls => list_op(f)?,
        OpId::ReadFile => Op::ReadFile(ops::ReadFile {
            path: f.required("path")?,
        }),
        OpId::Write => write_op(f)?,
        OpId::Mkdir => Op::Mkdir(ops::Mkdir {
            path: f.required("path")?,
            recursive: f.flag("recursive")?,
        }),
        OpId::Rm => Op::Rm(ops::Rm {
            path: f.required("path")?,
            recursive: f.flag("recursive")?,
        }),
        OpId::Rename => Op::Rename(ops::Rename {
            from: f.required("oldPath")?,
            to: f.required("newPath")?,
            replace: true,
        }),
        OpId::Stat => Op::Stat(ops::Stat {
            path: f.required("path")?,
            follow: true,
        }),
        // Not offered (see `type_of`): no message reaches here for them.
        _ => {
            return Err(GatewayError::InvalidParams(format!(
                "{} is not a message type of this channel",
                op.name()
            )));
        }
    })
}

/// A `list` request: one directory's page (a recursive listing is refused).
fn list_op(f: &Fields<'_>) -> Result<Op, GatewayError> {
    if f.flag("recursive")? {
        return Err(GatewayError::InvalidParams(
            "recursive listing is not supported; list each directory".into(),
        ));
    }
    Ok(Op::Ls(ops::Ls {
        path: f.string("path")?.unwrap_or_else(|| "/".into()),
        cursor: f.string("cursor")?,
    }))
}

/// A `write` request: text, or bytes sent as base64 (`"encoding": "base64"`).
fn write_op(f: &Fields<'_>) -> Result<Op, GatewayError> {
    let path = f.required("path")?;
    let content = f.required("content")?;
    if !f.base64()? {
        return Ok(Op::Write(ops::Write::text(path, content)));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content.as_bytes())
        .map_err(|e| GatewayError::InvalidParams(format!("content is not valid base64: {e}")))?;
    Ok(Op::Write(ops::Write::bytes(path, bytes)))
}

/// A `permission` reply: `requestId` is the question's id, `answer` one of its options.
fn permission_reply(head: &Head, f: &Fields<'_>) -> Result<Incoming, GatewayError> {
    let Some(Value::String(id)) = &head.request_id else {
        return Err(GatewayError::InvalidParams(
            "a permission reply needs the question's \"requestId\" (a string such as \"perm-1\")"
                .into(),
        ));
    };
    let answer =
        permission::parse_answer(f.msg.get("answer")).map_err(GatewayError::InvalidParams)?;
    Ok(Incoming::Permission {
        head: head.clone(),
        id: id.clone(),
        answer,
    })
}

fn envelope(head: &Head) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("channel".into(), CHANNEL.into());
    // The type is echoed for the client to match answers; an unknown one is the
    // client's text, bounded like any echo.
    m.insert("type".into(), fsgate_base::error::echo(&head.kind).into());
    if let Some(id) = &head.request_id {
        m.insert("requestId".into(), id.clone());
    }
    m
}

/// `{channel, type, requestId, data}`.
pub(crate) fn data_response(head: &Head, data: Value) -> Value {
    let mut m = envelope(head);
    m.insert("data".into(), data);
    Value::Object(m)
}

/// `{channel, type, requestId, error, errorInfo}`: `error` is the channel's one-line
/// string, `errorInfo` the structured details `{code, message, rule?, reason?, path?}`.
/// For failures outside the gateway (malformed messages, limits of the door).
pub(crate) fn error_response(
    head: &Head,
    code: i64,
    message: &str,
    extra: Option<&Value>,
) -> Value {
    with_error(
        head,
        error_text(code, message),
        error_info(code, message, extra),
    )
}

/// The error response for a gateway failure, with its rule and reason.
pub(crate) fn gateway_error_response(head: &Head, e: &GatewayError) -> Value {
    let info = error_info(e.code(), &e.message(), e.data().as_ref());
    with_error(head, gateway_text(e), info)
}

/// The error response; its string and every string of `errorInfo` bounded as an
/// answer may echo them ([`fsgate_base::error::echo`]).
fn with_error(head: &Head, text: String, mut info: Value) -> Value {
    let mut m = envelope(head);
    m.insert(
        "error".into(),
        fsgate_base::error::echo(&text).into_owned().into(),
    );
    fsgate_base::error::echo_value(&mut info);
    m.insert("errorInfo".into(), info);
    Value::Object(m)
}

fn error_info(code: i64, message: &str, extra: Option<&Value>) -> Value {
    let mut info = json!({"code": code, "message": message});
    if let (Some(Value::Object(extra)), Some(obj)) = (extra, info.as_object_mut()) {
        for key in ["rule", "reason", "path"] {
            if let Some(v) = extra.get(key) {
                obj.insert(key.into(), v.clone());
            }
        }
    }
    info
}

/// The class of failure a code stands for, as the `error` string starts.
fn error_class(code: i64) -> &'static str {
    match code {
        code::PARSE_ERROR => "Invalid JSON",
        code::INVALID_REQUEST | code::INVALID_PARAMS => "Invalid request",
        code::METHOD_NOT_FOUND => "Unknown request type",
        code::NOT_FOUND => "File not found",
        code::REFUSED => "Access denied",
        code::LIMIT => "Limit exceeded",
        _ => "Internal error",
    }
}

/// `Class: detail`, or the detail capitalised if it already names its class.
fn error_text(code: i64, message: &str) -> String {
    let class = error_class(code);
    let named = message
        .get(..class.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(class));
    if named {
        format!("{class}{}", &message[class.len()..])
    } else {
        format!("{class}: {message}")
    }
}

/// The channel's string for a gateway failure: its class, the path, why.
fn gateway_text(e: &GatewayError) -> String {
    let with_path = |class: &str, path: &str, why: &str| match (path.is_empty(), why.is_empty()) {
        (true, _) => format!("{class}: {why}"),
        (false, true) => format!("{class}: {path}"),
        (false, false) => format!("{class}: {path}: {why}"),
    };
    match e {
        GatewayError::NotFound { path } => with_path("File not found", path, ""),
        GatewayError::MissingParent { path, .. } => {
            with_path("Parent directory not found", path, "")
        }
        GatewayError::Refused { reason, path, .. } => with_path("Access denied", path, reason),
        GatewayError::Limit { reason, path, .. } => with_path("Limit exceeded", path, reason),
        GatewayError::InvalidParams(m) => error_text(code::INVALID_PARAMS, m),
        other => error_text(other.code(), &other.message()),
    }
}

/// The `data` of a successful operation, paths workspace-rooted.
pub(crate) fn render(gw: &Gateway, out: Output, base64: bool) -> Value {
    let style = PathStyle::Rooted;
    match out {
        Output::File { content, encoding } => {
            if base64 && encoding == Encoding::Utf8 {
                let b64 = base64::engine::general_purpose::STANDARD.encode(content.as_bytes());
                json!({"content": b64, "encoding": Encoding::Base64.as_str()})
            } else {
                json!({"content": content, "encoding": encoding.as_str()})
            }
        }
        Output::Text(content) => json!({"content": content, "encoding": Encoding::Utf8.as_str()}),
        Output::Unit => json!({}),
        Output::Entries {
            entries,
            truncated,
            next,
        } => {
            let list: Vec<Value> = entries
                .into_iter()
                .map(|e| {
                    json!({
                        "name": e.name,
                        "type": e.kind.as_str(),
                        "size": e.size,
                        "modified": iso8601(e.modified.as_deref()),
                        "permissions": e.mode.map(format_permissions),
                        "path": gw.show_path(style, &e.path),
                    })
                })
                .collect();
            let v = crate::results::with_truncated(json!({"entries": list}), truncated);
            crate::results::with_next(v, next)
        }
        Output::Stat { path, info } => json!({
            "name": path.file_name().unwrap_or_default(),
            "type": info.kind,
            "size": info.size,
            "modified": iso8601(info.modified.as_deref()),
            "permissions": info.permissions,
            "path": gw.show_path(style, &path),
        }),
        // Search results have the JSON-RPC doors' shape, workspace-rooted.
        out @ (Output::Paths { .. } | Output::Grep { .. } | Output::Opened(_)) => {
            crate::results::render(gw, style, out)
        }
    }
}

/// A modification time as the channel writes it: ISO 8601 UTC with milliseconds
/// (`2026-05-01T12:00:00.000Z`, what JavaScript's `Date.toISOString` gives).
fn iso8601(rfc3339: Option<&str>) -> Value {
    use time::format_description::well_known::Rfc3339;
    let Some(t) = rfc3339.and_then(|s| time::OffsetDateTime::parse(s, &Rfc3339).ok()) else {
        return Value::Null;
    };
    let t = t.to_offset(time::UtcOffset::UTC);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&fmt).map_or(Value::Null, Value::from)
}

/// Answers up to this size are encoded in one pass (into a buffer that stops growing
/// here); larger ones are measured first (see [`encode_reply`]).
const ONE_PASS_MAX: usize = 64 * 1024;

/// Encodes a response, or, if it would be larger than `max` bytes, the error response
/// saying so. A small answer is encoded once, into a buffer bounded at
/// `ONE_PASS_MAX` (escaping its text is most of its cost). A larger one is measured
/// first without allocating, so an answer over the limit is never built, and one within
/// it is built in a buffer of its exact size.
pub(crate) fn encode_reply(head: &Head, v: &Value, max: usize) -> String {
    use crate::encode::json_upto;
    if let Some(small) = json_upto(v, max.min(ONE_PASS_MAX), 8 * 1024) {
        return String::from_utf8(small).unwrap_or_default();
    }
    let Some(size) = crate::results::json_len_upto(v, max) else {
        let msg = format!(
            "the answer is larger than the message limit of {max} bytes ([ws] max_message_bytes / [limits] max_message_bytes); text full of control characters grows up to six times when JSON-escaped"
        );
        let extra = json!({"rule": "limits.max_message_bytes", "reason": msg});
        return error_response(head, code::LIMIT, &msg, Some(&extra)).to_string();
    };
    let mut buf = Vec::with_capacity(size);
    crate::encode::write_json(&mut buf, v);
    String::from_utf8(buf).unwrap_or_default()
}

/// A pushed `change` event (no requestId).
pub(crate) fn change_event(c: &Change) -> Value {
    json!({
        "channel": CHANNEL,
        "type": "change",
        "event": event_name(c.kind),
        "path": c.path.to_rooted(),
        "fileType": if c.is_dir { "directory" } else { "file" },
    })
}

/// Pushed when events were lost (a slow client, or the kernel queue overflowed):
/// the client should re-list what it shows.
pub(crate) fn overflow_event(dropped: Option<u64>) -> Value {
    json!({
        "channel": CHANNEL,
        "type": "overflow",
        "dropped": dropped,
        "message": "change events were lost; list again to resynchronise",
    })
}

/// Pushed at connection (and again when it grows) when the kernel's inotify watch limit
/// left directories unwatched: changes in them are not reported.
pub(crate) fn unwatched_event(u: &fsgate_gateway::watch::Unwatched) -> Value {
    let paths: Vec<String> = u
        .first
        .iter()
        .map(fsgate_base::path::RelPath::to_rooted)
        .collect();
    let mut event = json!({
        "channel": CHANNEL,
        "type": "unwatched",
        "limit": u.limit,
        "limitValue": u.limit_value,
        "watched": u.watched,
        "unwatched": u.count,
        "paths": paths,
        "message": u.message(),
    });
    if let Some(name) = &u.workspace {
        event["workspace"] = name.as_ref().into();
    }
    event
}

/// The wire name of a change.
fn event_name(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Create => "create",
        ChangeKind::Modify => "modify",
        ChangeKind::Delete => "delete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway on an empty workspace (decoding the channel's requests needs none; the
    /// trait hands one over).
    fn gateway() -> (tempfile::TempDir, Gateway) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let pol = fsgate_policy::Policy::builtin_default().expect("policy");
        let ws = fsgate_workspace::Workspace::open(tmp.path()).expect("workspace");
        (tmp, Gateway::new(pol, ws))
    }

    /// `text` parsed and decoded as the connection does.
    fn decoded(text: &str) -> Result<Decoded<Ws>, Incoming> {
        let (_tmp, gw) = gateway();
        match parse(text) {
            Incoming::Request(r) => Ok(Ws { max: 4096 }.decode(&gw, r)),
            other => Err(other),
        }
    }

    fn op(text: &str) -> (Head, Op, bool) {
        match decoded(text) {
            Ok(Decoded::Op { op, tag }) => (tag.head, op, tag.base64),
            Ok(Decoded::Message { answer, .. }) => panic!("expected an op, got {answer}"),
            Err(other) => panic!("expected an op, got {other:?}"),
        }
    }

    /// The error a message is answered with, wherever it is found wrong (its envelope,
    /// or its fields).
    fn bad_code(text: &str) -> (i64, Value) {
        let v = match decoded(text) {
            Err(Incoming::Bad { reply, .. }) => reply,
            Ok(Decoded::Message { answer, .. }) => serde_json::from_str(&answer).expect("json"),
            Ok(Decoded::Op { op, .. }) => panic!("expected an error, got {op:?}"),
            Err(other) => panic!("expected an error, got {other:?}"),
        };
        (v["errorInfo"]["code"].as_i64().unwrap_or(0), v)
    }

    /// Each message type the channel offers names one operation, and a request of that
    /// type decodes to it.
    #[test]
    fn every_type_decodes_to_the_operation_it_names() {
        let offered: Vec<(OpId, &str)> = OpId::ALL
            .iter()
            .filter_map(|&id| type_of(id).map(|t| (id, t)))
            .collect();
        assert_eq!(offered.len(), 7, "{offered:?}");
        for &(id, kind) in &offered {
            let text = json!({"channel": "files", "type": kind, "requestId": 1,
                "path": "/a", "content": "x", "oldPath": "/a", "newPath": "/b"})
            .to_string();
            let (_, op, _) = op(&text);
            assert_eq!(op.id(), id, "{kind}");
            assert_eq!(
                offered.iter().filter(|(_, k)| *k == kind).count(),
                1,
                "{kind}"
            );
        }
    }

    /// The fix for the fuzz crash above lives in the build, not in code: test builds
    /// parse numbers exactly anyway (a dev-dependency turns the feature on), so only this
    /// check fails if the `fsgate` binary loses it.
    #[test]
    fn the_binary_reads_numbers_exactly() {
        let manifest: toml::Table = toml::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../Cargo.toml"
        )))
        .unwrap_or_default();
        let features = &manifest["workspace"]["dependencies"]["serde_json"]["features"];
        assert!(
            features
                .as_array()
                .is_some_and(|f| f.iter().any(|v| v.as_str() == Some("float_roundtrip"))),
            "serde_json must be built with float_roundtrip: {features:?}"
        );
    }

    #[test]
    fn maps_every_type_to_its_op() {
        let (h, o, _) = op(r#"{"channel":"files","type":"list","requestId":7}"#);
        assert_eq!(h.request_id, Some(json!(7)));
        // Found by fuzzing: without serde_json's exact float parsing this id came back
        // as another number (7.777777699999999e30).
        let (h, _, _) =
            op(r#"{"channel":"files","type":"list","requestId":777777770000000006500433e7}"#);
        let echoed = serde_json::to_string(&h.request_id).unwrap_or_default();
        assert_eq!(serde_json::from_str::<Value>(&echoed).ok(), h.request_id);
        assert_eq!(h.request_id, Some(json!(7.7777777e30)));
        assert!(matches!(o, Op::Ls(ops::Ls { path, cursor: None }) if path == "/"));
        let (_, o, b) = op(
            r#"{"channel":"files","type":"read","requestId":"a","path":"/x","encoding":"base64"}"#,
        );
        assert!(b);
        assert!(matches!(o, Op::ReadFile(ops::ReadFile { path }) if path == "/x"));
        let (_, o, _) = op(
            r#"{"channel":"files","type":"write","requestId":1,"path":"/b","content":"AAE=","encoding":"base64"}"#,
        );
        assert!(
            matches!(o, Op::Write(ops::Write { content: ops::Content::Bytes(b), .. }) if b == vec![0, 1])
        );
        let (_, o, _) =
            op(r#"{"channel":"files","type":"write","requestId":1,"path":"/t","content":"hi"}"#);
        assert!(
            matches!(o, Op::Write(ops::Write { content: ops::Content::Text(t), .. }) if t == "hi")
        );
        let (_, o, _) =
            op(r#"{"channel":"files","type":"mkdir","requestId":1,"path":"/d","recursive":true}"#);
        assert!(matches!(
            o,
            Op::Mkdir(ops::Mkdir {
                recursive: true,
                ..
            })
        ));
        let (_, o, _) = op(r#"{"channel":"files","type":"delete","requestId":1,"path":"/d"}"#);
        assert!(matches!(
            o,
            Op::Rm(ops::Rm {
                recursive: false,
                ..
            })
        ));
        let (_, o, _) = op(
            r#"{"channel":"files","type":"rename","requestId":1,"oldPath":"/a","newPath":"/b"}"#,
        );
        assert!(
            matches!(o, Op::Rename(ops::Rename { from, to, replace: true }) if from == "/a" && to == "/b")
        );
        let (_, o, _) = op(r#"{"channel":"files","type":"stat","requestId":1,"path":"/a"}"#);
        assert!(matches!(o, Op::Stat(ops::Stat { .. })));
    }

    #[test]
    fn malformed_messages_get_the_contract_codes_and_keep_the_request_id() {
        assert_eq!(bad_code("{nope").0, code::PARSE_ERROR);
        assert_eq!(bad_code("[1]").0, code::INVALID_REQUEST);
        assert_eq!(
            bad_code(r#"{"channel":"x","type":"list","requestId":1}"#).0,
            code::INVALID_REQUEST
        );
        let (c, v) = bad_code(r#"{"channel":"files","type":"frob","requestId":"q"}"#);
        assert_eq!(c, code::METHOD_NOT_FOUND);
        assert_eq!(v["requestId"], json!("q"));
        assert_eq!(v["type"], json!("frob"));
        let (c, v) = bad_code(r#"{"channel":"files","type":"read","requestId":3}"#);
        assert_eq!(c, code::INVALID_PARAMS);
        assert_eq!(v["requestId"], json!(3));
        assert_eq!(
            bad_code(r#"{"channel":"files","type":"read","path":"/a"}"#).0,
            code::INVALID_PARAMS
        );
        assert_eq!(
            bad_code(r#"{"channel":"files","type":"write","requestId":1,"path":"/a","content":"!!","encoding":"base64"}"#).0,
            code::INVALID_PARAMS
        );
        assert_eq!(
            bad_code(
                r#"{"channel":"files","type":"read","requestId":1,"path":"/a","encoding":"latin1"}"#
            )
            .0,
            code::INVALID_PARAMS
        );
    }

    /// A message is recorded under its type, or as `invalid-message` when it has
    /// neither a type nor a `requestId`; its answer is its reply's text.
    #[test]
    fn a_message_is_named_by_its_type_and_answered_with_its_reply() {
        let name_of = |kind: &str, request_id: Option<Value>| {
            let head = Head {
                kind: kind.into(),
                request_id,
            };
            let reply = error_response(&head, code::INVALID_REQUEST, "no", None);
            match message(head, reply.clone()) {
                Decoded::Message {
                    name,
                    answer,
                    outcome,
                    ..
                } => {
                    assert_eq!(answer, reply.to_string());
                    assert_eq!(outcome, Err((code::INVALID_REQUEST, "no".into())));
                    name
                }
                Decoded::Op { .. } => panic!("an op"),
            }
        };
        assert_eq!(name_of("error", None), "invalid-message");
        assert_eq!(name_of("error", Some(json!(1))), "error");
        assert_eq!(name_of("frob", None), "frob");
    }

    #[test]
    fn subscribe_defaults_to_the_root() {
        match parse(r#"{"channel":"files","type":"subscribe"}"#) {
            Incoming::Subscribe { path, head } => {
                assert_eq!(path, "/");
                assert!(head.request_id.is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(r#"{"channel":"files","type":"unsubscribe"}"#),
            Incoming::Unsubscribe { .. }
        ));
    }

    #[test]
    fn an_answer_over_the_limit_becomes_a_limit_error() {
        let head = Head {
            kind: "read".into(),
            request_id: Some(json!(9)),
        };
        let small = data_response(&head, json!({"content": "hi"}));
        assert_eq!(encode_reply(&head, &small, 4096), small.to_string());
        // Over the one-pass buffer, within the limit: measured, then built whole.
        let mid = data_response(&head, json!({"content": "x".repeat(ONE_PASS_MAX * 2)}));
        assert_eq!(encode_reply(&head, &mid, ONE_PASS_MAX * 4), mid.to_string());
        // Over the limit, though the limit is over the one-pass buffer.
        let v: Value =
            serde_json::from_str(&encode_reply(&head, &mid, ONE_PASS_MAX + 10)).expect("json");
        assert_eq!(v["errorInfo"]["code"], json!(code::LIMIT));
        let big = data_response(&head, json!({"content": "\u{1}".repeat(1000)}));
        let text = encode_reply(&head, &big, 4096);
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["errorInfo"]["code"], json!(code::LIMIT));
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|s| s.starts_with("Limit exceeded: "))
        );
        assert_eq!(v["requestId"], json!(9));
        assert!(text.len() < 1024, "{text}");
        assert_eq!(outcome_of(&v).map_err(|e| e.0), Err(code::LIMIT));
    }

    #[test]
    fn times_are_iso_8601_with_milliseconds() {
        assert_eq!(
            iso8601(Some("2026-05-01T12:00:00.123456789Z")),
            json!("2026-05-01T12:00:00.123Z")
        );
        assert_eq!(
            iso8601(Some("2026-05-01T12:00:00Z")),
            json!("2026-05-01T12:00:00.000Z")
        );
        assert_eq!(iso8601(None), Value::Null);
    }

    #[test]
    fn errors_are_the_channel_strings() {
        let head = Head {
            kind: "read".into(),
            request_id: Some(json!(1)),
        };
        let text = |e: GatewayError| gateway_error_response(&head, &e)["error"].clone();
        let missing = GatewayError::NotFound {
            path: "/src/missing.ts".into(),
        };
        assert_eq!(text(missing), json!("File not found: /src/missing.ts"));
        let bad = GatewayError::InvalidParams("missing \"path\"".into());
        assert_eq!(text(bad), json!("Invalid request: missing \"path\""));
        assert_eq!(
            error_text(code::PARSE_ERROR, "invalid JSON: EOF"),
            "Invalid JSON: EOF"
        );
        let (_, v) = bad_code(r#"{"channel":"files","type":"frob","requestId":"q"}"#);
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|s| s.starts_with("Unknown request type \"frob\"")),
            "{v}"
        );
    }

    #[test]
    fn refusals_carry_rule_and_reason() {
        let head = Head {
            kind: "read".into(),
            request_id: Some(json!(1)),
        };
        let e = GatewayError::Refused {
            reason: "secret".into(),
            rule: "secrets:dotenv".into(),
            path: "/.env".into(),
        };
        let v = gateway_error_response(&head, &e);
        assert_eq!(v["error"], json!("Access denied: /.env: secret"));
        assert_eq!(v["errorInfo"]["code"], json!(code::REFUSED));
        assert_eq!(v["errorInfo"]["rule"], json!("secrets:dotenv"));
        assert_eq!(v["errorInfo"]["reason"], json!("secret"));
        assert_eq!(v["errorInfo"]["path"], json!("/.env"));
        assert_eq!(v["requestId"], json!(1));
        assert_eq!(v["channel"], json!("files"));
    }
}
