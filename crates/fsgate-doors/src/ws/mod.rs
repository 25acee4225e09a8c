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
//! - `pending`: connections still in their upgrade, in a small budget of their own
//!   (the oldest is dropped when it is full); an authenticated slot
//!   (`max_connections`) is taken only once the upgrade request passed the checks.
//!
//! # Start-up order
//!
//! [`bind`] the listener and get the token ([`Token::for_settings`]: reads the token
//! file, or generates and prints a token) before the process confines itself
//! (Landlock), then run [`serve_with_token`] on the runtime.

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
mod writer;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{self, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

pub(crate) use auth::Gatekeeper;
pub use auth::{Token, TokenError};
pub use fsgate_policy::ws::{MAX_MESSAGE_CEILING, WsSettings};

use fsgate_base::path::RelPath;
use fsgate_gateway::Request as GwRequest;
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_gateway::{DoorSpec, Gateway};

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

/// The part of the workspace a connection's events cover: `?subscribe=PATH`, or the
/// whole workspace (also when the path is not valid, with a warning).
fn subscription(
    gw: &Gateway,
    subscribe: Option<&str>,
    peer: std::net::SocketAddr,
) -> Option<RelPath> {
    match subscribe.map(|p| gw.subscription(p)) {
        None => Some(RelPath::root()),
        Some(Ok(rel)) => Some(rel),
        Some(Err(e)) => {
            tracing::warn!(%peer, "ignoring ?subscribe: {e}; subscribing to the whole workspace");
            Some(RelPath::root())
        }
    }
}

/// How long a stop waits for the connections' threads to end (a request they are
/// running finishes first, and is recorded before the log's `stop` record).
const THREADS_STOP_WAIT: Duration = Duration::from_secs(1);

/// This door, as its requests carry it: content sent once; no way to read a file in
/// parts; binary content read with a `read` request, as base64.
pub const DOOR: DoorSpec = DoorSpec {
    name: "ws",
    content_copies: 1,
    read_in_parts: "",
    binary_read: "; a \"read\" request answers it as base64",
    media_read: "; a \"read\" request answers a media file (image, audio) as base64 if its \
                 content matches its extension",
};

/// The connections' threads: a slot each, taken before a connection is accepted, and
/// a stop that ends them when serving ends (this is dropped).
struct ConnThreads {
    /// `max_connections` + twice `max_pending_handshakes`: room for every connection
    /// the doors admit, and for the upgrades evicted or refused while they end.
    slots: Arc<Semaphore>,
    max: usize,
    stop: Option<tokio::sync::watch::Sender<()>>,
    stopped: tokio::sync::watch::Receiver<()>,
}

impl ConnThreads {
    fn new(settings: &WsSettings) -> ConnThreads {
        let max = settings
            .max_connections
            .saturating_add(settings.max_pending_handshakes.saturating_mul(2))
            .min(Semaphore::MAX_PERMITS);
        let (stop, stopped) = tokio::sync::watch::channel(());
        ConnThreads {
            slots: Arc::new(Semaphore::new(max)),
            max,
            stop: Some(stop),
            stopped,
        }
    }
}

impl Drop for ConnThreads {
    fn drop(&mut self) {
        drop(self.stop.take());
        let deadline = std::time::Instant::now() + THREADS_STOP_WAIT;
        while self.slots.available_permits() < self.max && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Runs a connection on a thread of its own, on a runtime of its own (one thread):
/// a request that is alone on its connection is then answered where its frame was read,
/// and its answer written by the same thread, with no other thread woken (on a shared
/// runtime each took a hand-off: the worker's other tasks to another thread, the answer
/// to the writer task on another worker). Slow requests still go to the server's
/// blocking pool. The thread ends with the connection, or when `stopped` closes; it
/// holds `slot` until then.
fn on_own_thread(
    job: Accepted,
    tcp: tokio::net::TcpStream,
    (mut stopped, slot): (
        tokio::sync::watch::Receiver<()>,
        tokio::sync::OwnedSemaphorePermit,
    ),
) {
    let peer = job.peer;
    let tcp = match tcp.into_std() {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(%peer, "cannot take over a ws connection: {e}");
            return;
        }
    };
    let run = move || {
        // Shared with the connection's batch thread and pool tasks: the slot is free
        // once the last of them is done.
        let slot = Arc::new(slot);
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(%peer, "no runtime for a ws connection: {e}");
                return;
            }
        };
        rt.block_on(async move {
            let tcp = match tokio::net::TcpStream::from_std(tcp) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(%peer, "cannot register a ws connection: {e}");
                    return;
                }
            };
            tokio::select! {
                () = job.run(tcp, Some(Arc::clone(&slot))) => {}
                _ = stopped.changed() => {}
            }
        });
    };
    if let Err(e) = std::thread::Builder::new()
        .name("fsgate-ws-conn".into())
        .spawn(run)
    {
        tracing::warn!(%peer, "no thread for a ws connection: {e}");
    }
}

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

/// The budgets connections are admitted under.
struct Doors {
    /// Authenticated connections (`max_connections`).
    connections: Arc<Semaphore>,
    /// Connections whose upgrade has not completed (`max_pending_handshakes`).
    pending: Arc<pending::Pending>,
    /// The whole upgrade's deadline (`handshake_timeout_ms`).
    timeout: Duration,
}

/// How an upgrade ended.
enum Upgrade {
    Done(Box<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>>),
    Failed(tokio_tungstenite::tungstenite::Error),
    TimedOut,
    Evicted,
}

/// An accepted TCP connection, before the upgrade.
struct Accepted {
    gw: Arc<Gateway>,
    keeper: Arc<Gatekeeper>,
    limits: shared::ConnLimits,
    doors: Arc<Doors>,
    /// Its place among the pending upgrades, until the upgrade ends.
    ticket: pending::Ticket,
    notices: Option<conn::Notices>,
    session: String,
    peer: SocketAddr,
    /// The server's runtime, whose blocking pool runs slow requests and records.
    pool: tokio::runtime::Handle,
}

impl Accepted {
    async fn run(
        mut self,
        tcp: tokio::net::TcpStream,
        held: Option<Arc<tokio::sync::OwnedSemaphorePermit>>,
    ) {
        let _ = tcp.set_nodelay(true);
        let mut admission = Admission::default();
        let peer = self.peer;
        let end = self.upgrade(tcp, &mut admission).await;
        drop(self.ticket);
        let ws = match end {
            Upgrade::Done(ws) => *ws,
            other => {
                match other {
                    Upgrade::Failed(e) => tracing::debug!(%peer, "upgrade failed: {e}"),
                    Upgrade::TimedOut => tracing::debug!(%peer, "upgrade timed out"),
                    _ => tracing::debug!(%peer, "upgrade dropped: newer connections need the room"),
                }
                // A refused request is recorded; a connection that never sent a whole
                // request sent no request, and writes nothing to the audit log.
                if let Some(r) = admission.refusal {
                    record_refusal(&self.gw, &self.pool, (&self.session, peer), &r).await;
                }
                return;
            }
        };
        let subscription = subscription(&self.gw, admission.subscribe.as_deref(), peer);
        tracing::info!(session = %self.session, %peer, "ws connection");
        let ctx = RequestCtx {
            style: PathStyle::Rooted,
            session: self.session,
            door: &DOOR,
            peer: peer.to_string(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        };
        let conn = shared::Conn {
            gw: self.gw,
            ctx,
            limits: self.limits,
            askable: !admission.unaskable,
            pool: self.pool,
            held,
        };
        conn::run(ws, conn, self.notices, subscription).await;
        drop(admission.slot);
    }

    /// The WebSocket upgrade, under the handshake deadline (the whole request,
    /// headers included) and until newer connections need the room; what admission
    /// decided is kept in `admission`.
    async fn upgrade(&mut self, tcp: tokio::net::TcpStream, admission: &mut Admission) -> Upgrade {
        let peer = self.peer;
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.limits.max_message))
            .max_frame_size(Some(self.limits.max_message));
        let (keeper, connections, adm) = (&self.keeper, &self.doors.connections, admission);
        // The error type is tungstenite's, not ours to shrink.
        #[allow(clippy::result_large_err)]
        let callback = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
            match admit(keeper, connections, req) {
                Ok((permit, subscribe)) => {
                    adm.slot = Some(permit);
                    adm.subscribe = subscribe;
                    adm.unaskable = declines_questions(req.uri().query());
                    Ok(resp)
                }
                Err(r) => {
                    let resp = refuse(r.status, &r.reason, peer);
                    adm.refusal = Some(r);
                    Err(resp)
                }
            }
        };
        let upgrade = tokio_tungstenite::accept_hdr_async_with_config(tcp, callback, Some(config));
        // The deadline covers the whole upgrade, request headers included.
        let deadline = tokio::time::timeout(self.doors.timeout, upgrade);
        let ticket = &mut self.ticket;
        tokio::select! {
            r = deadline => match r {
                Ok(Ok(ws)) => Upgrade::Done(Box::new(ws)),
                Ok(Err(e)) => Upgrade::Failed(e),
                Err(_) => Upgrade::TimedOut,
            },
            () = ticket.evicted() => Upgrade::Evicted,
        }
    }
}

/// What the upgrade request earned: an authenticated slot and the subscription asked
/// for, or the refusal.
#[derive(Default)]
struct Admission {
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    subscribe: Option<String>,
    /// `?permissions=off`: the client will not answer `permission` questions.
    unaskable: bool,
    refusal: Option<auth::Refusal>,
}

/// Whether the upgrade URL says the client answers no `permission` questions
/// (`?permissions=off`): its requests that meet an ask rule are refused at once.
fn declines_questions(query: Option<&str>) -> bool {
    auth::query_param(query, "permissions")
        .last()
        .is_some_and(|v| matches!(v.as_str(), "off" | "no" | "false" | "0"))
}

/// Checks an upgrade request (Host, Origin, token), then takes an authenticated slot:
/// only a request that passed the checks can take one.
fn admit(
    keeper: &Gatekeeper,
    connections: &Arc<Semaphore>,
    req: &Request,
) -> Result<(tokio::sync::OwnedSemaphorePermit, Option<String>), auth::Refusal> {
    let query = req.uri().query();
    keeper.check(req.headers(), query)?;
    let permit = Arc::clone(connections)
        .try_acquire_owned()
        .map_err(|_| auth::Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            reason: "too many connections".into(),
            rule: "ws-connections",
        })?;
    let subscribe = auth::query_param(query, "subscribe")
        .into_iter()
        .next_back();
    Ok((permit, subscribe))
}

/// The `ws-upgrade` audit record of a refused upgrade request.
async fn record_refusal(
    gw: &Arc<Gateway>,
    pool: &tokio::runtime::Handle,
    (session, peer): (&str, SocketAddr),
    r: &auth::Refusal,
) {
    let code = if r.status == StatusCode::SERVICE_UNAVAILABLE {
        fsgate_base::error::code::LIMIT
    } else {
        fsgate_base::error::code::REFUSED
    };
    let ctx = RequestCtx {
        style: PathStyle::Rooted,
        session: session.to_string(),
        door: &DOOR,
        peer: peer.to_string(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let gw = Arc::clone(gw);
    let msg = format!("HTTP {}: {}", r.status.as_u16(), r.reason);
    let rule = r.rule;
    let _ = pool
        .spawn_blocking(move || gw.serve(&ctx, GwRequest::refusal("ws-upgrade", rule, (code, msg))))
        .await;
}

/// The HTTP response refusing an upgrade (and a log line saying why).
fn refuse(status: StatusCode, reason: &str, peer: SocketAddr) -> ErrorResponse {
    tracing::warn!(%peer, status = status.as_u16(), "ws connection refused: {reason}");
    let mut resp = http::Response::new(Some(format!("{reason}\n")));
    *resp.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    resp
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
