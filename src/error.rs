//! Every failure a request can meet, and its JSON-RPC error code: the one place where
//! the contract's codes are assigned.

use serde_json::{Value, json};

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
#[non_exhaustive]
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
    #[error("refused: {reason} (rule {rule}, path {path})")]
    Refused {
        /// One line, no file content.
        reason: String,
        /// The deciding rule.
        rule: String,
        /// Path as the request gave it.
        path: String,
    },
    /// A size, binary-content or rate limit.
    #[error("limit exceeded: {reason} (rule {rule}, path {path})")]
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
}

impl GatewayError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            GatewayError::InvalidParams(_) => code::INVALID_PARAMS,
            GatewayError::NotFound { .. } | GatewayError::MissingParent { .. } => code::NOT_FOUND,
            GatewayError::Refused { .. } => code::REFUSED,
            GatewayError::Limit { .. } => code::LIMIT,
            GatewayError::Internal(_) => code::INTERNAL,
        }
    }

    /// `error.data`: `{reason, rule, path}` for refusals and limits, `{uri}` for
    /// not-found as ACP has it, none otherwise.
    pub fn data(&self) -> Option<Value> {
        match self {
            GatewayError::Refused { reason, rule, path }
            | GatewayError::Limit { reason, rule, path } => {
                Some(json!({"reason": reason, "rule": rule, "path": path}))
            }
            GatewayError::NotFound { path } | GatewayError::MissingParent { path, .. } => {
                Some(json!({"uri": path, "path": path}))
            }
            _ => None,
        }
    }

    /// The one-line message shown to the agent (and often to its model).
    pub fn message(&self) -> String {
        self.to_string()
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
