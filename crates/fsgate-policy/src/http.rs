//! The `[http]` policy section: who may reach MCP over Streamable HTTP (`fsgate serve
//! --transport http`), and its limits.

use std::path::PathBuf;

use super::ws::{MAX_MESSAGE_CEILING, is_origin};

/// Smallest message limit accepted: below this even a small write does not fit.
const MIN_MESSAGE_BYTES: u64 = 4096;

/// Most of anything counted (sessions, requests in flight, connections).
const COUNT_CEILING: usize = 1024;

/// Range of the time a client has to send a request's headers and body, in ms.
const REQUEST_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 100..=300_000;

/// Range of the time a client may leave an answer unread, in milliseconds.
const WRITE_STALL_RANGE: std::ops::RangeInclusive<u64> = 100..=3_600_000;

/// Range of the time an MCP session may stay unused before it is ended, in ms.
const SESSION_IDLE_RANGE: std::ops::RangeInclusive<u64> = 1_000..=86_400_000;

/// `[http]`: settings of MCP over Streamable HTTP (`fsgate serve --transport http`).
///
/// ```toml
/// [http]
/// token_file = "/run/fsgate/http-token"
/// allowed_origins = ["http://localhost:5173"]
/// max_message_bytes = 10485760
/// max_sessions = 64
/// max_in_flight = 32
/// max_connections = 64
/// max_pending_connections = 16
/// request_timeout_ms = 10000
/// write_stall_ms = 30000
/// session_idle_ms = 1800000
/// ```
#[derive(Debug, Clone, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSettings {
    /// File holding the bearer token clients must present on every request
    /// (`Authorization: Bearer <token>` or `?token=<token>`; surrounding whitespace is
    /// trimmed; at least 16 characters). Read once at start. Default: none, in which
    /// case a random 32-byte token is generated at start and printed to stderr as
    /// `fsgate: http token: <hex>`.
    pub token_file: Option<PathBuf>,
    /// Browser origins allowed, each exactly `scheme://host[:port]` (compared
    /// case-insensitively). A request that carries an `Origin` header not in this list
    /// is refused with 403, so a web page (or a DNS-rebinding attack) cannot drive the
    /// gateway. Default: empty, i.e. only non-browser clients, which send no `Origin`.
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes (a larger one is refused with 413 and never read
    /// whole). Default: the policy's `[limits] max_message_bytes`; never above 100 MiB.
    pub max_message_bytes: Option<u64>,
    /// MCP sessions (2025-era `Mcp-Session-Id`s) open at once; an `initialize` beyond
    /// it is refused with 503.
    pub max_sessions: usize,
    /// Requests one session (or the stateless door of one token) runs at once; more
    /// wait for a slot.
    pub max_in_flight: usize,
    /// Connections served at once, counted once a request on them passed the Host,
    /// Origin and token checks; further authenticated connections get 503.
    pub max_connections: usize,
    /// Connections accepted at once that have not yet sent a request passing the
    /// checks. When a new one arrives with this many pending, the oldest pending one is
    /// closed: clients without a token cannot hold the door shut.
    pub max_pending_connections: usize,
    /// Time, in milliseconds, a client has to send a request's headers, and again its
    /// body; then the connection is closed.
    pub request_timeout_ms: u64,
    /// Time, in milliseconds, an answer may wait while the client reads none of it;
    /// then the connection is closed and the answer dropped, so that a client that
    /// stops reading cannot hold the server's answer room from the others.
    pub write_stall_ms: u64,
    /// Time, in milliseconds, an MCP session may go unused (no request, no open
    /// stream) before it is ended; its client then gets 404 and starts a new one.
    pub session_idle_ms: u64,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            token_file: None,
            allowed_origins: Vec::new(),
            max_message_bytes: None,
            max_sessions: 64,
            max_in_flight: 32,
            max_connections: 64,
            max_pending_connections: 16,
            request_timeout_ms: 10_000,
            write_stall_ms: 30_000,
            session_idle_ms: 1_800_000,
        }
    }
}

impl HttpSettings {
    /// Checks values that parse but make no sense (`key: message`); the policy loader
    /// refuses to start on an error here.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = self.max_message_bytes
            && !(MIN_MESSAGE_BYTES..=MAX_MESSAGE_CEILING).contains(&n)
        {
            return Err(format!(
                "http.max_message_bytes: {n} is outside {MIN_MESSAGE_BYTES}..={MAX_MESSAGE_CEILING} (100 MiB)"
            ));
        }
        for (key, n) in [
            ("max_sessions", self.max_sessions),
            ("max_in_flight", self.max_in_flight),
            ("max_connections", self.max_connections),
            ("max_pending_connections", self.max_pending_connections),
        ] {
            if !(1..=COUNT_CEILING).contains(&n) {
                return Err(format!("http.{key}: {n} is outside 1..={COUNT_CEILING}"));
            }
        }
        for (key, n, range) in [
            (
                "request_timeout_ms",
                self.request_timeout_ms,
                REQUEST_TIMEOUT_RANGE,
            ),
            ("write_stall_ms", self.write_stall_ms, WRITE_STALL_RANGE),
            ("session_idle_ms", self.session_idle_ms, SESSION_IDLE_RANGE),
        ] {
            if !range.contains(&n) {
                return Err(format!(
                    "http.{key}: {n} is outside {}..={}",
                    range.start(),
                    range.end()
                ));
            }
        }
        for origin in &self.allowed_origins {
            if !is_origin(origin) {
                return Err(format!(
                    "http.allowed_origins: {origin:?} is not an origin (scheme://host[:port], no path)"
                ));
            }
        }
        Ok(())
    }

    /// The body limit in force: this section's, else the policy's, capped at 100 MiB.
    pub fn effective_max_message(&self, policy_limit: u64) -> u64 {
        self.max_message_bytes
            .unwrap_or(policy_limit)
            .min(MAX_MESSAGE_CEILING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(HttpSettings::default().validate(), Ok(()));
    }

    #[test]
    fn parses_from_toml_and_refuses_unknown_keys() {
        let s: HttpSettings =
            toml::from_str("max_sessions = 5\nallowed_origins = [\"http://localhost:3000\"]")
                .expect("valid section");
        assert_eq!(s.max_sessions, 5);
        assert_eq!(s.max_in_flight, HttpSettings::default().max_in_flight);
        let err = toml::from_str::<HttpSettings>("token = \"x\"").expect_err("unknown key");
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn refuses_values_out_of_range_naming_the_key() {
        let cases = [
            ("max_message_bytes = 10", "http.max_message_bytes"),
            ("max_sessions = 0", "http.max_sessions"),
            (
                "max_pending_connections = 0",
                "http.max_pending_connections",
            ),
            ("request_timeout_ms = 1", "http.request_timeout_ms"),
            ("write_stall_ms = 1", "http.write_stall_ms"),
            ("session_idle_ms = 5", "http.session_idle_ms"),
            ("allowed_origins = [\"*\"]", "http.allowed_origins"),
        ];
        for (line, key) in cases {
            let s: HttpSettings = toml::from_str(line).expect(line);
            let e = s.validate().expect_err(line);
            assert!(e.starts_with(&format!("{key}:")), "{line}: {e}");
        }
    }

    #[test]
    fn policy_check_names_the_key() {
        let text = "version = 1\n[http]\nmax_in_flight = 0\n";
        match crate::Policy::from_toml(text, "t") {
            Err(crate::PolicyError::Invalid { key, line, .. }) => {
                assert_eq!(key, "http.max_in_flight");
                assert_eq!(line, 2);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn effective_limit_takes_the_policy_and_caps_it() {
        let s = HttpSettings::default();
        assert_eq!(s.effective_max_message(1 << 20), 1 << 20);
        assert_eq!(s.effective_max_message(u64::MAX), MAX_MESSAGE_CEILING);
    }
}
