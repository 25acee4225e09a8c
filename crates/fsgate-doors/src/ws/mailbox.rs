//! Pushed change events waiting for one client: a small mailbox that is replaced by one
//! `overflow` event when the client does not keep up, so events never hold back
//! answers and a client that does not read cannot make fsgate keep more than this.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Change events waiting for one client before they are discarded for an `overflow`.
pub(super) const MAX_QUEUED_EVENTS: usize = 1024;

/// Bytes of change events waiting for one client before the same.
pub(super) const MAX_QUEUED_EVENT_BYTES: usize = 256 * 1024;

/// Events lost since the client last got one: `Some(how many, if known)`.
pub(super) type Lost = Option<Option<u64>>;

#[derive(Debug, Default)]
struct Waiting {
    queue: VecDeque<String>,
    bytes: usize,
    lost: Lost,
}

/// One connection's mailbox; clones share it.
#[derive(Debug, Clone, Default)]
pub(super) struct Mailbox {
    waiting: Arc<Mutex<Waiting>>,
    arrived: Arc<Notify>,
}

/// What the writer takes out at once.
#[derive(Debug)]
pub(super) struct Batch {
    /// Events lost before these (send an `overflow` first).
    pub lost: Lost,
    /// The events, encoded, in order.
    pub events: Vec<String>,
}

impl Mailbox {
    /// Queues an encoded change event; when too many wait, they are all discarded and
    /// counted as lost.
    pub(super) fn push(&self, text: String) {
        let Ok(mut w) = self.waiting.lock() else {
            return;
        };
        if w.queue.len() >= MAX_QUEUED_EVENTS || w.bytes + text.len() > MAX_QUEUED_EVENT_BYTES {
            let dropped = w.queue.len() as u64 + 1;
            w.queue.clear();
            w.bytes = 0;
            w.lost = Some(add_lost(w.lost, Some(dropped)));
        } else {
            w.bytes += text.len();
            w.queue.push_back(text);
        }
        drop(w);
        self.arrived.notify_one();
    }

    /// Notes events lost before they reached this connection (`None`: how many is
    /// not known).
    pub(super) fn lost(&self, n: Option<u64>) {
        if let Ok(mut w) = self.waiting.lock() {
            w.lost = Some(add_lost(w.lost, n));
        }
        self.arrived.notify_one();
    }

    /// Waits until something is in the mailbox, and takes all of it.
    pub(super) async fn take(&self) -> Batch {
        loop {
            if let Some(b) = self.take_now() {
                return b;
            }
            self.arrived.notified().await;
        }
    }

    fn take_now(&self) -> Option<Batch> {
        let mut w = self.waiting.lock().ok()?;
        if w.queue.is_empty() && w.lost.is_none() {
            return None;
        }
        w.bytes = 0;
        Some(Batch {
            lost: w.lost.take(),
            events: w.queue.drain(..).collect(),
        })
    }
}

fn add_lost(before: Lost, n: Option<u64>) -> Option<u64> {
    match (before, n) {
        (None, n) => n,
        (Some(Some(a)), Some(b)) => Some(a.saturating_add(b)),
        (Some(_), _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn too_many_events_become_one_overflow() {
        let m = Mailbox::default();
        for i in 0..=MAX_QUEUED_EVENTS + 5 {
            m.push(format!("e{i}"));
        }
        let b = m.take().await;
        assert_eq!(b.lost, Some(Some(MAX_QUEUED_EVENTS as u64 + 1)));
        assert_eq!(b.events.len(), 5);
        m.lost(None);
        let b = m.take().await;
        assert_eq!((b.lost, b.events.len()), (Some(None), 0));
    }

    #[tokio::test]
    async fn big_events_overflow_by_bytes() {
        let m = Mailbox::default();
        for _ in 0..5 {
            m.push("x".repeat(MAX_QUEUED_EVENT_BYTES / 4));
        }
        let b = m.take().await;
        assert_eq!(b.lost, Some(Some(5)));
        assert!(b.events.is_empty());
    }
}
