//! Transport `http`: the MCP server over Streamable HTTP, at `http://ADDR/mcp`, for
//! `fsgate serve --transport http` and for the MCP server `fsgate acp` hosts for its
//! agent (the same code: only the tokens and who is asked differ).
//!
//! # Layout
//!
//! - `auth`: `Host` and `Origin` checks, then the bearer token, which names the
//!   principal (the one token of `serve`, or an ACP session's secret).
//! - `conn`: the listener: connections not yet authenticated in a budget of their own
//!   (the oldest dropped), authenticated ones counted, a request's headers and body on
//!   a deadline, and a client that stops reading its answers cut off.
//! - `route`: one HTTP request: POST carries one JSON-RPC message, GET opens a
//!   session's stream of server messages, DELETE ends a session.
//! - `session`: an MCP session: a door of its own running the stdio door's code
//!   (`crate::mcp::serve_as`), so every tool call takes the one path and
//!   every message is recorded once, by the door; `router`: the door's output back to
//!   the exchange that waits for it; `body`: answers on their way, in a byte room.
//!
//! Protocol eras: a POST whose `MCP-Protocol-Version` names 2026-07-28 (or that belongs
//! to no session and is no `initialize`) goes to its principal's stateless door; an
//! `initialize` opens a 2025-era session, whose `Mcp-Session-Id` later requests carry.
//!
//! What the door does not see is recorded here: every request refused before it
//! reaches a door (Host, Origin, token, size, unknown session...), as `http-request`.

mod auth;
mod body;
pub mod bridge;
mod conn;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod route;
mod router;
mod session;

use std::net::TcpListener;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;

pub(crate) use auth::{Keys, Principal, secret};
pub(crate) use body::{Room as AnswerRoom, held};
pub use fsgate_policy::http::HttpSettings;
pub(crate) use session::McpSession;

use crate::ws::Token;
use fsgate_base::error::code;
use fsgate_gateway::Gateway;

/// The path MCP is served at.
pub const PATH: &str = "/mcp";

/// Protocol revisions with the `initialize` handshake that a session may name.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Protocol revisions of the stateless wire.
const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

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
    /// The audit log's transport for what this server records itself.
    pub transport: &'static str,
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
        (transport, keys): (&'static str, Keys),
        settings: &HttpSettings,
        loopback_only: bool,
    ) -> Arc<Server> {
        let limits = Limits::of(settings, gw.policy().limits().max_message_bytes);
        // As the WebSocket server: four messages' worth, however many sessions.
        let room = body::Room::new(limits.max_message.saturating_mul(4));
        Arc::new(Server {
            gw,
            transport,
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

/// Binds the listener: `HOST:PORT`, `[V6]:PORT`, or a bare `PORT` for `127.0.0.1:PORT`.
pub fn bind(listen: &str) -> std::io::Result<TcpListener> {
    crate::ws::bind(listen)
}

/// Serves MCP over HTTP on `listener` with `token` (`fsgate serve --transport http`),
/// until an accept error or until the future is dropped.
pub async fn serve_with_token(
    gw: Arc<Gateway>,
    listener: TcpListener,
    settings: HttpSettings,
    token: Token,
) -> std::io::Result<()> {
    settings
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let local = listener.local_addr()?;
    let loopback = local.ip().is_loopback();
    if !loopback {
        tracing::warn!(%local, "listening on a non-loopback address: anyone who can reach it and holds the token can use the workspace");
    }
    let principal = Arc::new(Principal::new(None, "http", settings.max_sessions));
    let server = Server::new(
        gw,
        ("http", Keys::One(token, principal)),
        &settings,
        loopback,
    );
    eprintln!("fsgate: http listening on http://{local}{PATH}");
    let served = conn::serve(Arc::clone(&server), listener).await;
    server.end_all();
    served
}

/// The token `settings` ask for: read from `token_file`, or generated and printed to
/// stderr (`fsgate: http token: <hex>`).
///
/// # Ambient Authority
/// Reads `token_file`; call before the process confines itself.
pub fn token_for(settings: &HttpSettings) -> Result<Token, String> {
    match &settings.token_file {
        Some(path) => Token::from_file(path).map_err(|e| format!("[http] token_file: {e}")),
        None => {
            let (token, text) = Token::generate().map_err(|e| e.to_string())?;
            eprintln!("fsgate: http token: {text}");
            Ok(token)
        }
    }
}

/// The hosted server of `fsgate acp`: a secret per ACP session, the stdio bridge on.
pub(crate) fn hosted_server(gw: Arc<Gateway>) -> Arc<Server> {
    // Its sessions live as long as the agent's: none is ended for being idle (a person
    // away for an hour must not find the agent's file tools gone).
    let settings = HttpSettings {
        session_idle_ms: 86_400_000,
        ..HttpSettings::default()
    };
    let limits = Limits::of(&settings, gw.policy().limits().max_message_bytes);
    let room = body::Room::new(limits.max_message.saturating_mul(4));
    Arc::new(Server {
        gw,
        transport: "acp-mcp",
        keys: Keys::Many(std::sync::RwLock::new(std::collections::HashMap::new())),
        site: auth::Site::new(&[], true),
        limits,
        room,
        sessions: Mutex::new(std::collections::HashMap::new()),
        bridge: true,
        counter: AtomicU64::new(0),
    })
}

/// Serves `server` on `listener` (the hosted server; see [`hosted_server`]).
pub(crate) async fn run(server: Arc<Server>, listener: TcpListener) -> std::io::Result<()> {
    let served = conn::serve(Arc::clone(&server), listener).await;
    server.end_all();
    served
}
