//! One connection: what it is given (its gateway, context and limits, the server-wide
//! budgets it shares) and what its requests share.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_tungstenite::tungstenite::Message;

use super::permission::{self, Asks, WsAsker};
use super::protocol::Ws;
use super::response::Head;
use crate::outbox::{Outbox, SharedRoom};
use fsgate_gateway::Gateway;
use fsgate_gateway::ask::Asker;
use fsgate_gateway::ops::RequestCtx;

/// Limits of one connection, and the server-wide budgets it shares.
#[derive(Debug, Clone)]
pub(super) struct ConnLimits {
    /// Requests served at once.
    pub max_in_flight: usize,
    /// Largest message, in bytes (in or out).
    pub max_message: usize,
    /// Unwritten answer bytes across all connections.
    pub total: SharedRoom,
    /// Bytes reserved by requests in flight across all connections.
    pub server_in_flight: Arc<Semaphore>,
    /// How long the client may read none of its answers (`[ws] write_stall_ms`).
    pub write_stall: Duration,
}

impl ConnLimits {
    /// Unwritten reply bytes after which the connection stops reading.
    pub(super) fn conn_out(&self) -> usize {
        self.max_message.saturating_mul(2)
    }

    /// Bytes reserved by one connection's requests in flight.
    pub(super) fn conn_in_flight(&self) -> usize {
        self.max_message.saturating_mul(2)
    }
}

/// The server-wide budget (unwritten answers, and requests in flight, each): four
/// messages (64 MiB with the default limit), however many connections there are.
pub(super) fn server_budget(max_message: usize) -> usize {
    max_message.saturating_mul(4)
}

/// What one connection shares with its request tasks.
pub(super) struct Shared {
    pub(super) gw: Arc<Gateway>,
    pub(super) ctx: Arc<RequestCtx>,
    pub(super) out: Outbox<Message>,
    pub(super) limits: ConnLimits,
    pub(super) slots: Arc<Semaphore>,
    pub(super) bytes: Arc<Semaphore>,
    /// The connection's `permission` questions; None if the client answers none.
    pub(super) asks: Option<Arc<Asks>>,
    pub(super) asker: Option<WsAsker>,
    /// Where blocking work goes ([`Conn::pool`]).
    pub(super) pool: tokio::runtime::Handle,
    /// Held until every thread and task of the connection is done ([`Conn::held`]).
    pub(super) _held: Option<Arc<OwnedSemaphorePermit>>,
}

/// Closes the connection's questions when dropped: however the connection ends (its
/// client gone, or the server stopping and dropping its future), a request waiting for
/// an answer is told "unanswered" at once instead of at its ask timeout.
pub(super) struct CloseAsks(pub(super) Option<Arc<Asks>>);

impl Drop for CloseAsks {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.close();
        }
    }
}

/// One upgraded connection's gateway, context and limits.
pub(super) struct Conn {
    /// The gateway every message goes through.
    pub gw: Arc<Gateway>,
    /// The connection's context (its asker is set here).
    pub ctx: RequestCtx,
    /// The connection's limits.
    pub limits: ConnLimits,
    /// The runtime whose blocking pool runs the connection's slow requests and records
    /// (the server's, shared by every connection).
    pub pool: tokio::runtime::Handle,
    /// Whether the client is put `permission` questions.
    pub askable: bool,
    /// The connection thread's slot: kept until the connection's batch thread and its
    /// requests on the pool are done too, so that a server that stops waits for them
    /// (for a while) before its log's last record.
    pub held: Option<Arc<OwnedSemaphorePermit>>,
}

impl Shared {
    /// The connection's codec: answers bounded by its message limit.
    pub(super) fn codec(&self) -> Ws {
        Ws {
            max: self.limits.max_message,
        }
    }
}

/// What the connection's requests share; the context's asker puts questions to it.
pub(super) fn shared(conn: Conn, out: &Outbox<Message>) -> Arc<Shared> {
    let Conn {
        gw,
        mut ctx,
        limits,
        askable,
        pool,
        held,
    } = conn;
    let asks = askable.then(|| Asks::new(out.clone(), limits.max_message));
    let asker = asks.as_ref().map(|a| WsAsker::new(Arc::clone(a)));
    ctx.asker = asker.clone().map(|a| Arc::new(a) as Arc<dyn Asker>);
    Arc::new(Shared {
        gw,
        ctx: Arc::new(ctx),
        out: out.clone(),
        slots: Arc::new(Semaphore::new(limits.max_in_flight)),
        bytes: Arc::new(Semaphore::new(permits(limits.conn_in_flight()))),
        limits,
        asks,
        asker,
        pool,
        _held: held,
    })
}

/// Semaphore permits for `n` bytes (a semaphore counts in u32).
pub(super) fn permits(n: usize) -> usize {
    n.min(u32::MAX as usize >> 1)
}

/// The context of one request, when it differs from the connection's: under a policy
/// with ask rules, its questions name the request they are about.
pub(super) fn request_ctx(sh: &Shared, head: &Head) -> Option<RequestCtx> {
    let asker = sh.asker.as_ref()?;
    if !sh.gw.policy().has_ask_rules() {
        return None;
    }
    let mut ctx = (*sh.ctx).clone();
    let request = permission::Request {
        kind: head.kind.clone(),
        id: head.request_id.clone(),
    };
    ctx.asker = Some(Arc::new(asker.for_request(request)));
    Some(ctx)
}
