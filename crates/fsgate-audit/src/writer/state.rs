//! What the handle, the appenders and the heartbeat share ([`Shared`]): the
//! sequencing [`State`] behind one mutex never held across I/O, what the heartbeat is
//! told ([`Beat`]), what a leader does besides writing ([`Duty`]), and the gate of the
//! deferred `start` checkpoint.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::queue::Batch;
use crate::coalesce::Coalescer;
use crate::config::FsyncMode;
use crate::error::AuditError;
use crate::growth::Growth;
use crate::intents::Intent;
use crate::io::Io;
use crate::io::ckpt_writer::CkptWriter;
use crate::merkle::CompactRange;

/// Sequencing state, guarded by one mutex that is never held across I/O.
pub(super) struct State {
    /// Seq of the next record.
    pub(super) next_seq: u64,
    /// Hash of the last record chained (queued or written).
    pub(super) head: [u8; 32],
    /// Bytes in the active file, counting queued records.
    pub(super) file_bytes: u64,
    /// Records waiting for a leader.
    pub(super) queue: Batch,
    /// Someone is writing: the others wait.
    pub(super) leader: bool,
    /// Last record written (and synced, in `always` mode).
    pub(super) durable_seq: u64,
    /// Its hash.
    pub(super) durable_head: [u8; 32],
    /// Last checkpointed seq, and since when newer records have waited for a checkpoint.
    pub(super) ckpt_seq: u64,
    /// Since when records have waited for a checkpoint.
    pub(super) uncovered_since: Option<Instant>,
    /// A checkpoint is being written (outside the leader role).
    pub(super) ckpt_busy: bool,
    /// Why the last write failed (handed to the appenders it failed).
    pub(super) last_error: Option<AuditError>,
    /// `close` ran.
    pub(super) closed: bool,
    /// A leader's turn unwound (a defect): what the file holds past the last record
    /// known written is not known, so nothing more is appended; a restart's recovery
    /// settles the file (`last_error` says so).
    pub(super) broken: bool,
    /// The `stop` record is queued: nothing may follow it, whichever thread appends
    /// while `close` still syncs it.
    pub(super) sealed: bool,
    /// Duty runners waiting on `cv`: a leader wakes them only if there are some (a
    /// wake-up with nobody waiting is still a syscall, on every request's path).
    pub(super) duty_waiters: usize,
    /// The Merkle tree over records `1..=durable_seq`, which checkpoints commit to;
    /// `None` when it could not be rebuilt at start (said in the `start` record).
    pub(super) tree: Option<CompactRange>,
    /// When the last record was queued (the deferred `start` checkpoint waits for a
    /// quiet log).
    pub(super) last_queued: Option<Instant>,
}

/// What the heartbeat thread is told while it waits.
#[derive(Default)]
pub(super) struct Beat {
    /// The log is closing: end.
    pub(super) stopped: bool,
    /// Something may now be due where nothing was (records wait for a checkpoint, or
    /// written data for a sync): look again.
    pub(super) kicked: bool,
}

/// What a leader does besides writing the queue.
#[derive(Clone, Copy, Default)]
pub(super) struct Duty {
    /// Write a checkpoint of this kind.
    pub(super) checkpoint: Option<&'static str>,
    /// Sync the file even in `batch`/`never` mode.
    pub(super) sync: bool,
    /// Write the queue without syncing it, even in `always` mode (the deferred `start`
    /// record: the next synced record covers it).
    pub(super) write_only: bool,
}

/// Everything the handle, the appenders and the heartbeat share.
pub(super) struct Shared {
    /// The active log file (for messages).
    pub(super) path: PathBuf,
    /// From the genesis record.
    pub(super) log_id: String,
    /// `[audit] fsync`.
    pub(super) mode: FsyncMode,
    /// `[audit] checkpoint_every`.
    pub(super) checkpoint_every: u64,
    /// `[audit] heartbeat_secs`.
    pub(super) heartbeat: Option<Duration>,
    /// `[audit] max_file_bytes`.
    pub(super) max_file_bytes: u64,
    /// Stamped on every record; changed on reload.
    pub(super) policy: RwLock<Arc<str>>,
    /// Sequencing; never held across I/O.
    pub(super) state: Mutex<State>,
    /// Signals "no leader now" to duty runners (close, start-up).
    pub(super) cv: Condvar,
    /// The files; only the leader locks it.
    pub(super) io: Mutex<Io>,
    /// Checkpoint writing, outside the leader role.
    pub(super) ckpt: Mutex<CkptWriter>,
    /// The last write failed and nothing has succeeded since.
    pub(super) failing: AtomicBool,
    /// The disk space reserved ahead of the log could not be extended.
    pub(super) space_low: AtomicBool,
    /// The last checkpoint (file or sink) could not be written.
    pub(super) checkpoint_failing: AtomicBool,
    /// Wakes the heartbeat thread: to stop, or because a deadline appeared.
    pub(super) beat: Arc<(Mutex<Beat>, Condvar)>,
    /// The heartbeat thread, once started.
    pub(super) heartbeat_thread: Mutex<Option<JoinHandle<()>>>,
    /// The `start` checkpoint is still to be written (`defer_start_checkpoint`).
    pub(super) start_checkpoint_due: AtomicBool,
    /// The thread writing the deferred `start` checkpoint.
    pub(super) start_checkpoint_thread: Mutex<Option<JoinHandle<()>>>,
    /// Tells that thread to stop waiting for a quiet log.
    pub(super) start_gate: Gate,
    /// The thread writing and syncing a `start_with` record when no start-checkpoint
    /// thread does.
    pub(super) background_sync_thread: Mutex<Option<JoinHandle<()>>>,
    /// Changes announced before this start with neither outcome nor reconciliation.
    pub(super) open_intents: Vec<Intent>,
    /// Run by `close` once the last record is written (the shipper's final drain).
    pub(super) on_close: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// Intents whose outcome was recorded with `details.entryPending` and whose
    /// directory entry is durable since, not yet named by a record
    /// (`details.entriesDurable` of the next one appended). One per write in flight.
    pub(super) durable_entries: Mutex<Vec<u64>>,
    /// `[audit] max_bytes_per_minute` and `max_session_bytes_per_minute`.
    pub(super) growth: Growth,
    /// Allowed reads held per process until their `reads` record is due.
    pub(super) coalescer: Arc<Coalescer>,
    /// The thread that appends the groups that are due, once started.
    pub(super) coalesce_thread: Mutex<Option<JoinHandle<()>>>,
    /// Whether that thread was started.
    pub(super) coalescing: AtomicBool,
}

impl State {
    /// The state of a log opened with `head` (seq and hash) as its last durable record,
    /// its active file `file_bytes` long, checkpointed up to `ckpt_seq`.
    pub(super) fn resumed(
        (head_seq, head): (u64, [u8; 32]),
        file_bytes: u64,
        ckpt_seq: u64,
        tree: Option<CompactRange>,
    ) -> State {
        State {
            next_seq: head_seq + 1,
            head,
            file_bytes,
            queue: Batch::default(),
            leader: false,
            durable_seq: head_seq,
            durable_head: head,
            ckpt_seq,
            uncovered_since: None,
            ckpt_busy: false,
            last_error: None,
            closed: false,
            broken: false,
            sealed: false,
            duty_waiters: 0,
            tree,
            last_queued: None,
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a half-chained record behind (state
    // changes are committed only after I/O), so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Tells the thread of the deferred `start` checkpoint that the log is closing (write
/// now, do not wait).
#[derive(Default)]
pub(super) struct Gate {
    pub(super) closing: Mutex<bool>,
    pub(super) cv: Condvar,
}
