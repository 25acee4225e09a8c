//! One HTTP MCP server: where it serves, the revisions it speaks, its limits, and what
//! it holds (gateway, tokens, sessions, budgets).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::auth::{self, Keys};
use super::body;
use super::session::McpSession;
use fsgate_gateway::Gateway;
use fsgate_policy::http::HttpSettings;

/// The path MCP is served at.
pub const PATH: &str = "/mcp";

/// Protocol revisions with the `initialize` handshake that a session may name.
pub(super) const HANDSHAKE_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Protocol revisions of the stateless wire.
pub(super) const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The limits a server serves under.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_message: usize,
    pub max_sessions: usize,
    pub max_in_flight: usize,
    pub max_connections: usize,
    pub max_pending: usize,
    pub request_timeout: Duration,
    pub write_stall: Duration,
    pub session_idle: Duration,
}

impl Limits {
    pub(crate) fn of(settings: &HttpSettings, policy_limit: u64) -> Limits {
        Limits {
            max_message: usize::try_from(settings.effective_max_message(policy_limit))
                .unwrap_or(usize::MAX),
            max_sessions: settings.max_sessions,
            max_in_flight: settings.max_in_flight,
            max_connections: settings.max_connections,
            max_pending: settings.max_pending_connections,
            request_timeout: Duration::from_millis(settings.request_timeout_ms),
            write_stall: Duration::from_millis(settings.write_stall_ms),
            session_idle: Duration::from_millis(settings.session_idle_ms),
        }
    }
}

/// One HTTP MCP server: its gateway, tokens, checks, sessions and budgets.
pub(crate) struct Server {
    pub gw: Arc<Gateway>,
    /// The door of what this server records itself.
    pub door: &'static fsgate_gateway::DoorSpec,
    pub keys: Keys,
    pub site: auth::Site,
    pub limits: Limits,
    /// Bytes of answers not yet written, across every session.
    pub room: Arc<body::Room>,
    /// 2025-era sessions by `Mcp-Session-Id`.
    pub sessions: Mutex<std::collections::HashMap<String, Arc<McpSession>>>,
    /// Whether `GET /mcp/stdio` may upgrade to the plain MCP line protocol (the bridge
    /// `fsgate mcp-connect` speaks; only on the server `fsgate acp` hosts).
    pub bridge: bool,
    /// Numbers connections and sessions for their names.
    pub counter: AtomicU64,
}

impl Server {
    /// A server over `gw` with `keys`, for a listener at `local`.
    pub(crate) fn new(
        gw: Arc<Gateway>,
        (door, keys): (&'static fsgate_gateway::DoorSpec, Keys),
        settings: &HttpSettings,
        loopback_only: bool,
    ) -> Arc<Server> {
        let limits = Limits::of(settings, gw.policy().limits().max_message_bytes);
        // As the WebSocket server: four messages' worth, however many sessions.
        let room = body::Room::new(limits.max_message.saturating_mul(4));
        Arc::new(Server {
            gw,
            door,
            keys,
            site: auth::Site::new(&settings.allowed_origins, loopback_only),
            limits,
            room,
            sessions: Mutex::new(std::collections::HashMap::new()),
            bridge: false,
            counter: AtomicU64::new(0),
        })
    }

    /// Ends every session (the server stops).
    pub(crate) fn end_all(&self) {
        let sessions: Vec<_> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in sessions {
            s.end();
        }
    }
}
