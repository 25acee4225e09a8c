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
//!   session's stream of server messages, DELETE ends a session. `headers`: what its
//!   headers say (accepted answers, era, routing headers); `message`: a POSTed body
//!   read as one line; `exchange`: that line handed to its door and answered;
//!   `doors`: the session a request names (found, opened, streamed, ended); `reply`:
//!   the HTTP answers, a refusal recorded.
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
mod connection;
mod doors;
mod exchange;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod headers;
mod message;
mod refusal;
mod reply;
mod route;
mod router;
mod server;
mod session;

use std::net::TcpListener;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

pub(crate) use auth::{Keys, secret};

pub(crate) use body::{Room as AnswerRoom, held};
pub use fsgate_policy::http::HttpSettings;
pub use server::PATH;
pub(crate) use server::Server;
pub(crate) use session::Principal;

use crate::ws::Token;

use fsgate_gateway::Gateway;

/// MCP over HTTP: the MCP door under its own name for the records.
pub const DOOR: fsgate_gateway::DoorSpec = fsgate_gateway::DoorSpec {
    name: "http",
    ..crate::mcp::DOOR
};

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
    let principal = Arc::new(Principal::new(None, &DOOR, settings.max_sessions));
    let server = Server::new(
        gw,
        (&DOOR, Keys::One(token, principal)),
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

/// The hosted server of `fsgate acp` (the MCP server an ACP session's agent reaches):
/// the MCP door under its own name for the records.
pub const HOSTED_DOOR: fsgate_gateway::DoorSpec = fsgate_gateway::DoorSpec {
    name: "acp-mcp",
    ..crate::mcp::DOOR
};

/// The hosted server of `fsgate acp`: a secret per ACP session, the stdio bridge on.
pub(crate) fn hosted_server(gw: Arc<Gateway>) -> Arc<Server> {
    // Its sessions live as long as the agent's: none is ended for being idle (a person
    // away for an hour must not find the agent's file tools gone).
    let settings = HttpSettings {
        session_idle_ms: 86_400_000,
        ..HttpSettings::default()
    };
    let limits = server::Limits::of(&settings, gw.policy().limits().max_message_bytes);
    let room = body::Room::new(limits.max_message.saturating_mul(4));
    Arc::new(Server {
        gw,
        door: &HOSTED_DOOR,
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
