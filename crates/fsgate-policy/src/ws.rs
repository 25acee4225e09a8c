//! The `[ws]` policy section: who may connect to the WebSocket door, and its limits.

use std::path::PathBuf;

/// Hard ceiling on one WebSocket message, whatever the policy says (100 MiB).
pub const MAX_MESSAGE_CEILING: u64 = 100 * 1024 * 1024;

/// Smallest message limit accepted: below this even a small write does not fit.
const MIN_MESSAGE_BYTES: u64 = 4096;

/// Longest debounce accepted, in milliseconds: longer would make events useless.
const MAX_DEBOUNCE_MS: u64 = 10_000;

/// Most requests one connection may have in flight at once.
const MAX_IN_FLIGHT_CEILING: usize = 1024;

/// Most connections accepted at once before their upgrade completes.
const MAX_PENDING_CEILING: usize = 1024;

/// Range of the upgrade deadline, in milliseconds.
const HANDSHAKE_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 100..=30_000;

/// Range of the time a client may leave its answers unread, in milliseconds.
const WRITE_STALL_RANGE: std::ops::RangeInclusive<u64> = 100..=3_600_000;

/// `[ws]`: settings of the WebSocket files channel (`fsgate serve --transport ws`).
///
/// ```toml
/// [ws]
/// token_file = "/run/fsgate/ws-token"
/// allowed_origins = ["http://localhost:5173"]
/// max_message_bytes = 25165824
/// max_in_flight = 32
/// max_connections = 64
/// max_pending_handshakes = 16
/// handshake_timeout_ms = 3000
/// write_stall_ms = 30000
/// ignore = ["node_modules", ".git", ".next", "dist", "build", "__pycache__"]
/// debounce_ms = 100
/// ```
#[derive(Debug, Clone, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WsSettings {
    /// File holding the bearer token clients must present on the upgrade request
    /// (surrounding whitespace is trimmed; at least 16 characters). Read once at start.
    /// Default: none, in which case a random 32-byte token is generated at start and
    /// printed to stderr as `fsgate: ws token: <hex>`.
    pub token_file: Option<PathBuf>,
    /// Browser origins allowed to connect, each exactly `scheme://host[:port]`
    /// (compared case-insensitively). A request that carries an `Origin` header not in
    /// this list is refused with 403, so a web page (or a DNS-rebinding attack) cannot
    /// drive the gateway. Default: empty, i.e. only non-browser clients, which send no
    /// `Origin`.
    pub allowed_origins: Vec<String>,
    /// Largest message a client may send, in bytes (a larger one gets an error and the
    /// connection is closed with code 1009). Default: the policy's
    /// `[limits] max_message_bytes`; never above 100 MiB.
    pub max_message_bytes: Option<u64>,
    /// Requests one connection may have in flight. When that many are running, the
    /// connection's next message is not read until one finishes (back-pressure).
    pub max_in_flight: usize,
    /// Connections served at once, counted once the upgrade request passed the Host,
    /// Origin and token checks; further authenticated upgrade requests get 503.
    pub max_connections: usize,
    /// Connections accepted at once whose HTTP upgrade has not completed (no request
    /// yet, or part of one). When a new connection arrives with this many pending, the
    /// oldest pending one is closed: clients without a token cannot hold the door shut,
    /// and a real client's upgrade, one round trip, completes in time.
    pub max_pending_handshakes: usize,
    /// Time, in milliseconds, a connection has to complete its whole HTTP upgrade
    /// (request headers included, however slowly they arrive); then it is closed.
    pub handshake_timeout_ms: u64,
    /// Time, in milliseconds, a connection's answers may wait while the client reads
    /// none of them (its socket takes no byte); then the connection is closed and its
    /// unwritten answers dropped, so that a client that stops reading cannot hold the
    /// server's shared answer room and content budget from the other connections. A
    /// slow client that still reads is not closed.
    pub write_stall_ms: u64,
    /// Directory (or file) names the change watcher ignores at any depth: no events for
    /// them or anything beneath them, and no inotify watches spent on them.
    pub ignore: Vec<String>,
    /// Quiet time, in milliseconds, a path must have before its change event is pushed:
    /// a burst of writes to one file becomes one event.
    pub debounce_ms: u64,
}

impl Default for WsSettings {
    fn default() -> Self {
        WsSettings {
            token_file: None,
            allowed_origins: Vec::new(),
            max_message_bytes: None,
            max_in_flight: 32,
            max_connections: 64,
            max_pending_handshakes: 16,
            handshake_timeout_ms: 3000,
            write_stall_ms: 30_000,
            ignore: [
                "node_modules",
                ".git",
                ".next",
                "dist",
                "build",
                "__pycache__",
            ]
            .iter()
            .map(|s| (*s).to_string())
            .collect(),
            debounce_ms: 100,
        }
    }
}

impl WsSettings {
    /// Checks values that parse but make no sense; the policy loader should refuse to
    /// start on an error here (`key: message`).
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = self.max_message_bytes
            && !(MIN_MESSAGE_BYTES..=MAX_MESSAGE_CEILING).contains(&n)
        {
            return Err(format!(
                "ws.max_message_bytes: {n} is outside {MIN_MESSAGE_BYTES}..={MAX_MESSAGE_CEILING} (100 MiB)"
            ));
        }
        if !(1..=MAX_IN_FLIGHT_CEILING).contains(&self.max_in_flight) {
            return Err(format!(
                "ws.max_in_flight: {} is outside 1..={MAX_IN_FLIGHT_CEILING}",
                self.max_in_flight
            ));
        }
        if self.max_connections == 0 {
            return Err("ws.max_connections: must be at least 1".into());
        }
        if !(1..=MAX_PENDING_CEILING).contains(&self.max_pending_handshakes) {
            return Err(format!(
                "ws.max_pending_handshakes: {} is outside 1..={MAX_PENDING_CEILING}",
                self.max_pending_handshakes
            ));
        }
        if !HANDSHAKE_TIMEOUT_RANGE.contains(&self.handshake_timeout_ms) {
            return Err(format!(
                "ws.handshake_timeout_ms: {} is outside {}..={}",
                self.handshake_timeout_ms,
                HANDSHAKE_TIMEOUT_RANGE.start(),
                HANDSHAKE_TIMEOUT_RANGE.end()
            ));
        }
        if !WRITE_STALL_RANGE.contains(&self.write_stall_ms) {
            return Err(format!(
                "ws.write_stall_ms: {} is outside {}..={}",
                self.write_stall_ms,
                WRITE_STALL_RANGE.start(),
                WRITE_STALL_RANGE.end()
            ));
        }
        if self.debounce_ms > MAX_DEBOUNCE_MS {
            return Err(format!(
                "ws.debounce_ms: {} is above {MAX_DEBOUNCE_MS}",
                self.debounce_ms
            ));
        }
        for name in &self.ignore {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(format!(
                    "ws.ignore: {name:?} is not a single file or directory name"
                ));
            }
        }
        for origin in &self.allowed_origins {
            if !is_origin(origin) {
                return Err(format!(
                    "ws.allowed_origins: {origin:?} is not an origin (scheme://host[:port], no path)"
                ));
            }
        }
        Ok(())
    }

    /// The message limit in force: this section's, else the policy's, capped at 100 MiB.
    pub fn effective_max_message(&self, policy_limit: u64) -> u64 {
        self.max_message_bytes
            .unwrap_or(policy_limit)
            .min(MAX_MESSAGE_CEILING)
    }
}

/// `scheme://host[:port]` with no path, query or wildcard.
pub(crate) fn is_origin(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !rest.is_empty()
        && !rest.contains(['/', '?', '#', '*', ' '])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_ignore_the_contract_dirs() {
        let s = WsSettings::default();
        assert_eq!(s.validate(), Ok(()));
        for d in [
            "node_modules",
            ".git",
            ".next",
            "dist",
            "build",
            "__pycache__",
        ] {
            assert!(s.ignore.iter().any(|i| i == d), "{d} missing");
        }
    }

    #[test]
    fn parses_from_toml_and_refuses_unknown_keys() {
        let s: WsSettings =
            toml::from_str("debounce_ms = 5\nallowed_origins = [\"http://localhost:3000\"]")
                .expect("valid section");
        assert_eq!(s.debounce_ms, 5);
        assert_eq!(s.max_in_flight, WsSettings::default().max_in_flight);
        let err = toml::from_str::<WsSettings>("token = \"x\"").expect_err("unknown key");
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn refuses_limits_above_the_ceiling_and_bad_names() {
        let big = WsSettings {
            max_message_bytes: Some(MAX_MESSAGE_CEILING + 1),
            ..Default::default()
        };
        assert!(big.validate().is_err());
        let ignore = WsSettings {
            ignore: vec!["a/b".into()],
            ..Default::default()
        };
        assert!(ignore.validate().is_err());
        for bad in [
            WsSettings {
                max_pending_handshakes: 0,
                ..Default::default()
            },
            WsSettings {
                handshake_timeout_ms: 0,
                ..Default::default()
            },
            WsSettings {
                handshake_timeout_ms: 3_600_000,
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let origin = WsSettings {
            allowed_origins: vec!["*".into()],
            ..Default::default()
        };
        assert!(origin.validate().is_err());
        let path = WsSettings {
            allowed_origins: vec!["https://a.example/x".into()],
            ..Default::default()
        };
        assert!(path.validate().is_err());
    }

    #[test]
    fn effective_limit_takes_the_policy_and_caps_it() {
        let s = WsSettings::default();
        assert_eq!(s.effective_max_message(1 << 20), 1 << 20);
        assert_eq!(s.effective_max_message(u64::MAX), MAX_MESSAGE_CEILING);
        let own = WsSettings {
            max_message_bytes: Some(8192),
            ..Default::default()
        };
        assert_eq!(own.effective_max_message(1 << 20), 8192);
    }

    #[test]
    fn policy_check_names_the_pre_auth_keys() {
        for (extra, key) in [
            ("max_pending_handshakes = 0", "ws.max_pending_handshakes"),
            ("handshake_timeout_ms = 50", "ws.handshake_timeout_ms"),
            ("write_stall_ms = 10", "ws.write_stall_ms"),
        ] {
            let text = format!("version = 1\n[ws]\n{extra}\n");
            match crate::Policy::from_toml(&text, "t") {
                Err(crate::PolicyError::Invalid { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{extra}: {other:?}"),
            }
        }
        let ok = "version = 1\n[ws]\nmax_pending_handshakes = 4\nhandshake_timeout_ms = 2000\n";
        assert!(crate::Policy::from_toml(ok, "t").is_ok());
    }
}
