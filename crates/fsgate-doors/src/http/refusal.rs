//! A request refused before any door saw it.

use http::StatusCode;

use fsgate_base::error::code;

/// A request refused before any door saw it: the HTTP status, the JSON-RPC code and
/// rule for its record, and a one-line reason (never the presented token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub code: i64,
    pub rule: &'static str,
    pub reason: String,
    /// `error.data` of the JSON-RPC error, if any.
    pub data: Option<serde_json::Value>,
}

impl Refusal {
    /// A refusal of the HTTP exchange itself (recorded as a policy refusal when it is
    /// about who may come in, as an invalid request otherwise).
    pub(crate) fn http(
        status: StatusCode,
        rule: &'static str,
        reason: impl Into<String>,
    ) -> Refusal {
        let code = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => code::REFUSED,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::PAYLOAD_TOO_LARGE => code::LIMIT,
            _ => code::INVALID_REQUEST,
        };
        Refusal {
            status,
            code,
            rule,
            reason: reason.into(),
            data: None,
        }
    }
}
