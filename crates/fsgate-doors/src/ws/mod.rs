//! Transport `ws`: the files channel over WebSocket (`fsgate serve --transport ws`).
//!
//! # Layout
//!
//! - the `[ws]` policy section ([`WsSettings`]) is compiled with the policy, in
//!   `fsgate_policy::ws`.
//! - `auth`: who may connect: bearer token, `Origin` allow-list, `Host` check, all on
//!   the HTTP upgrade request.
//! - [`protocol`]: JSON messages <-> [`fsgate_gateway::ops::Op`] and back (docs/ws-protocol.md):
//!   `parse` reads a message's envelope, and [`protocol::Ws`], the channel's
//!   [`crate::door::Door`], decodes a request's fields and encodes its answer;
//!   `fields` reads the fields into an operation, `response` builds the responses,
//!   `render` an operation's data, `events` the pushed events.
//! - `conn`: one connection: concurrent requests, subscription, pushed events; each
//!   connection runs on a thread and a one-thread runtime of its own (`on_own_thread`).
//!   `shared` is what its requests share, `reader` reads them, `requests` serves them
//!   within its limits, `answer` answers what is no operation, `writer` writes.
//! - change events come from the gateway's watcher ([`fsgate_gateway::watch`]),
//!   which decides what changed and which paths a client may see; `conn` only encodes
//!   them.
//!
//! Every message goes through [`Gateway::serve`] exactly once (policy, audit, backups);
//! the watcher only reports paths, and never one the policy hides.
//! - `mailbox`: change events waiting for a client, bounded; an `overflow` beyond.
//! - `permission`: `ask` rules put to the connection whose request met one, as a
//!   `permission` message; the client's `permission` reply answers it.
//! - `upgrade`: an accepted connection through its upgrade, then served; `admission`
//!   what its upgrade request earns (or its refusal, recorded); `threads` each
//!   connection's thread and runtime.
//! - `pending`: connections still in their upgrade, in a small budget of their own
//!   (the oldest is dropped when it is full); an authenticated slot
//!   (`max_connections`) is taken only once the upgrade request passed the checks.
//!
//! # Start-up order
//!
//! [`bind`] the listener and get the token ([`Token::for_settings`]: reads the token
//! file, or generates and prints a token) before the process confines itself
//! (Landlock), then run [`serve_with_token`] on the runtime.

mod admission;
mod answer;
pub(crate) mod auth;
mod channel;
mod conn;
mod events;
mod fields;
mod mailbox;
pub(crate) mod pending;
mod permission;
pub mod protocol;
mod reader;
mod render;
mod requests;
pub(crate) mod response;
mod shared;
mod stall;
mod threads;
mod upgrade;
mod writer;

use std::io;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

pub(crate) use auth::Gatekeeper;
pub use auth::{Token, TokenError};
pub use fsgate_policy::ws::{MAX_MESSAGE_CEILING, WsSettings};

use fsgate_gateway::{DoorSpec, Gateway};
use threads::{ConnThreads, on_own_thread};
use upgrade::{Accepted, Doors};

/// Binds the listener: `HOST:PORT`, `[V6]:PORT`, or a bare `PORT` for `127.0.0.1:PORT`.
/// The socket is left non-blocking, ready for [`serve_with_token`].
pub fn bind(listen: &str) -> io::Result<TcpListener> {
    let listen = listen.trim();
    let listener = if !listen.is_empty() && listen.bytes().all(|b| b.is_ascii_digit()) {
        let port: u16 = listen.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("--listen {listen}: not a port number"),
            )
        })?;
        TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))?
    } else {
        TcpListener::bind(listen).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("--listen {listen}: {e} (use HOST:PORT or PORT)"),
            )
        })?
    };
    listener.set_nonblocking(true)?;
    // Read now: once the process is confined, /proc/sys may be out of reach.
    fsgate_gateway::watch::read_watch_limit();
    Ok(listener)
}

/// Serves the files channel on `listener` until an accept error, with `token` obtained
/// beforehand (`Token::for_settings` reads the token file named in the settings, or
/// generates one).
pub async fn serve_with_token(
    gw: Arc<Gateway>,
    listener: TcpListener,
    settings: WsSettings,
    token: Token,
) -> io::Result<()> {
    settings
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let loopback = local.ip().is_loopback();
    if !loopback {
        tracing::warn!(%local, "listening on a non-loopback address: anyone who can reach it and holds the token can use the workspace");
    }
    let keeper = Arc::new(Gatekeeper::new(token, &settings.allowed_origins, loopback));
    let policy_limit = gw.policy().limits().max_message_bytes;
    let max_message =
        usize::try_from(settings.effective_max_message(policy_limit)).unwrap_or(usize::MAX);
    let limits = conn_limits(&settings, max_message);
    let watcher = start_watcher(&gw, &settings).await;
    let doors = Arc::new(Doors {
        connections: Arc::new(Semaphore::new(settings.max_connections)),
        pending: pending::Pending::new(settings.max_pending_handshakes),
        timeout: Duration::from_millis(settings.handshake_timeout_ms),
    });
    let counter = Arc::new(AtomicU64::new(0));
    // Dropped with this future (a signal ends serving): every connection's thread stops,
    // and is waited for a moment.
    let threads = ConnThreads::new(&settings);
    let pool = tokio::runtime::Handle::current();
    eprintln!("fsgate: ws listening on ws://{local}/");
    loop {
        let Ok(slot) = Arc::clone(&threads.slots).acquire_owned().await else {
            return Ok(());
        };
        let (tcp, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) if is_transient(&e) => {
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
        let job = Accepted {
            gw: Arc::clone(&gw),
            keeper: Arc::clone(&keeper),
            limits: limits.clone(),
            ticket: doors.pending.admit(),
            doors: Arc::clone(&doors),
            notices: watcher.as_ref().map(|w| (w.subscribe(), w.gap())),
            session: session_id(n),
            peer,
            pool: pool.clone(),
            door: &DOOR,
        };
        on_own_thread(job, tcp, (threads.stopped.clone(), slot));
    }
}

/// Each connection's limits, and the server-wide budget they share: unwritten answers
/// of all connections together, and bytes of their requests in flight, each as much as
/// two connections' own bounds, however many there are.
fn conn_limits(settings: &WsSettings, max_message: usize) -> shared::ConnLimits {
    let budget = shared::server_budget(max_message);
    shared::ConnLimits {
        max_in_flight: settings.max_in_flight,
        max_message,
        total: crate::outbox::shared_room(budget),
        server_in_flight: Arc::new(Semaphore::new(budget.min(u32::MAX as usize >> 1))),
        write_stall: Duration::from_millis(settings.write_stall_ms),
    }
}

/// The workspace watcher, once the tree is watched (so no early change goes
/// unreported); None, change events off, when it cannot start.
async fn start_watcher(
    gw: &Arc<Gateway>,
    settings: &WsSettings,
) -> Option<Arc<fsgate_gateway::watch::Watcher>> {
    match fsgate_gateway::watch::Watcher::start(
        Arc::clone(gw),
        &settings.ignore,
        Duration::from_millis(settings.debounce_ms),
    ) {
        Ok((w, ready)) => {
            let started = std::time::Instant::now();
            if let Ok(dirs) = ready.await {
                tracing::info!(
                    dirs,
                    took_ms = started.elapsed().as_millis() as u64,
                    "watching the workspace"
                );
            }
            Some(Arc::new(w))
        }
        Err(e) => {
            tracing::error!("cannot watch the workspace; change events are off: {e}");
            None
        }
    }
}

/// This door, as its requests carry it: content sent once; no way to read a file in
/// parts; binary content read with a `read` request, as base64.
pub const DOOR: DoorSpec = DoorSpec {
    name: "ws",
    content_copies: 1,
    read_in_parts: "",
    binary_read: "; a \"read\" request answers it as base64",
    media_read: "; a \"read\" request answers a media file (image, audio) as base64 if its \
                 content matches its extension",
    for_processes: false,
};

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error())
        || e.raw_os_error() == Some(rustix::io::Errno::NFILE.raw_os_error())
}

/// `ws-<n>-<random>`: unique within a run, and across runs for the audit log.
fn session_id(n: u64) -> String {
    let mut r = [0u8; 4];
    let _ = getrandom::fill(&mut r);
    format!("ws-{n}-{}", hex::encode(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_the_loopback() {
        let l = bind("0").expect("bind");
        let addr = l.local_addr().expect("addr");
        assert!(addr.ip().is_loopback());
        assert_ne!(addr.port(), 0);
        let l2 = bind("127.0.0.1:0").expect("bind host:port");
        assert!(l2.local_addr().expect("addr").ip().is_loopback());
        assert!(bind("not an address").is_err());
    }

    #[test]
    fn session_ids_differ() {
        assert_ne!(session_id(1), session_id(1));
        assert!(session_id(7).starts_with("ws-7-"));
    }
}
