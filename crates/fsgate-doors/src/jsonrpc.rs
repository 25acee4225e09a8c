//! JSON-RPC 2.0 framing: classify an incoming message, build responses.
//!
//! Ids are kept as the raw JSON value they arrived as (number or string, `0` included)
//! and echoed unchanged.

use serde_json::{Value, json};

use fsgate_base::error::code;

/// An incoming message, classified.
#[derive(Debug)]
pub enum Incoming {
    /// A request: has an `id`, expects a response.
    Request {
        /// The id, as received.
        id: Value,
        /// Method name.
        method: String,
        /// Params (`null` if absent).
        params: Value,
    },
    /// A notification: no `id`, no response.
    Notification {
        /// Method name.
        method: String,
        /// Params.
        params: Value,
    },
    /// A response to a request we sent.
    Response {
        /// The id.
        id: Value,
        /// The whole message.
        message: Value,
    },
    /// Not valid: answer with this error (id null when it could not be read).
    Invalid {
        /// The id, if one could be read.
        id: Value,
        /// The error object.
        error: Value,
    },
}

/// Parses one line.
pub fn classify(line: &[u8]) -> Incoming {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: error_object(code::PARSE_ERROR, &format!("parse error: {e}"), None),
            };
        }
    };
    // Only a fractional or huge number can change on its way back; look at its text then.
    if v.get("id")
        .and_then(Value::as_number)
        .is_some_and(|n| n.is_f64())
        && !raw_id(line).is_some_and(|raw| echoes_exactly(&raw))
    {
        return Incoming::Invalid {
            id: Value::Null,
            error: error_object(code::INVALID_REQUEST, INEXACT_ID, None),
        };
    }
    classify_value(v)
}

/// Why an id is refused that would not come back as it was sent.
pub(crate) const INEXACT_ID: &str = "invalid request: a numeric id must be an integer of at most 64 bits \
     (or use a string), so that the answer can echo it exactly";

/// The JSON text of a message's `id` member.
fn raw_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    let m: IdOnly<'_> = serde_json::from_slice(line).ok()?;
    m.id.map(|r| r.get().to_string())
}

/// True if the id whose JSON text is `raw` is written back exactly as it came: a number
/// beyond 64 bits, or one with a fraction or exponent, may not be (`1e88`, `1.50`), and
/// an answer under another id reaches no request.
pub(crate) fn echoes_exactly(raw: &str) -> bool {
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Number(_)) => serde_json::to_string(&v).is_ok_and(|t| t == raw.trim()),
        Ok(_) => true,
        Err(_) => false,
    }
}

/// Classifies a parsed message.
pub(crate) fn classify_value(v: Value) -> Incoming {
    let Value::Object(mut obj) = v else {
        return Incoming::Invalid {
            id: Value::Null,
            error: error_object(
                code::INVALID_REQUEST,
                "invalid request: expected a JSON object (batches are not supported)",
                None,
            ),
        };
    };
    let id = obj.get("id").cloned();
    if let Some(id) = &id
        && !matches!(id, Value::Number(_) | Value::String(_) | Value::Null)
    {
        return Incoming::Invalid {
            id: Value::Null,
            error: error_object(
                code::INVALID_REQUEST,
                "invalid request: id must be a number or a string",
                None,
            ),
        };
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid {
            id: id.unwrap_or(Value::Null),
            error: error_object(
                code::INVALID_REQUEST,
                "invalid request: \"jsonrpc\" must be \"2.0\"",
                None,
            ),
        };
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params").unwrap_or(Value::Null);
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
        Some(_) => Incoming::Invalid {
            id: id.unwrap_or(Value::Null),
            error: error_object(
                code::INVALID_REQUEST,
                "invalid request: method must be a string",
                None,
            ),
        },
        None => match id {
            Some(id) if obj.contains_key("result") || obj.contains_key("error") => {
                Incoming::Response {
                    id,
                    message: Value::Object(obj),
                }
            }
            _ => Incoming::Invalid {
                id: id.unwrap_or(Value::Null),
                error: error_object(code::INVALID_REQUEST, "invalid request: no method", None),
            },
        },
    }
}

/// An error object, its message and data bounded as an answer may echo them
/// ([`fsgate_base::error::echo`]).
pub(crate) fn error_object(code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": fsgate_base::error::echo(message)});
    if let Some(mut d) = data {
        fsgate_base::error::echo_value(&mut d);
        e["data"] = d;
    }
    e
}

/// A success response line.
pub(crate) fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response line. Whoever built `error`, its message and data go out bounded
/// ([`fsgate_base::error::echo_error`]): no answer echoes a request's long text whole.
pub(crate) fn error_response(id: &Value, mut error: Value) -> Value {
    fsgate_base::error::echo_error(&mut error);
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_type_and_zero_is_an_id() {
        match classify(br#"{"jsonrpc":"2.0","id":0,"method":"x"}"#) {
            Incoming::Request { id, .. } => assert_eq!(id, json!(0)),
            other => panic!("{other:?}"),
        }
        match classify(br#"{"jsonrpc":"2.0","id":"0","method":"x"}"#) {
            Incoming::Request { id, .. } => assert_eq!(id, json!("0")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"x"}"#),
            Incoming::Notification { .. }
        ));
    }

    #[test]
    fn ids_that_would_not_come_back_exactly_are_refused() {
        // Found by the acp_line fuzz target: a 90-digit id came back as 1e88.
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":{}1,"method":"x"}}"#,
            "9".repeat(89)
        );
        for line in [huge.as_str(), r#"{"jsonrpc":"2.0","id":1.50,"method":"x"}"#] {
            match classify(line.as_bytes()) {
                Incoming::Invalid { id, error } => {
                    assert_eq!(id, Value::Null);
                    assert_eq!(error["message"], INEXACT_ID);
                }
                other => panic!("{other:?}"),
            }
        }
        for (line, id) in [
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, json!(1.5)),
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
                json!(u64::MAX),
            ),
            (
                r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"x"}"#,
                json!(i64::MIN),
            ),
        ] {
            match classify(line.as_bytes()) {
                Incoming::Request { id: got, .. } => assert_eq!(got, id),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn invalid_messages() {
        for (line, code) in [
            (&b"{not json"[..], code::PARSE_ERROR),
            (b"[1,2]", code::INVALID_REQUEST),
            (br#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST),
            (
                br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
                code::INVALID_REQUEST,
            ),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                code::INVALID_REQUEST,
            ),
        ] {
            match classify(line) {
                Incoming::Invalid { error, .. } => assert_eq!(error["code"], json!(code)),
                other => panic!("{other:?}"),
            }
        }
    }
}
