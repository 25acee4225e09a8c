//! [`AuditLog`]: the shared writer. Chains records, group-commits them (leader/follower:
//! the first waiting appender writes and syncs everything queued, for everyone), rotates
//! files, writes checkpoints, and rolls back cleanly when the disk refuses a write.
//!
//! This file holds the handle ([`AuditLog`], [`Tap`], [`Ticket`], [`OpenOptions`]) and
//! what it tells; `state`: what the handle, the appenders and the heartbeat share;
//! `queue`: the records waiting for a leader; `open`: opening and the `start` record;
//! `append`: queueing and waiting; `leader`: a leader's turn and its checkpoint;
//! `batch_write`: writing one batch; `heartbeat`: the heartbeat thread; `close`: the
//! gate before a change and closing.

use std::path::Path;
use std::sync::{Arc, Weak};
#[cfg(test)]
use std::time::Duration;

mod append;
mod background_sync;
mod batch_write;
mod close;
mod coalescing;
mod heartbeat;
mod leader;
mod open;
mod queue;
mod start_checkpoint;
mod state;

use super::intents::Intent;
#[cfg(any(test, feature = "fault-injection"))]
use super::io::Fault;
use queue::Waiter;
use state::{Shared, lock};

/// Choices the operator makes when opening the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Start even if the existing log does not verify: the damaged part is set aside and
    /// a `break` record, chained to the last record that verified, says what was wrong.
    pub allow_broken_chain: bool,
    /// Leave the `start` checkpoint to [`AuditLog::start`], which writes it on a thread of
    /// its own: the `start` record is still durable when `open` returns, but nothing
    /// waits for the checkpoint's file sync, rename and directory sync (the gateway's
    /// first answer does not). A failure then refuses changes until a checkpoint
    /// succeeds, as a failed periodic checkpoint does.
    pub defer_start_checkpoint: bool,
    /// At `fsync = "always"`, write the `start` record without syncing it: the next
    /// record appended (the gateway's own `start`, before anything is served) makes
    /// both durable with one sync. Until then the record is in the file, not on the
    /// disk: a process that exits keeps it, a power loss before that sync takes it with
    /// a run that had served nothing. Records of a recovery are synced as they are
    /// appended, as every record at `always`. In the other modes the `start` record is
    /// synced at open as without this option (their records are not synced one by one).
    pub defer_start_sync: bool,
}

/// A record queued by [`AuditLog::append_deferred`] and not yet known durable.
#[must_use = "a deferred record must be waited for before its request is answered"]
pub struct Ticket {
    seq: u64,
    hash: [u8; 32],
    ts: String,
    waiter: Arc<Waiter>,
    /// The intents this record names in `details.entriesDurable` (noted again if it
    /// fails).
    named: Vec<u64>,
}

impl Ticket {
    /// The record's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// The audit log. `Send + Sync`: share it (in an `Arc`) between all request threads.
pub struct AuditLog {
    /// Shared with the heartbeat thread (which holds it weakly).
    shared: Arc<Shared>,
    /// False for a view made from a [`Tap`]: dropping it leaves the log running.
    owner: bool,
}

/// A weak handle on the log for a thread that follows it (the shipper): it does not
/// keep the log open, and [`Tap::log`] gives a view to read the head and append
/// lifecycle records while the log exists.
#[derive(Clone)]
pub struct Tap {
    /// The log's shared state.
    shared: Weak<Shared>,
}

impl Tap {
    /// The log, if it still exists (a view: dropping it does not stop the log).
    pub fn log(&self) -> Option<AuditLog> {
        self.shared.upgrade().map(|shared| AuditLog {
            shared,
            owner: false,
        })
    }
}

impl AuditLog {
    /// Changes the policy hash stamped on later records (after a reload; also append a
    /// `reload` lifecycle record).
    pub fn set_policy_sha256(&self, sha256: &str) {
        let mut p = self
            .shared
            .policy
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *p = Arc::from(sha256);
    }

    /// A weak handle on this log for a thread that follows it.
    pub fn tap(&self) -> Tap {
        Tap {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Runs `hook` when the log is closed, after its last record (the `stop` record)
    /// and the shutdown checkpoint.
    pub(crate) fn on_close(&self, hook: Box<dyn FnOnce() + Send>) {
        lock(&self.shared.on_close).push(hook);
    }

    /// Whether the log was closed.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared.state).closed
    }

    /// The intents found open at start-up (a crash between a change's intent and its
    /// outcome): the gateway looks at the disk and appends a `reconciled` record for
    /// each before it serves anything.
    pub fn open_intents(&self) -> &[Intent] {
        &self.shared.open_intents
    }

    /// The active log file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The directory holding the log and its sidecars (for Landlock rules).
    pub fn dir(&self) -> &Path {
        self.shared.path.parent().unwrap_or(Path::new("."))
    }

    /// This log's id (from its genesis record).
    pub(crate) fn log_id(&self) -> &str {
        &self.shared.log_id
    }

    /// Seq and hash of the last durable record.
    pub fn head(&self) -> (u64, String) {
        let st = lock(&self.shared.state);
        (st.durable_seq, hex::encode(st.durable_head))
    }

    /// Test hook: the next `count` batch writes fail (a partial write then an error, or a
    /// failed sync), as a full or failing disk would make them.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn inject_faults(&self, fault: Fault, count: u32) {
        lock(&self.shared.io).inject(fault, count);
    }

    /// Test hook: as [`inject_faults`](Self::inject_faults), after `skip` batch writes
    /// that succeed.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn inject_faults_after(&self, fault: Fault, skip: u32, count: u32) {
        lock(&self.shared.io).inject_after(fault, skip, count);
    }

    /// How long written data has waited for a sync (tests).
    #[cfg(test)]
    pub(crate) fn io_unsynced_for(&self) -> Duration {
        lock(&self.shared.io).unsynced_for()
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if self.owner {
            self.stop_coalescing();
            self.stop_heartbeat();
        }
    }
}
