//! Writing one batch: its segments (rotating where one says), the sync the mode asks
//! for, the Merkle leaves of what was written, and waking its appenders (or failing
//! them and rewinding the chain to the last record written).

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::queue::{Batch, DONE, FAILED, leaf_hashes};
use super::state::{Shared, lock};
use crate::config::FsyncMode;
use crate::error::AuditError;
use crate::io::Io;

impl Shared {
    /// Writes one batch (and syncs as the mode, or `sync`, requires); marks its records
    /// done or failed. Returns whether it failed. Called by the leader, without the state
    /// lock.
    /// `sync`: (sync even if the mode would not, write without syncing whatever the mode).
    pub(super) fn write_batch(&self, io: &mut Io, batch: &Batch, sync: (bool, bool)) -> bool {
        let (force_sync, write_only) = sync;
        let sync = force_sync && !write_only;
        if batch.entries.is_empty() {
            // A sync-only turn (heartbeat, close) says nothing about the log's health.
            return match (sync, sync && io.sync().is_err()) {
                (true, true) => {
                    tracing::error!(log = %self.path.display(), "audit sync failed");
                    true
                }
                _ => false,
            };
        }
        let was_unsynced = io.unsynced_since().is_some();
        let (done, failure) = self.write_segments(io, batch, (sync, write_only));
        let leaves = leaf_hashes(batch, done);
        let mut st = lock(&self.state);
        if let Some(tree) = &mut st.tree {
            leaves.into_iter().for_each(|leaf| tree.push(leaf));
        }
        let mut kick = !was_unsynced && io.unsynced_since().is_some();
        if let Some(last) = batch.entries[..done].last() {
            st.durable_seq = last.seq;
            st.durable_head = last.hash;
            if st.uncovered_since.is_none() {
                st.uncovered_since = Some(Instant::now());
                kick |= self.heartbeat.is_some();
            }
        }
        let failed = match failure {
            None => {
                drop(st);
                if kick {
                    self.kick_heartbeat();
                }
                self.failing.store(false, Ordering::Release);
                io.sync_failed = false;
                self.space_low.store(!io.reserve(), Ordering::Release);
                None
            }
            Some(e) => {
                tracing::error!(log = %self.path.display(), error = %e, "audit write failed; requests are refused until it succeeds");
                st.last_error = Some(e);
                // Later records chain on the failed ones: they fail too, and the chain
                // rewinds to the last committed record.
                let queued = std::mem::take(&mut st.queue);
                st.next_seq = st.durable_seq + 1;
                st.head = st.durable_head;
                st.file_bytes = io.len();
                self.failing.store(true, Ordering::Release);
                drop(st);
                Some(queued)
            }
        };
        // Wake the appenders without holding the state lock, so that new records can
        // queue up meanwhile. (A woken appender that finds its record failed reads the
        // error under the lock, which is set by now.)
        for e in &batch.entries[..done] {
            e.waiter.finish(DONE);
        }
        match failed {
            None => false,
            Some(queued) => {
                for e in batch.entries[done..].iter().chain(&queued.entries) {
                    e.waiter.finish(FAILED);
                }
                true
            }
        }
    }

    /// Writes a batch's segments (rotating where a segment says), then syncs when
    /// asked: how many of its entries were written, and the first failure.
    pub(super) fn write_segments(
        &self,
        io: &mut Io,
        batch: &Batch,
        (sync, write_only): (bool, bool),
    ) -> (usize, Option<AuditError>) {
        let mode = if write_only {
            FsyncMode::Never
        } else {
            self.mode
        };
        let mut failure = None;
        let mut done = 0;
        for seg in batch.segments() {
            match io.write_segment(&batch.buf[seg.bytes], seg.rotate_to, mode) {
                Ok(()) => done = seg.entries.end,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_none()
            && sync
            && let Err(e) = io.sync()
        {
            failure = Some(e);
        }
        (done, failure)
    }
}
