//! A response's JSON: the envelope echoing the request's head, data and error responses
//! in the channel's words (`error`, `errorInfo`), the outcome an error response
//! carries for its record, and the encoded text, within the message limit.

use serde_json::{Map, Value, json};

use super::channel::CHANNEL;

use fsgate_base::error::{GatewayError, code};

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
pub(super) fn error_text(code: i64, message: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
