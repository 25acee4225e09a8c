//! What the agent still waits for from the editor, and what fsgate owes the agent.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::line::id_key;

/// The editor's requests the agent has not answered yet, and the replies fsgate owes
/// the agent: once the editor closed its input, the agent's stdin stays open until both
/// are settled (or [`GRACE`](super::GRACE) passed), so that the agent can finish the
/// turn it was in, with fsgate's answers to its file requests.
#[derive(Default)]
pub(super) struct Owed {
    /// Ids (as JSON text) of editor requests relayed to the agent and not answered.
    pub(super) by_agent: Mutex<std::collections::HashSet<String>>,
    /// Replies fsgate owes the agent (its file requests being served).
    pub(super) by_fsgate: std::sync::atomic::AtomicUsize,
    /// Woken whenever either goes down.
    pub(super) settled: tokio::sync::Notify,
}

/// At most this many unanswered editor requests are tracked for [`Owed`].
pub(super) const MAX_OWED: usize = 4096;

impl Owed {
    pub(super) fn relayed(&self, id: &Value) {
        if let Ok(mut ids) = self.by_agent.lock()
            && ids.len() < MAX_OWED
        {
            ids.insert(id_key(id));
        }
    }

    pub(super) fn answered(&self, id: &Value) {
        let removed = self
            .by_agent
            .lock()
            .is_ok_and(|mut ids| ids.remove(&id_key(id)));
        if removed {
            self.settled.notify_waiters();
        }
    }

    /// fsgate took on a reply to the agent; [`Owed::replied`] once it is queued.
    pub(super) fn owe(&self) {
        self.by_fsgate.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn replied(&self) {
        self.by_fsgate.fetch_sub(1, Ordering::AcqRel);
        self.settled.notify_waiters();
    }

    pub(super) fn is_settled(&self) -> bool {
        self.by_fsgate.load(Ordering::Acquire) == 0
            && self.by_agent.lock().map_or(true, |ids| ids.is_empty())
    }

    /// Waits until nothing is owed either way, at most `limit`.
    pub(super) async fn wait_settled(&self, limit: Duration) {
        let wait = async {
            loop {
                let woken = self.settled.notified();
                if self.is_settled() {
                    return;
                }
                woken.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}
