//! Every failure a request can meet, and its JSON-RPC error code: the one place where
//! the contract's codes are assigned.

use std::borrow::Cow;

use serde_json::{Value, json};

/// The most bytes of one text an answer echoes: an error's message, or one string of
/// its `data`. Paths, method and tool names, session ids and patterns come from the
/// request; a 2 MiB name is not sent back whole.
pub const MAX_ECHO: usize = 1024;
/// Of a text over [`MAX_ECHO`], the bytes kept from its start (and [`ECHO_TAIL`] from
/// its end: an error message's explanation often follows the name it quotes).
const ECHO_HEAD: usize = 640;
const ECHO_TAIL: usize = 256;

/// `s` as an answer may echo it: whole up to [`MAX_ECHO`] bytes, else its first and
/// last bytes (on character boundaries) around a note of how many were left out.
pub fn echo(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_ECHO {
        return Cow::Borrowed(s);
    }
    let head = crate::text::head(s, ECHO_HEAD);
    let mut start = s.len() - ECHO_TAIL;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    let tail = &s[start..];
    let left_out = s.len() - head.len() - tail.len();
    Cow::Owned(format!("{head}[... {left_out} bytes not shown ...]{tail}"))
}

/// Every string in `v` (object member names included) as [`echo`] bounds it.
pub fn echo_value(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let Cow::Owned(short) = echo(s) {
                *s = short;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(echo_value),
        Value::Object(m) => {
            if m.keys().any(|k| k.len() > MAX_ECHO) {
                let old = std::mem::take(m);
                m.extend(old.into_iter().map(|(k, v)| (echo(&k).into_owned(), v)));
            }
            m.values_mut().for_each(echo_value);
        }
        _ => {}
    }
}

/// A JSON-RPC `error` object as it goes out: its `message` and every string of its
/// `data` bounded by [`echo`].
pub fn echo_error(error: &mut Value) {
    if let Some(m) = error.get_mut("message") {
        echo_value(m);
    }
    if let Some(d) = error.get_mut("data") {
        echo_value(d);
    }
}

/// The contract's error codes.
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Missing field, relative path, bad regex...
    pub const INVALID_PARAMS: i64 = -32602;
    /// Something that should never happen.
    pub const INTERNAL: i64 = -32603;
    /// No such file or directory.
    pub const NOT_FOUND: i64 = -32002;
    /// Refused by policy.
    pub const REFUSED: i64 = -32003;
    /// Size, binary content or rate limit.
    pub const LIMIT: i64 = -32004;
    /// MCP over HTTP, 2026-07-28: a routing header disagrees with the message.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MCP: a protocol version the server does not speak (`data.supported` lists them).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A request's failure, as the gateway reports it to any transport.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The request's parameters are malformed.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// The target does not exist.
    #[error("not found: {path}")]
    NotFound {
        /// Path as the request gave it.
        path: String,
    },
    /// The parent directory of the target does not exist.
    #[error("not found: the parent directory of {path} does not exist{hint}")]
    MissingParent {
        /// Path as the request gave it.
        path: String,
        /// What to do about it, e.g. "; pass recursive: true to create it".
        hint: &'static str,
    },
    /// The policy (or a built-in workspace rule) refuses the request.
    #[error("refused: {reason} (rule {rule}{})", path_part(path))]
    Refused {
        /// One line, no file content.
        reason: String,
        /// The deciding rule.
        rule: String,
        /// Path as the request gave it.
        path: String,
    },
    /// A size, binary-content or rate limit.
    #[error("limit exceeded: {reason} (rule {rule}{})", path_part(path))]
    Limit {
        /// One line.
        reason: String,
        /// The limit's name, e.g. `limits.max_read_bytes`.
        rule: String,
        /// Path as the request gave it.
        path: String,
    },
    /// A failure that is fsgate's own (I/O error, audit log unwritable...).
    #[error("internal error: {0}")]
    Internal(String),
    /// The filesystem under the workspace could not take a change (no space left, a
    /// quota, read-only): on the wire an internal error as any other; the view gives a
    /// process the very errno, which programs handle (SQLite on a full disk).
    #[error("internal error: {message}")]
    Storage {
        /// The operating system's errno (one of [`STORAGE_ERRNOS`]).
        errno: i32,
        /// What failed, with the system's words.
        message: String,
    },
}

/// The errnos a change's failure keeps as [`GatewayError::Storage`]: ENOSPC, EDQUOT,
/// EROFS, EFBIG (Linux numbers).
pub const STORAGE_ERRNOS: [i32; 4] = [28, 122, 30, 27];

/// `, path P` for an error's message, or nothing when it names no path.
fn path_part(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(", path {path}")
    }
}

impl GatewayError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            GatewayError::InvalidParams(_) => code::INVALID_PARAMS,
            GatewayError::NotFound { .. } | GatewayError::MissingParent { .. } => code::NOT_FOUND,
            GatewayError::Refused { .. } => code::REFUSED,
            GatewayError::Limit { .. } => code::LIMIT,
            GatewayError::Internal(_) | GatewayError::Storage { .. } => code::INTERNAL,
        }
    }

    /// `error.data`: `{reason, rule, path}` for refusals and limits, `{uri}` for
    /// not-found as ACP has it, none otherwise; each string bounded by [`echo`].
    pub fn data(&self) -> Option<Value> {
        let data = match self {
            GatewayError::Refused { reason, rule, path }
            | GatewayError::Limit { reason, rule, path } => {
                json!({"reason": echo(reason), "rule": echo(rule), "path": echo(path)})
            }
            GatewayError::NotFound { path } | GatewayError::MissingParent { path, .. } => {
                let path = echo(path);
                json!({"uri": path, "path": path})
            }
            _ => return None,
        };
        Some(data)
    }

    /// The one-line message shown to the agent (and often to its model), bounded by
    /// [`echo`].
    pub fn message(&self) -> String {
        echo(&self.to_string()).into_owned()
    }

    /// The rule named by the error, if any (for audit records).
    pub fn rule(&self) -> Option<&str> {
        match self {
            GatewayError::Refused { rule, .. } | GatewayError::Limit { rule, .. } => Some(rule),
            _ => None,
        }
    }

    /// True if a policy or workspace rule refused the request (audit decision `deny`).
    pub fn is_denial(&self) -> bool {
        matches!(
            self,
            GatewayError::Refused { .. } | GatewayError::Limit { .. }
        )
    }

    /// The JSON-RPC `error` object.
    pub fn to_rpc_error(&self) -> Value {
        let mut e = json!({"code": self.code(), "message": self.message()});
        if let Some(d) = self.data() {
            e["data"] = d;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_keeps_both_ends_of_a_long_text_and_says_what_it_left_out() {
        assert_eq!(echo("short"), "short");
        let long = format!(
            "method not found: {}é{}",
            "a".repeat(2 << 20),
            "z".repeat(300)
        );
        let shown = echo(&long);
        assert!(shown.len() <= MAX_ECHO + 64, "{}", shown.len());
        assert!(shown.starts_with("method not found: aaa"), "{shown}");
        assert!(shown.ends_with(&"z".repeat(ECHO_TAIL)), "{shown}");
        let left = long.len() - ECHO_HEAD - ECHO_TAIL;
        assert!(
            shown.contains(&format!("[... {left} bytes not shown ...]")),
            "{shown}"
        );
        // Multi-byte characters are never split.
        let wide = "漢".repeat(1000);
        assert!(echo(&wide).starts_with("漢漢"));
    }

    #[test]
    fn an_error_echoes_at_most_a_bounded_path() {
        let path = "p".repeat(2 << 20);
        for e in [
            GatewayError::NotFound { path: path.clone() },
            GatewayError::Refused {
                reason: "no".into(),
                rule: "r".into(),
                path: path.clone(),
            },
            GatewayError::InvalidParams(format!("path {path}: too long")),
        ] {
            let wire = e.to_rpc_error().to_string();
            assert!(wire.len() < 4 * MAX_ECHO, "{}: {}", e.code(), wire.len());
        }
        let mut raw = json!({"code": -32601, "message": path, "data": {"method": path}});
        echo_error(&mut raw);
        assert!(raw.to_string().len() < 3 * MAX_ECHO);
    }
}
