//! What a request's headers say: the answers it accepts, the protocol era it names, and
//! the 2026-07-28 wire's routing headers, which must repeat its body.

use http::{HeaderMap, StatusCode, header};

use serde_json::{Value, json};

use super::refusal::Refusal;

use super::server::{HANDSHAKE_VERSIONS, MODERN_VERSIONS};

use fsgate_base::error::code;

/// The session header.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header.
pub(super) const VERSION_HEADER: &str = "mcp-protocol-version";
/// The 2026-07-28 wire's method header.
pub(super) const METHOD_HEADER: &str = "mcp-method";
/// The 2026-07-28 wire's name header (a tool's or prompt's name, a resource's URI).
pub(super) const NAME_HEADER: &str = "mcp-name";

/// What the client takes as an answer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Accepts {
    pub(super) json: bool,
    pub(super) events: bool,
}

impl Accepts {
    pub(super) fn of(headers: &HeaderMap) -> Accepts {
        let Some(v) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Accepts {
                json: true,
                events: false,
            };
        };
        let v = v.to_ascii_lowercase();
        let any = v.contains("*/*");
        Accepts {
            json: any || v.contains("application/json") || v.contains("application/*"),
            events: any || v.contains("text/event-stream") || v.contains("text/*"),
        }
    }
}

/// The protocol era a POST names in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// No header, or a handshake-era version.
    Handshake,
    /// 2026-07-28: stateless.
    Modern,
}

pub(super) fn era(headers: &HeaderMap) -> Result<Era, Refusal> {
    let Some(v) = headers.get(VERSION_HEADER) else {
        return Ok(Era::Handshake);
    };
    let v = v.to_str().unwrap_or_default().trim();
    if MODERN_VERSIONS.contains(&v) {
        return Ok(Era::Modern);
    }
    if HANDSHAKE_VERSIONS.contains(&v) {
        return Ok(Era::Handshake);
    }
    let supported: Vec<&str> = HANDSHAKE_VERSIONS
        .iter()
        .chain(&MODERN_VERSIONS)
        .copied()
        .collect();
    let mut r = Refusal::http(
        StatusCode::BAD_REQUEST,
        "http-protocol-version",
        format!(
            "unsupported protocol version {:?}",
            fsgate_base::text::Esc(v).to_string()
        ),
    );
    r.code = code::UNSUPPORTED_PROTOCOL_VERSION;
    r.data = Some(json!({"supported": supported, "requested": v}));
    Err(r)
}

/// What the 2026-07-28 wire's standard headers repeat of a request's body.
#[derive(serde::Deserialize)]
pub(super) struct Routed {
    pub(super) method: String,
    #[serde(default)]
    pub(super) params: Option<RoutedParams>,
}

#[derive(serde::Deserialize)]
pub(super) struct RoutedParams {
    #[serde(default)]
    pub(super) name: Option<Value>,
    #[serde(default)]
    pub(super) uri: Option<Value>,
    #[serde(default, rename = "_meta")]
    pub(super) meta: Option<serde_json::Map<String, Value>>,
}

/// The 2026-07-28 wire's standard headers (SEP-2243) must repeat the body: `Mcp-Method`
/// its method (always sent), `Mcp-Name` the tool or prompt name or resource URI of the
/// methods that name one, `MCP-Protocol-Version` its `_meta` version. Missing or other:
/// 400 and -32020, before the version itself is judged.
pub(super) fn routing_headers(headers: &HeaderMap, era: Era, line: &[u8]) -> Result<(), Refusal> {
    if era != Era::Modern {
        return Ok(());
    }
    let Ok(body) = serde_json::from_slice::<Routed>(line) else {
        return Ok(()); // The door answers what it cannot read.
    };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
    if header(METHOD_HEADER) != Some(body.method.as_str()) {
        return Err(mismatch(
            "Mcp-Method header is missing or does not match the request body's method",
        ));
    }
    let params = body.params.as_ref();
    let named = match body.method.as_str() {
        "tools/call" | "prompts/get" => params.and_then(|p| p.name.as_ref()),
        "resources/read" => params.and_then(|p| p.uri.as_ref()),
        _ => None,
    };
    if let Some(Value::String(named)) = named
        && header(NAME_HEADER).map(decoded).as_deref() != Some(named.as_str())
    {
        return Err(mismatch(
            "Mcp-Name header is missing or does not match the request body",
        ));
    }
    let version = params
        .and_then(|p| p.meta.as_ref())
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
    if let Some(v) = version
        && v.as_str() != header(VERSION_HEADER)
    {
        return Err(mismatch(
            "MCP-Protocol-Version header does not match the request's _meta protocol version",
        ));
    }
    Ok(())
}

/// A header value as sent, or the text of its `=?base64?...?=` form.
pub(super) fn decoded(v: &str) -> String {
    use base64::Engine;
    let Some(b64) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return v.to_owned();
    };
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

pub(super) fn mismatch(why: &str) -> Refusal {
    let mut r = Refusal::http(StatusCode::BAD_REQUEST, "http-routing-header", why);
    r.code = code::HEADER_MISMATCH;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn eras_come_from_the_version_header() {
        let mut h = HeaderMap::new();
        assert_eq!(era(&h), Ok(Era::Handshake));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        assert_eq!(era(&h), Ok(Era::Modern));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2025-06-18"));
        assert_eq!(era(&h), Ok(Era::Handshake));
        h.insert(VERSION_HEADER, HeaderValue::from_static("1999-01-01"));
        let r = era(&h).expect_err("unknown version");
        assert_eq!(r.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn accept_headers() {
        let mut h = HeaderMap::new();
        let a = Accepts::of(&h);
        assert!(a.json && !a.events);
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let a = Accepts::of(&h);
        assert!(a.json && a.events);
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let a = Accepts::of(&h);
        assert!(!a.json && !a.events);
    }
}
