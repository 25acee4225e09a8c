//! Connections still in their HTTP upgrade: a small budget of their own, apart from
//! the authenticated connections' (`[ws] max_connections`), so that clients without a
//! token cannot hold the door shut.
//!
//! When the budget is full, a new connection is admitted and the *oldest* pending one
//! is dropped: a flood of silent or slow connections then keeps churning through the
//! budget, while a real client, whose upgrade takes a round trip, completes before
//! `max_pending` newer connections push it out. (Refusing the newest instead would
//! lock out every real client for as long as the flood holds the budget.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The handshakes in progress.
#[derive(Debug)]
pub(crate) struct Pending {
    max: usize,
    /// Oldest first; dropping a sender tells its connection to give up.
    waiting: Mutex<BTreeMap<u64, oneshot::Sender<()>>>,
    next: AtomicU64,
    dropped: AtomicU64,
}

/// One connection's place among the pending handshakes; leaves when dropped.
#[derive(Debug)]
pub(crate) struct Ticket {
    id: u64,
    set: Arc<Pending>,
    evicted: oneshot::Receiver<()>,
}

impl Pending {
    /// A budget of `max` handshakes at once (at least one).
    pub(crate) fn new(max: usize) -> Arc<Pending> {
        Arc::new(Pending {
            max: max.max(1),
            waiting: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Admits a new handshake, dropping the oldest one if the budget is full.
    pub(crate) fn admit(self: &Arc<Self>) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut evicted = 0;
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            while waiting.len() >= self.max && waiting.pop_first().is_some() {
                evicted += 1;
            }
            waiting.insert(id, tx);
        }
        if evicted > 0 {
            let total = self.dropped.fetch_add(evicted, Ordering::Relaxed) + evicted;
            // Once, then now and then: a flood must not flood the log either.
            if total == evicted || total % 1000 < evicted {
                tracing::warn!(
                    dropped = total,
                    budget = self.max,
                    "ws: too many connections without a completed upgrade; dropping the oldest"
                );
            }
        }
        Ticket {
            id,
            set: Arc::clone(self),
            evicted: rx,
        }
    }

    /// Handshakes in progress.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.waiting.lock().map(|w| w.len()).unwrap_or(0)
    }

    /// True when no handshake is in progress.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Ticket {
    /// Resolves when a newer connection pushed this one out of the budget.
    pub(crate) async fn evicted(&mut self) {
        let _ = (&mut self.evicted).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut waiting = self.set.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_is_dropped_when_the_budget_is_full() {
        let set = Pending::new(2);
        let mut a = set.admit();
        let b = set.admit();
        assert_eq!(set.len(), 2);
        let c = set.admit();
        assert_eq!(set.len(), 2);
        tokio::time::timeout(std::time::Duration::from_secs(1), a.evicted())
            .await
            .expect("the oldest is told to go");
        drop(b);
        assert_eq!(set.len(), 1);
        drop(c);
        drop(a);
        assert!(set.is_empty());
    }
}
