//! What a line the client sent is, judged without building it as a JSON value: nothing,
//! a message the pump refuses itself, a request (stateless or not), a notification or
//! response to pass on, or a cancellation. Another door that carries MCP messages
//! (HTTP) routes by the same judgement.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::era::Marked;
use super::flow::id_key;
use super::guard::STAND_IN;

use fsgate_base::error::code;

/// The members of a message the pump looks at; the rest is skipped unread.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Marked,
}

/// A line as the pump sees it.
pub(crate) enum Line {
    /// Whitespace, or what is left of a cut oversized line (its stand-in follows).
    Skip,
    /// A message the pump answers itself: its record name, id and error.
    Refuse(String, Value, (i64, String)),
    /// A request, stateless (2026-07-28 `_meta`) or not.
    Request {
        key: String,
        method: String,
        stateless: bool,
    },
    /// A notification or a response from the client: recorded under this name, passed on.
    Pass(String),
    /// A cancellation of the request with this key: recorded, passed on.
    Cancel(Option<String>),
}

/// What a line read through the stdio door's guard (`guard.rs`) is: its stand-in for
/// an oversized line (a NUL first), what is left of that line (a NUL last), or a line
/// the client sent, judged by [`classify`].
pub(crate) fn classify_guarded(line: &[u8]) -> Line {
    // The marks are the line's very first and last bytes: a client's spaces before a
    // cut cannot move one there (its NULs are passed as 0x01).
    let raw = line.strip_suffix(b"\n").unwrap_or(line);
    match raw {
        [STAND_IN, stand_in @ ..] => oversized(stand_in),
        [.., 0] => Line::Skip,
        _ => classify(line),
    }
}

/// What a line is, judged without building it as a JSON value.
pub(crate) fn classify(line: &[u8]) -> Line {
    let body = line.trim_ascii();
    if body.is_empty() {
        return Line::Skip;
    }
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(body) {
        return Line::Refuse(
            "invalid-message".into(),
            Value::Null,
            (code::PARSE_ERROR, format!("parse error: {e}")),
        );
    }
    if body.starts_with(b"[") {
        let err = (
            code::INVALID_REQUEST,
            "JSON-RPC batches are not supported; send one message per line".into(),
        );
        return Line::Refuse("batch".into(), Value::Null, err);
    }
    let Ok(env) = serde_json::from_slice::<Envelope>(body) else {
        let err = (
            code::INVALID_REQUEST,
            "not a JSON-RPC message: an object with a string method".into(),
        );
        return Line::Refuse("invalid-message".into(), Value::Null, err);
    };
    let id = env.id.filter(|v| !v.is_null());
    let usable = id
        .as_ref()
        .is_none_or(|v| v.is_string() || v.is_i64() || v.is_u64());
    if env.jsonrpc.as_deref() != Some("2.0") || !usable {
        let err = (code::INVALID_REQUEST, "not a JSON-RPC 2.0 message: \"jsonrpc\": \"2.0\" and a string or integer id are required".into());
        let name = env.method.unwrap_or_else(|| "invalid-message".into());
        return Line::Refuse(name, id.filter(|_| usable).unwrap_or(Value::Null), err);
    }
    match (env.method, id) {
        (Some(m), Some(id)) => Line::Request {
            key: id_key(&id),
            method: m,
            stateless: env.params.0,
        },
        (Some(m), None) if m == "notifications/cancelled" => Line::Cancel(cancelled_key(body)),
        (Some(m), None) => Line::Pass(m),
        (None, Some(_)) => Line::Pass("response".into()),
        (None, None) => {
            let err = (
                code::INVALID_REQUEST,
                "not a JSON-RPC message: no method and no id".into(),
            );
            Line::Refuse("invalid-message".into(), Value::Null, err)
        }
    }
}

/// The guard's stand-in for an oversized line (small: parsed whole).
fn oversized(body: &[u8]) -> Line {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let id = (v.get("id"))
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .cloned()
        .unwrap_or(Value::Null);
    let (bytes, limit) = (&v["params"]["bytes"], &v["params"]["limit"]);
    let message = format!(
        "message of {bytes} bytes exceeds the limit of {limit} bytes (rule limits.max_message_bytes); it was discarded"
    );
    Line::Refuse(
        "oversized-message".into(),
        id,
        (code::INVALID_REQUEST, message),
    )
}

/// The key of the request a `notifications/cancelled` names.
fn cancelled_key(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "requestId")]
        request_id: Value,
    }
    #[derive(Deserialize)]
    struct Cancelled {
        params: Params,
    }
    let c: Cancelled = serde_json::from_slice(body).ok()?;
    Some(id_key(&c.params.request_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> String {
        match classify(line.as_bytes()) {
            Line::Skip => "skip".into(),
            Line::Refuse(name, id, (code, _)) => format!("refuse {name} {id} {code}"),
            Line::Request {
                key,
                method,
                stateless,
            } => format!(
                "request {key} {method}{}",
                if stateless { " stateless" } else { "" }
            ),
            Line::Pass(name) => format!("pass {name}"),
            Line::Cancel(key) => format!("cancel {key:?}"),
        }
    }

    /// Only the guard's marks make a stand-in or a skipped line: a client's message
    /// naming the stand-in's method is a request like any other, and a line of the
    /// client's ending in a NUL is refused (0x01 here: the guard passes its NULs so).
    #[test]
    fn only_the_guards_marks_are_stand_ins() {
        let guarded = |line: &[u8]| match classify_guarded(line) {
            Line::Skip => "skip".into(),
            Line::Refuse(name, id, (code, message)) => {
                format!("refuse {name} {id} {code} {message}")
            }
            other => format!("{}", matches!(other, Line::Request { .. })),
        };
        assert_eq!(guarded(b"{\"a\":\0\n"), "skip");
        // A cut line of spaces is still a cut line, not a stand-in.
        assert_eq!(guarded(b"      \0\n"), "skip");
        let stand_in = b"\0{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"fsgate/oversized\",\"params\":{\"bytes\":900,\"limit\":64}}\n";
        let said = guarded(stand_in);
        assert!(
            said.starts_with("refuse oversized-message 7 -32600 message of 900 bytes"),
            "{said}"
        );
        let forged = &stand_in[1..];
        assert_eq!(guarded(forged), "true");
        assert_eq!(
            kind(std::str::from_utf8(forged).unwrap()),
            "request 7 fsgate/oversized"
        );
        assert!(
            guarded(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x01\n")
                .starts_with("refuse invalid-message null -32700")
        );
        assert_eq!(kind("{\"a\":\0\n"), "refuse invalid-message null -32700");
    }

    #[test]
    fn lines_are_told_apart() {
        assert_eq!(kind("  \n"), "skip");
        assert_eq!(kind("not json"), "refuse invalid-message null -32700");
        assert_eq!(
            kind("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"),
            "refuse batch null -32600"
        );
        assert_eq!(kind("{\"method\":5}"), "refuse invalid-message null -32600");
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\"}"),
            "refuse invalid-message null -32600"
        );
        let j = |body: &str| format!("{{\"jsonrpc\":\"2.0\",{body}}}");
        let cases = [
            (
                j("\"id\":\"a\",\"method\":\"ping\",\"params\":{\"x\":[1]}"),
                "request \"a\" ping",
            ),
            (
                j("\"method\":\"notifications/initialized\""),
                "pass notifications/initialized",
            ),
            (j("\"id\":3,\"result\":{}"), "pass response"),
            (
                j(
                    "\"id\":2,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}",
                ),
                "request 2 tools/list stateless",
            ),
            (
                "{\"id\":3,\"method\":\"ping\"}".into(),
                "refuse ping 3 -32600",
            ),
            (
                j("\"id\":{},\"method\":\"ping\""),
                "refuse ping null -32600",
            ),
            (
                j("\"id\":1.5,\"method\":\"ping\""),
                "refuse ping null -32600",
            ),
            (
                j("\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":4}"),
                "cancel Some(\"4\")",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(kind(&line), want, "{line}");
        }
    }
}
