//! The files channel's wire format: JSON text messages in, [`Op`](fsgate_gateway::ops::Op)s out, and the
//! responses and pushed events back. Described for clients in docs/ws-protocol.md.

//! This file: a message parsed, a request decoded, its answer encoded (the door);
//! `fields.rs` reads a request's fields into its operation, `response.rs` builds the
//! responses, `render.rs` an operation's data, `events.rs` the pushed events.

use serde_json::{Map, Value};

use super::channel::CHANNEL;
use super::permission;
use crate::door::{Decoded, Door, Ops, Ran};
use fsgate_base::error::{GatewayError, code};
use fsgate_gateway::Gateway;
use fsgate_gateway::ask::Answer;

use fsgate_gateway::ops::Output;

use super::fields::{Fields, op_of};
use super::render::render;
use super::response::{
    Head, data_response, encode_reply, error_response, gateway_error_response, outcome_of,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::fields::type_of;
    use crate::ws::response::error_text;
    use fsgate_gateway::ops::{self, Op, OpId};
    use serde_json::json;

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
        assert!(matches!(o, Op::Ls(ops::Ls { path, cursor: None, .. }) if path == "/"));
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
}
