//! JSON-RPC 2.0 framing: classify an incoming message, build responses.
//!
//! Ids are kept as the raw JSON value they arrived as (number or string, `0` included)
//! and echoed unchanged.

use serde_json::{Value, json};

use crate::error::code;

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
    classify_value(v)
}

/// Classifies a parsed message.
pub fn classify_value(v: Value) -> Incoming {
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

/// An error object.
pub fn error_object(code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    e
}

/// A success response line.
pub fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response line.
pub fn error_response(id: &Value, error: Value) -> Value {
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
