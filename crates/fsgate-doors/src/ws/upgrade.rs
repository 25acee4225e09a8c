//! An accepted TCP connection through its WebSocket upgrade (under the handshake
//! deadline, until newer connections need the room), then served.

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::auth::Gatekeeper;
use super::{conn, pending, shared};
use fsgate_base::path::RelPath;

use super::admission::{Admission, admit, declines_questions, record_refusal, refuse};
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_gateway::{DoorSpec, Gateway};

/// The budgets connections are admitted under.
pub(super) struct Doors {
    /// Authenticated connections (`max_connections`).
    pub(super) connections: Arc<Semaphore>,
    /// Connections whose upgrade has not completed (`max_pending_handshakes`).
    pub(super) pending: Arc<pending::Pending>,
    /// The whole upgrade's deadline (`handshake_timeout_ms`).
    pub(super) timeout: Duration,
}

/// How an upgrade ended.
pub(super) enum Upgrade {
    Done(Box<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>>),
    Failed(tokio_tungstenite::tungstenite::Error),
    TimedOut,
    Evicted,
}

/// An accepted TCP connection, before the upgrade.
pub(super) struct Accepted {
    pub(super) gw: Arc<Gateway>,
    pub(super) keeper: Arc<Gatekeeper>,
    pub(super) limits: shared::ConnLimits,
    pub(super) doors: Arc<Doors>,
    /// Its place among the pending upgrades, until the upgrade ends.
    pub(super) ticket: pending::Ticket,
    pub(super) notices: Option<conn::Notices>,
    pub(super) session: String,
    pub(super) peer: SocketAddr,
    /// The server's runtime, whose blocking pool runs slow requests and records.
    pub(super) pool: tokio::runtime::Handle,
    /// The door its requests carry ([`super::DOOR`]).
    pub(super) door: &'static DoorSpec,
}

impl Accepted {
    pub(super) async fn run(
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
                    record_refusal(&self.gw, &self.pool, (&self.session, peer, self.door), &r)
                        .await;
                }
                return;
            }
        };
        let subscription = subscription(admission.subscribe.as_deref(), peer);
        tracing::info!(session = %self.session, %peer, "ws connection");
        let ctx = RequestCtx {
            style: PathStyle::Rooted,
            session: self.session,
            door: self.door,
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
    pub(super) async fn upgrade(
        &mut self,
        tcp: tokio::net::TcpStream,
        admission: &mut Admission,
    ) -> Upgrade {
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

/// The part of the workspace a connection's events cover: `?subscribe=PATH`, or the
/// whole workspace (also when the path is not valid, with a warning).
pub(super) fn subscription(subscribe: Option<&str>, peer: std::net::SocketAddr) -> Option<RelPath> {
    match subscribe.map(fsgate_gateway::subscription) {
        None => Some(RelPath::root()),
        Some(Ok(rel)) => Some(rel),
        Some(Err(e)) => {
            tracing::warn!(%peer, "ignoring ?subscribe: {e}; subscribing to the whole workspace");
            Some(RelPath::root())
        }
    }
}
