//! What the `fsgate acp` proxy may relay from the agent to the editor, decided over the
//! raw bytes of one line ([`classify_agent_line`]).
//!
//! An editor serves file and terminal methods. A lenient one may match a method name
//! case-insensitively, trim it, take the first or the last of two `method` members, read
//! `"METHOD"` for `"method"` (Go's `encoding/json` does), or serve a batch. So the proxy
//! relays a line only if it parses to exactly one JSON-RPC 2.0 message with no member
//! named twice (or spelled oddly) at its top level, whose method, normalised, is not in a
//! guarded namespace (`fs`, `_fsgate`, `terminal`). A guarded method spelled exactly
//! (`fs/read_text_file`, no escapes) is fsgate's to answer; any other spelling of one,
//! and anything ambiguous, is refused: never relayed.
//!
//! How a line's members are read as written is `relay/members.rs`.

mod members;

use serde_json::Value;
use serde_json::value::RawValue;

use super::jsonrpc::{self, Incoming};
use fsgate_base::error::code;
use members::{ESCAPED_MARK, Members};

/// Namespaces the editor must never be asked to serve by the agent.
const GUARDED: [&str; 3] = ["fs", "_fsgate", "terminal"];

/// Top-level members of a JSON-RPC message: each may appear once, spelled exactly.
const MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// What to do with one line from the agent.
#[derive(Debug)]
pub enum Relay {
    /// Exactly one well-formed message naming no guarded method: relay the raw line.
    /// Always [`Incoming::Request`], [`Incoming::Notification`] or [`Incoming::Response`].
    Forward(Incoming),
    /// A request for `fs/*` or `_fsgate/*`, spelled exactly: fsgate answers it.
    Serve {
        /// The id, as received.
        id: Value,
        /// The method, exactly as the namespace spells it.
        method: String,
        /// Params (`null` if absent).
        params: Value,
    },
    /// A `terminal/*` request (with an id) or notification, spelled exactly: relayed
    /// only if the policy allows terminals.
    Terminal {
        /// The id; `None` for a notification.
        id: Option<Value>,
        /// The method.
        method: String,
        /// Params (`null` if absent).
        params: Value,
    },
    /// Never relayed: answered with `error` for each of `ids`, and recorded.
    Refuse(Refusal),
}

/// A line the proxy refuses to relay.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// Ids of the requests to answer with the error (none for a notification, a
    /// response, or a line whose id cannot be read).
    pub ids: Vec<Value>,
    /// What the audit record names: the method if one was read, else `invalid-message`.
    pub name: String,
    /// The params, if read (the audit record's session comes from them).
    pub params: Value,
    /// The JSON-RPC error object answered.
    pub error: Value,
}

/// Classifies one line (without its newline) that the agent wrote. Pure: no I/O.
pub fn classify_agent_line(line: &[u8]) -> Relay {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(_) => return invalid(Vec::new(), None, Value::Null, "not UTF-8"),
    };
    let raw: &RawValue = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let err = jsonrpc::error_object(code::PARSE_ERROR, &format!("parse error: {e}"), None);
            return refusal(Vec::new(), None, Value::Null, err);
        }
    };
    match raw.get().as_bytes().first() {
        Some(b'{') => classify_object(raw.get()),
        Some(b'[') => refuse_batch(raw.get()),
        _ => invalid(Vec::new(), None, Value::Null, "expected a JSON object"),
    }
}

/// The normalised form of a method or member name, as a lenient peer might compare it:
/// whitespace, control and invisible format characters dropped, full-width forms
/// folded to ASCII, ASCII lower-cased (and the two non-ASCII letters Go's JSON
/// decoder folds onto `s` and `k`).
pub fn skeleton(name: &str) -> String {
    name.chars()
        .filter(|c| !(c.is_whitespace() || c.is_control() || is_format(*c)))
        .map(|c| match c {
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            '\u{017F}' => 's',
            '\u{212A}' => 'k',
            _ => c,
        })
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// True if `method`, normalised, names a guarded namespace: the namespace followed by
/// nothing or by a separator (`fs/`, `FS.x`, ` fs\x`), not by more of a name (`fsx`).
pub fn is_guarded(method: &str) -> bool {
    let s = skeleton(method);
    GUARDED.iter().any(|ns| match s.strip_prefix(ns) {
        Some(rest) => !rest
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-'),
        None => false,
    })
}

/// Unicode format characters (category Cf) that render as nothing: zero-width
/// spaces and joiners, bidi controls, the soft hyphen, BOM.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

impl Members<'_> {
    /// A member named twice, or a JSON-RPC member spelled other than exactly.
    fn ambiguity(&self) -> Option<String> {
        let mut seen: Vec<String> = Vec::with_capacity(self.0.len());
        for (key, _) in &self.0 {
            if let Some(k) = key.strip_prefix(ESCAPED_MARK) {
                return Some(format!("member {k:?} is written with escapes"));
            }
            let norm = skeleton(key);
            if seen.contains(&norm) {
                return Some(format!("member {key:?} appears twice"));
            }
            if MEMBERS.contains(&norm.as_str()) && norm != *key {
                return Some(format!("member {key:?} is not spelled {norm:?}"));
            }
            seen.push(norm);
        }
        None
    }
}

fn classify_object(text: &str) -> Relay {
    let members: Members = match serde_json::from_str(text) {
        Ok(m) => m,
        Err(e) => return invalid(Vec::new(), None, Value::Null, &e.to_string()),
    };
    let method_raw = members.get("method");
    if method_raw.is_some()
        && let Some(raw) = members.get("id")
        && !jsonrpc::echoes_exactly(raw.get())
    {
        // fsgate could not answer under this id, nor could the editor be trusted to.
        let err = jsonrpc::error_object(code::INVALID_REQUEST, jsonrpc::INEXACT_ID, None);
        return refusal(Vec::new(), None, Value::Null, err);
    }
    let id = members.get("id").and_then(request_id);
    // Answer only what is shaped as a request: an id of a response belongs to the
    // editor's requests, and an error sent back under it would reach the wrong one.
    let ids: Vec<Value> = match (&id, method_raw) {
        (Some(id), Some(_)) => vec![id.clone()],
        _ => Vec::new(),
    };
    let params = members
        .get("params")
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(Value::Null);
    let method = match method_raw.map(|m| serde_json::from_str::<Value>(m.get())) {
        None => None,
        Some(Ok(Value::String(m))) => Some(m),
        Some(_) => return invalid(ids, None, params, "method must be a string"),
    };
    if let Some(why) = members.ambiguity() {
        return invalid(ids, method.as_deref(), params, &why);
    }
    // JSON lets a carriage return stand between tokens, and some line readers (Node's
    // `readline`) end a line there: `{"a":\r{...}\r}` would reach such an editor as a
    // line of its own, unclassified.
    if text.contains('\r') {
        let why = "a carriage return inside the line";
        return invalid(ids, method.as_deref(), params, why);
    }
    let plain = method_raw.is_some_and(|r| method.as_ref().is_some_and(|m| is_plain(r, m)));
    if let Some(m) = method.as_deref()
        && is_guarded(m)
        && !(plain && is_canonical(m))
    {
        return look_alike(ids, m, params);
    }
    let mut map = serde_json::Map::new();
    for (k, v) in &members.0 {
        match serde_json::from_str::<Value>(v.get()) {
            Ok(v) => map.insert(k.clone(), v),
            Err(e) => return invalid(ids, method.as_deref(), params, &e.to_string()),
        };
    }
    decide(
        jsonrpc::classify_value(Value::Object(map)),
        ids,
        method,
        params,
    )
}

/// The verdict for a message that parsed unambiguously, its method plain if guarded.
fn decide(incoming: Incoming, ids: Vec<Value>, method: Option<String>, params: Value) -> Relay {
    if let Incoming::Request { id, .. } = &incoming
        && super::acp_ask::is_ours(id)
    {
        // The editor's answer under this id would be taken by fsgate, not relayed back.
        let why = format!(
            "ids starting with {:?} are fsgate's own",
            super::acp_ask::ASK_ID_PREFIX
        );
        return invalid(ids, method.as_deref(), params, &why);
    }
    if let Some(call) = fsgates_tool_call(&incoming) {
        // The editor would show the agent's words as fsgate's question or change note.
        let why = format!("tool call id {call:?} is fsgate's own");
        return invalid(ids, method.as_deref(), params, &why);
    }
    match incoming {
        Incoming::Request { id, method, params } if is_guarded(&method) => {
            if method.starts_with("terminal/") {
                Relay::Terminal {
                    id: Some(id),
                    method,
                    params,
                }
            } else {
                Relay::Serve { id, method, params }
            }
        }
        Incoming::Notification { method, params } if is_guarded(&method) => {
            if method.starts_with("terminal/") {
                Relay::Terminal {
                    id: None,
                    method,
                    params,
                }
            } else {
                let err = refused_error(&method, "a file request must have an id");
                refusal(Vec::new(), Some(&method), params, err)
            }
        }
        Incoming::Invalid { error, .. } => refusal(ids, method.as_deref(), params, error),
        other => Relay::Forward(other),
    }
}

/// The tool call id in fsgate's own namespace (its questions, its change notes) that an
/// agent's message names, if any: `params.toolCall.toolCallId` or
/// `params.update.toolCallId`.
fn fsgates_tool_call(incoming: &Incoming) -> Option<String> {
    let params = match incoming {
        Incoming::Request { params, .. } | Incoming::Notification { params, .. } => params,
        _ => return None,
    };
    [
        &params["toolCall"]["toolCallId"],
        &params["update"]["toolCallId"],
    ]
    .into_iter()
    .filter_map(Value::as_str)
    .find(|id| id.starts_with("fsgate-"))
    .map(str::to_owned)
}

/// An id a request may carry (number or string); `null` is no usable id.
fn request_id(raw: &RawValue) -> Option<Value> {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(v @ (Value::Number(_) | Value::String(_))) => Some(v),
        _ => None,
    }
}

/// The string's JSON text is the string itself in quotes: no escapes.
fn is_plain(raw: &RawValue, decoded: &str) -> bool {
    let r = raw.get();
    r.len() == decoded.len() + 2 && r.get(1..r.len() - 1) == Some(decoded)
}

/// Exactly a guarded namespace's spelling: `fs/...`, `_fsgate/...`, `terminal/...`,
/// ASCII, nothing a normalisation would change.
fn is_canonical(method: &str) -> bool {
    skeleton(method) == method
        && GUARDED
            .iter()
            .any(|ns| method.strip_prefix(ns).is_some_and(|r| r.starts_with('/')))
}

/// A batch: refused whole (ACP has none); each request in it is answered.
fn refuse_batch(text: &str) -> Relay {
    let items: Vec<&RawValue> = serde_json::from_str(text).unwrap_or_default();
    let requests: Vec<Members> = items
        .iter()
        .filter_map(|item| serde_json::from_str::<Members>(item.get()).ok())
        .filter(|m| m.get("method").is_some())
        .collect();
    let ids = requests
        .iter()
        .filter_map(|m| m.get("id").and_then(request_id))
        .collect();
    // The first request's params name the session the record is filed under.
    let params = requests
        .iter()
        .find_map(|m| m.get("params"))
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(Value::Null);
    invalid(
        ids,
        None,
        params,
        "batches are not relayed; send one message per line",
    )
}

fn look_alike(ids: Vec<Value>, method: &str, params: Value) -> Relay {
    let err = refused_error(
        method,
        "it looks like a file or terminal method but is not spelled exactly",
    );
    refusal(ids, Some(method), params, err)
}

fn refused_error(method: &str, why: &str) -> Value {
    let reason = format!("method {method:?}: {why}; fsgate does not relay it to the editor");
    jsonrpc::error_object(
        code::REFUSED,
        &format!("refused: {reason} (rule acp-relay)"),
        Some(serde_json::json!({"reason": reason, "rule": "acp-relay", "path": Value::Null})),
    )
}

fn invalid(ids: Vec<Value>, method: Option<&str>, params: Value, why: &str) -> Relay {
    let msg = format!("invalid request: {why} (not relayed)");
    let err = jsonrpc::error_object(code::INVALID_REQUEST, &msg, None);
    refusal(ids, method, params, err)
}

fn refusal(ids: Vec<Value>, method: Option<&str>, params: Value, error: Value) -> Relay {
    Relay::Refuse(Refusal {
        ids,
        name: method.unwrap_or("invalid-message").to_string(),
        params,
        error,
    })
}

#[cfg(test)]
mod tests;
