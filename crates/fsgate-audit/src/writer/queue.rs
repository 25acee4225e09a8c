//! The records waiting for a leader: each [`Entry`] with the [`Waiter`] to wake, and a
//! [`Batch`] split into the runs that go to one file.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::merkle;

pub(super) const PENDING: u8 = 0;
pub(super) const DONE: u8 = 1;
pub(super) const FAILED: u8 = 2;

/// An appender waiting for its record: woken (unparked) exactly when its record is
/// done or failed, or when it is first in the queue and the leader steps down.
pub(super) struct Waiter {
    /// `PENDING`, `DONE` or `FAILED`.
    pub(super) state: AtomicU8,
    /// Its thread waits for it now (set under the state lock): only such a waiter is
    /// woken to lead next (a deferred record's thread may be busy elsewhere).
    pub(super) waiting: AtomicBool,
    /// The appending thread.
    pub(super) thread: std::thread::Thread,
}

impl Waiter {
    pub(super) fn finish(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.thread.unpark();
    }
}

/// One queued record.
pub(super) struct Entry {
    /// Its seq.
    pub(super) seq: u64,
    /// Its hash.
    pub(super) hash: [u8; 32],
    /// End of this record's line in the batch buffer.
    pub(super) end: usize,
    /// This record starts a new file: rotate before writing it.
    pub(super) rotate: bool,
    /// Who to wake when it is done.
    pub(super) waiter: Arc<Waiter>,
}

/// Records queued for the next leader, in seq order.
#[derive(Default)]
pub(super) struct Batch {
    /// Their lines, back to back.
    pub(super) buf: Vec<u8>,
    /// One per record.
    pub(super) entries: Vec<Entry>,
}

/// A run of queued records that go to one file.
pub(super) struct Segment {
    /// Which entries.
    pub(super) entries: std::ops::Range<usize>,
    /// Their bytes in the batch buffer.
    pub(super) bytes: std::ops::Range<usize>,
    /// Rotate first; the new file starts with this seq.
    pub(super) rotate_to: Option<u64>,
}

impl Batch {
    /// Splits the batch where a record starts a new file.
    pub(super) fn segments(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut first = 0;
        for (i, e) in self.entries.iter().enumerate() {
            if e.rotate && i > first {
                out.push(self.segment(first..i));
                first = i;
            }
        }
        if first < self.entries.len() {
            out.push(self.segment(first..self.entries.len()));
        }
        out
    }

    pub(super) fn segment(&self, entries: std::ops::Range<usize>) -> Segment {
        let start = match entries.start {
            0 => 0,
            i => self.entries[i - 1].end,
        };
        let end = self.entries[entries.end - 1].end;
        let head = &self.entries[entries.start];
        Segment {
            rotate_to: head.rotate.then_some(head.seq),
            bytes: start..end,
            entries,
        }
    }
}

/// The Merkle leaf hash of each of the first `done` records of a batch.
pub(super) fn leaf_hashes(batch: &Batch, done: usize) -> Vec<merkle::Hash> {
    let mut start = 0;
    let mut out = Vec::with_capacity(done);
    for e in &batch.entries[..done] {
        let line = &batch.buf[start..e.end];
        out.push(merkle::leaf_hash(line.strip_suffix(b"\n").unwrap_or(line)));
        start = e.end;
    }
    out
}
