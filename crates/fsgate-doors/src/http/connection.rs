//! One accepted connection as its requests see it, and who a new door on it is.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::refusal::Refusal;
use super::server::Server;
use super::session::Principal;
use crate::mcp::identity::Identity;

/// One accepted connection, as its requests see it.
pub(crate) struct ConnInfo {
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection's name in records made before a principal is known.
    pub label: String,
    /// Its authenticated slot, once a request on it passed the checks.
    pub(super) slot: Mutex<Option<OwnedSemaphorePermit>>,
    /// Told once it is authenticated: it leaves the pending budget.
    pub(super) authed: Notify,
    pub(super) connections: Arc<Semaphore>,
}

impl ConnInfo {
    /// Counts the connection as authenticated (the first time); a 503 refusal when
    /// `max_connections` are already.
    pub(crate) fn authenticated(&self) -> Result<(), Refusal> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Ok(());
        }
        let permit = Arc::clone(&self.connections)
            .try_acquire_owned()
            .map_err(|_| {
                Refusal::http(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "http-connections",
                    "too many connections",
                )
            })?;
        *slot = Some(permit);
        self.authed.notify_one();
        Ok(())
    }
}

/// Eight hex digits, to tell apart names within and across runs.
pub(crate) fn short_random() -> String {
    let mut r = [0u8; 4];
    let _ = getrandom::fill(&mut r);
    hex::encode(r)
}

/// Who a new door is: the principal's session (an ACP session's), else one of its own.
pub(super) fn identity(server: &Server, conn: &ConnInfo, p: &Principal) -> Identity {
    let session = p.session().unwrap_or_else(|| {
        let n = server.counter.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n}-{}", p.door.name, short_random())
    });
    Identity {
        session,
        door: p.door,
        peer: conn.peer.to_string(),
        oversight: p.oversight.clone(),
        within: p.within.clone(),
    }
}
