//! Each connection on a thread and a one-thread runtime of its own; the threads'
//! slots, and their stop when serving ends.

use std::sync::Arc;

use std::time::Duration;

use tokio::sync::Semaphore;

use super::upgrade::Accepted;
use fsgate_policy::ws::WsSettings;

/// How long a stop waits for the connections' threads to end (a request they are
/// running finishes first, and is recorded before the log's `stop` record).
pub(super) const THREADS_STOP_WAIT: Duration = Duration::from_secs(1);

/// The connections' threads: a slot each, taken before a connection is accepted, and
/// a stop that ends them when serving ends (this is dropped).
pub(super) struct ConnThreads {
    /// `max_connections` + twice `max_pending_handshakes`: room for every connection
    /// the doors admit, and for the upgrades evicted or refused while they end.
    pub(super) slots: Arc<Semaphore>,
    pub(super) max: usize,
    pub(super) stop: Option<tokio::sync::watch::Sender<()>>,
    pub(super) stopped: tokio::sync::watch::Receiver<()>,
}

impl ConnThreads {
    pub(super) fn new(settings: &WsSettings) -> ConnThreads {
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
pub(super) fn on_own_thread(
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
