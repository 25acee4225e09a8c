//! [`AuditLog`]: the shared writer. Chains records, group-commits them (leader/follower:
//! the first waiting appender writes and syncs everything queued, for everyone), rotates
//! files, writes checkpoints, and rolls back cleanly when the disk refuses a write.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[path = "background_sync.rs"]
mod background_sync;
#[path = "coalescing.rs"]
mod coalescing;
#[path = "start_checkpoint.rs"]
mod start_checkpoint;

use serde_json::{Map, Value, json};

use super::config::{AuditSettings, BATCH_SYNC_INTERVAL, FsyncMode};
use super::growth::{Growth, Refusal};
use super::intents::Intent;
#[cfg(any(test, feature = "fault-injection"))]
use super::io::Fault;
use super::io::{CkptWriter, Io};
use super::merkle::{self, CompactRange};
use super::record::{self, AuditEvent, Receipt};
use super::{canonical, recover};
use crate::error::AuditError;

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

/// At most this many batches are written by one leader before it hands over.
const MAX_ROUNDS: u32 = 8;

const PENDING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;

/// An appender waiting for its record: woken (unparked) exactly when its record is
/// done or failed, or when it is first in the queue and the leader steps down.
struct Waiter {
    /// `PENDING`, `DONE` or `FAILED`.
    state: AtomicU8,
    /// Its thread waits for it now (set under the state lock): only such a waiter is
    /// woken to lead next (a deferred record's thread may be busy elsewhere).
    waiting: AtomicBool,
    /// The appending thread.
    thread: std::thread::Thread,
}

impl Waiter {
    fn finish(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.thread.unpark();
    }
}

/// One queued record.
struct Entry {
    /// Its seq.
    seq: u64,
    /// Its hash.
    hash: [u8; 32],
    /// End of this record's line in the batch buffer.
    end: usize,
    /// This record starts a new file: rotate before writing it.
    rotate: bool,
    /// Who to wake when it is done.
    waiter: Arc<Waiter>,
}

/// Records queued for the next leader, in seq order.
#[derive(Default)]
struct Batch {
    /// Their lines, back to back.
    buf: Vec<u8>,
    /// One per record.
    entries: Vec<Entry>,
}

/// A run of queued records that go to one file.
struct Segment {
    /// Which entries.
    entries: std::ops::Range<usize>,
    /// Their bytes in the batch buffer.
    bytes: std::ops::Range<usize>,
    /// Rotate first; the new file starts with this seq.
    rotate_to: Option<u64>,
}

impl Batch {
    /// Splits the batch where a record starts a new file.
    fn segments(&self) -> Vec<Segment> {
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

    fn segment(&self, entries: std::ops::Range<usize>) -> Segment {
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

/// Sequencing state, guarded by one mutex that is never held across I/O.
struct State {
    /// Seq of the next record.
    next_seq: u64,
    /// Hash of the last record chained (queued or written).
    head: [u8; 32],
    /// Bytes in the active file, counting queued records.
    file_bytes: u64,
    /// Records waiting for a leader.
    queue: Batch,
    /// Someone is writing: the others wait.
    leader: bool,
    /// Last record written (and synced, in `always` mode).
    durable_seq: u64,
    /// Its hash.
    durable_head: [u8; 32],
    /// Last checkpointed seq, and since when newer records have waited for a checkpoint.
    ckpt_seq: u64,
    /// Since when records have waited for a checkpoint.
    uncovered_since: Option<Instant>,
    /// A checkpoint is being written (outside the leader role).
    ckpt_busy: bool,
    /// Why the last write failed (handed to the appenders it failed).
    last_error: Option<AuditError>,
    /// `close` ran.
    closed: bool,
    /// The `stop` record is queued: nothing may follow it, whichever thread appends
    /// while `close` still syncs it.
    sealed: bool,
    /// Duty runners waiting on `cv`: a leader wakes them only if there are some (a
    /// wake-up with nobody waiting is still a syscall, on every request's path).
    duty_waiters: usize,
    /// The Merkle tree over records `1..=durable_seq`, which checkpoints commit to;
    /// `None` when it could not be rebuilt at start (said in the `start` record).
    tree: Option<CompactRange>,
    /// When the last record was queued (the deferred `start` checkpoint waits for a
    /// quiet log).
    last_queued: Option<Instant>,
}

/// What the heartbeat thread is told while it waits.
#[derive(Default)]
struct Beat {
    /// The log is closing: end.
    stopped: bool,
    /// Something may now be due where nothing was (records wait for a checkpoint, or
    /// written data for a sync): look again.
    kicked: bool,
}

/// What a leader does besides writing the queue.
#[derive(Clone, Copy, Default)]
struct Duty {
    /// Write a checkpoint of this kind.
    checkpoint: Option<&'static str>,
    /// Sync the file even in `batch`/`never` mode.
    sync: bool,
    /// Write the queue without syncing it, even in `always` mode (the deferred `start`
    /// record: the next synced record covers it).
    write_only: bool,
}

/// Everything the handle, the appenders and the heartbeat share.
struct Shared {
    /// The active log file (for messages).
    path: PathBuf,
    /// From the genesis record.
    log_id: String,
    /// `[audit] fsync`.
    mode: FsyncMode,
    /// `[audit] checkpoint_every`.
    checkpoint_every: u64,
    /// `[audit] heartbeat_secs`.
    heartbeat: Option<Duration>,
    /// `[audit] max_file_bytes`.
    max_file_bytes: u64,
    /// Stamped on every record; changed on reload.
    policy: RwLock<Arc<str>>,
    /// Sequencing; never held across I/O.
    state: Mutex<State>,
    /// Signals "no leader now" to duty runners (close, start-up).
    cv: Condvar,
    /// The files; only the leader locks it.
    io: Mutex<Io>,
    /// Checkpoint writing, outside the leader role.
    ckpt: Mutex<CkptWriter>,
    /// The last write failed and nothing has succeeded since.
    failing: AtomicBool,
    /// The disk space reserved ahead of the log could not be extended.
    space_low: AtomicBool,
    /// The last checkpoint (file or sink) could not be written.
    checkpoint_failing: AtomicBool,
    /// Wakes the heartbeat thread: to stop, or because a deadline appeared.
    beat: Arc<(Mutex<Beat>, Condvar)>,
    /// The heartbeat thread, once started.
    heartbeat_thread: Mutex<Option<JoinHandle<()>>>,
    /// The `start` checkpoint is still to be written (`defer_start_checkpoint`).
    start_checkpoint_due: AtomicBool,
    /// The thread writing the deferred `start` checkpoint.
    start_checkpoint_thread: Mutex<Option<JoinHandle<()>>>,
    /// Tells that thread to stop waiting for a quiet log.
    start_gate: start_checkpoint::Gate,
    /// The thread writing and syncing a `start_with` record when no start-checkpoint
    /// thread does.
    background_sync_thread: Mutex<Option<JoinHandle<()>>>,
    /// Changes announced before this start with neither outcome nor reconciliation.
    open_intents: Vec<Intent>,
    /// Run by `close` once the last record is written (the shipper's final drain).
    on_close: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// Intents whose outcome was recorded with `details.entryPending` and whose
    /// directory entry is durable since, not yet named by a record
    /// (`details.entriesDurable` of the next one appended). One per write in flight.
    durable_entries: Mutex<Vec<u64>>,
    /// `[audit] max_bytes_per_minute` and `max_session_bytes_per_minute`.
    growth: Growth,
    /// Allowed reads held per process until their `reads` record is due.
    coalescer: Arc<super::coalesce::Coalescer>,
    /// The thread that appends the groups that are due, once started.
    coalesce_thread: Mutex<Option<JoinHandle<()>>>,
    /// Whether that thread was started.
    coalescing: AtomicBool,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a half-chained record behind (state
    // changes are committed only after I/O), so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl AuditLog {
    /// Opens (or creates) the log at `path`, checks its tail, and records the start.
    ///
    /// Recovery: a torn last line is cut off and described in a `recovered` record; a
    /// chain or checkpoint that does not verify makes `open` fail with
    /// [`AuditError::BrokenChain`] unless `opts.allow_broken_chain`, in which case the
    /// damaged file is copied aside and a `break` record describes it. Then a `start`
    /// record (with the check result) and a `start` checkpoint are written.
    ///
    /// No thread is started: call [`AuditLog::start`] once the process is confined.
    ///
    /// # Ambient Authority
    ///
    /// Opens the log's directory, the signing key and the checkpoint sink by path. Call it
    /// before Landlock; afterwards everything goes through the directory handle.
    pub fn open(
        path: &Path,
        settings: &AuditSettings,
        policy_sha256: &str,
        opts: OpenOptions,
    ) -> Result<AuditLog, AuditError> {
        let mut io = Io::open(path, settings)?;
        let mut rec = recover::apply(&mut io, opts.allow_broken_chain)?;
        // The active file's bytes are freed here, not kept for the log's lifetime.
        let log_id = rec
            .log_id
            .clone()
            .unwrap_or_else(|| hex::encode(super::keys::random_bytes::<16>()));
        let (head_seq, head) = rec.head.unwrap_or((0, record::GENESIS_PREV));
        let first = rec.active_first_seq.unwrap_or(head_seq + 1);
        let tree = super::tree::resume(&io, &log_id, &rec.active, first, head_seq)?;
        let open_intents = super::intents::pending(&io, &std::mem::take(&mut rec.active))?;
        io.set_active(rec.active_len, rec.active_first_seq.unwrap_or(head_seq + 1));
        let ckpt = io.checkpoint_writer()?;
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            log_id,
            mode: settings.fsync,
            checkpoint_every: settings.checkpoint_every(),
            heartbeat: settings.heartbeat(),
            max_file_bytes: settings.max_file_bytes(),
            policy: RwLock::new(Arc::from(policy_sha256)),
            state: Mutex::new(State::resumed(
                (head_seq, head),
                rec.active_len,
                rec.checkpoint_seq.min(head_seq),
                tree.as_ref().ok().cloned(),
            )),
            cv: Condvar::new(),
            io: Mutex::new(io),
            ckpt: Mutex::new(ckpt),
            failing: AtomicBool::new(false),
            space_low: AtomicBool::new(false),
            checkpoint_failing: AtomicBool::new(false),
            beat: Arc::new((Mutex::new(Beat::default()), Condvar::new())),
            heartbeat_thread: Mutex::new(None),
            start_checkpoint_due: AtomicBool::new(opts.defer_start_checkpoint),
            start_checkpoint_thread: Mutex::new(None),
            background_sync_thread: Mutex::new(None),
            start_gate: start_checkpoint::Gate::default(),
            open_intents: open_intents.clone(),
            on_close: Mutex::new(Vec::new()),
            durable_entries: Mutex::new(Vec::new()),
            growth: Growth::new(
                settings.max_bytes_per_minute(),
                settings.max_session_bytes_per_minute(),
            ),
            coalescer: Arc::default(),
            coalesce_thread: Mutex::new(None),
            coalescing: AtomicBool::new(false),
        });
        let log = AuditLog {
            shared,
            owner: true,
        };
        for ev in rec.events {
            log.append(ev)?;
        }
        let details = start_details(
            (rec.check, &rec.problems),
            settings,
            tree.as_ref().err().map(|why| (path, why.as_str())),
            &open_intents,
        );
        let start = log.append_deferred(&AuditEvent::lifecycle(record::KIND_START, details))?;
        let defer_sync = opts.defer_start_sync && settings.fsync == FsyncMode::Always;
        log.run_duty(Duty {
            checkpoint: (!opts.defer_start_checkpoint).then_some("start"),
            sync: !defer_sync,
            write_only: defer_sync,
        })?;
        // The turn above wrote it (and synced it unless deferred): this only reports
        // whether that worked.
        log.wait(start)?;
        Ok(log)
    }

    /// Starts the heartbeat thread (idle checkpoints, and timed syncs in `batch` mode).
    /// Call it after Landlock confinement so the thread inherits it. Without it, the log
    /// still works; only idle checkpoints and timed batch syncs are missing. The thread
    /// sleeps until the next thing due, and without end while nothing is.
    pub fn start(&self) -> Result<(), AuditError> {
        let _ = self.start_checkpoint_in_background(None)?;
        self.start_heartbeat()
    }

    /// The heartbeat's half of [`start`](Self::start).
    fn start_heartbeat(&self) -> Result<(), AuditError> {
        let mut slot = lock(&self.shared.heartbeat_thread);
        if slot.is_some() {
            return Ok(());
        }
        if self.shared.mode != FsyncMode::Batch && self.shared.heartbeat.is_none() {
            return Ok(());
        }
        let weak = Arc::downgrade(&self.shared);
        let beat = Arc::clone(&self.shared.beat);
        let handle = std::thread::Builder::new()
            .name("fsgate-audit-heartbeat".into())
            .spawn(move || heartbeat_loop(&weak, &beat))
            .map_err(|e| AuditError::io("start heartbeat thread for", &self.shared.path, &e))?;
        *slot = Some(handle);
        Ok(())
    }

    /// Appends one record and returns once it is durable as `[audit] fsync` requires.
    /// Concurrent callers share writes and syncs. On `Err` the record is not in the log
    /// (nor any record queued with it), the chain is unchanged, and the request it
    /// describes must be refused.
    pub fn append(&self, ev: AuditEvent) -> Result<Receipt, AuditError> {
        self.append_ref(&ev)
    }

    /// [`append`](Self::append) of a borrowed event: the caller keeps it (to keep it for
    /// later if the append fails).
    pub fn append_ref(&self, ev: &AuditEvent) -> Result<Receipt, AuditError> {
        let ticket = self.append_deferred(ev)?;
        self.wait(ticket)
    }

    /// Queues `ev` without waiting for it to be durable: the caller must [`wait`] for
    /// the ticket (on this same thread) before acting on the record, e.g. before
    /// answering the request it records. Lets one thread queue the records of a whole
    /// batch of requests and then wait once, so the batch shares one write and one sync.
    ///
    /// [`wait`]: Self::wait
    pub fn append_deferred(&self, ev: &AuditEvent) -> Result<Ticket, AuditError> {
        self.queue_held_reads_of(ev);
        self.queue(ev)
    }

    /// [`append_deferred`](Self::append_deferred) of `ev` alone.
    fn queue(&self, ev: &AuditEvent) -> Result<Ticket, AuditError> {
        let sh = &*self.shared;
        // Taken before the seq below is given: every intent named here had its outcome
        // queued (with a lower seq) before its entry's sync began.
        let (named, naming) = self.name_durable_entries(ev);
        let ev = naming.as_ref().unwrap_or(ev);
        let policy = match &ev.policy_sha256 {
            Some(p) => Arc::clone(p),
            None => sh
                .policy
                .read()
                .map(|p| Arc::clone(&p))
                .unwrap_or_else(|p| Arc::clone(&p.into_inner())),
        };
        let body = ev.body(&policy);
        let waiter = Arc::new(Waiter {
            state: AtomicU8::new(PENDING),
            waiting: AtomicBool::new(false),
            thread: std::thread::current(),
        });
        let mut st = lock(&sh.state);
        if st.closed || st.sealed {
            self.renote_durable_entries(named);
            return Err(AuditError::Closed);
        }
        st.sealed = ev.kind == record::KIND_STOP;
        let seq = st.next_seq;
        let ts = canonical::now_ts();
        let rotate = sh.max_file_bytes > 0 && st.file_bytes >= sh.max_file_bytes;
        let first_in_file = rotate || st.file_bytes == 0;
        let log = first_in_file.then_some(sh.log_id.as_str());
        let (line, hash) = record::seal(seq, &ts, log, &body, &st.head);
        let session = matches!(ev.kind.as_str(), record::KIND_REQUEST | record::KIND_INTENT)
            .then_some(ev.session.as_str());
        let now = Instant::now();
        sh.growth.charge(session, line.len() as u64, now);
        st.last_queued = Some(now);
        st.file_bytes = if rotate { 0 } else { st.file_bytes } + line.len() as u64;
        st.next_seq += 1;
        st.head = hash;
        st.queue.buf.extend_from_slice(&line);
        let end = st.queue.buf.len();
        st.queue.entries.push(Entry {
            seq,
            hash,
            end,
            rotate,
            waiter: Arc::clone(&waiter),
        });
        Ok(Ticket {
            seq,
            hash,
            ts,
            waiter,
            named,
        })
    }

    /// Notes that the directory entry of the change announced by intent `seq`, whose
    /// outcome was recorded with `details.entryPending` while the entry was synced, is
    /// durable: the next record appended names it (`details.entriesDurable`). Until a
    /// durable record does, a start after a crash reconciles that change (FORMAT.md
    /// section 13).
    pub fn entry_durable(&self, seq: u64) {
        lock(&self.shared.durable_entries).push(seq);
    }

    /// Whether another thread is writing a batch of records now: a record queued
    /// meanwhile is likely made durable by a leader after it, without this thread.
    pub fn leader_busy(&self) -> bool {
        lock(&self.shared.state).leader
    }

    /// The entries noted durable since the last record, and `ev` with them in its
    /// `details.entriesDurable`; None (no copy) when there are none.
    fn name_durable_entries(&self, ev: &AuditEvent) -> (Vec<u64>, Option<AuditEvent>) {
        let seqs = {
            let mut noted = lock(&self.shared.durable_entries);
            if noted.is_empty() {
                return (Vec::new(), None);
            }
            std::mem::take(&mut *noted)
        };
        let mut ev = ev.clone();
        ev.details
            .insert(record::ENTRIES_DURABLE.into(), Value::from(seqs.clone()));
        (seqs, Some(ev))
    }

    /// Entries a record named but that record never reached the log: noted again.
    fn renote_durable_entries(&self, seqs: Vec<u64>) {
        if !seqs.is_empty() {
            lock(&self.shared.durable_entries).extend(seqs);
        }
    }

    /// Waits until the record behind `ticket` is durable (or failed), leading the
    /// group commit when nobody else does. Must run on the thread that queued it.
    pub fn wait(&self, ticket: Ticket) -> Result<Receipt, AuditError> {
        let sh = &*self.shared;
        let Ticket {
            seq,
            hash,
            ts,
            waiter,
            named,
        } = ticket;
        let mut st = lock(&sh.state);
        waiter.waiting.store(true, Ordering::Relaxed);
        loop {
            match waiter.state.load(Ordering::Acquire) {
                DONE => {
                    return Ok(Receipt {
                        seq,
                        hash: hex::encode(hash),
                        ts,
                    });
                }
                FAILED => {
                    // Not in the log: the next record names those entries instead.
                    self.renote_durable_entries(named);
                    return Err(st.last_error.clone().unwrap_or(AuditError::Write {
                        kind: std::io::ErrorKind::Other,
                        message: "write failed".into(),
                    }));
                }
                _ => {}
            }
            if st.leader {
                // Parked, not waiting on `cv`: the leader unparks exactly the appenders
                // whose records it made durable, and the one that leads next, so a
                // finished batch wakes no one else. (Park tokens are sticky: an unpark
                // before this park is not lost; the timeout is only a safety net.)
                drop(st);
                std::thread::park_timeout(Duration::from_millis(100));
                st = lock(&sh.state);
            } else {
                st = sh.lead(st, Duty::default());
            }
        }
    }

    /// Whether a request of `session` may be served under the growth budgets (`[audit]
    /// max_bytes_per_minute`, `max_session_bytes_per_minute`): ask before any work. A
    /// refusal says whether it is its minute's first (record it; the rest are counted in
    /// a `growth-limit` record, appended here once their minute is over).
    pub fn admit(&self, session: &str) -> Result<(), Refusal> {
        let (verdict, due) = self.shared.growth.admit(session, Instant::now());
        self.append_due(due);
        verdict
    }

    /// Appends `growth-limit` records (lifecycle records: a failure is logged).
    fn append_due(&self, due: Vec<AuditEvent>) {
        for ev in due {
            if let Err(e) = self.append(ev) {
                tracing::error!("audit log: cannot record `growth-limit`: {e}");
            }
        }
    }

    /// [`ready_for_change`](Self::ready_for_change), and also failing when the last
    /// write failed (the next successful append clears that): the tests' view of a log
    /// in trouble.
    #[cfg(test)]
    pub(crate) fn preflight(&self) -> Result<(), AuditError> {
        let sh = &*self.shared;
        if sh.failing.load(Ordering::Acquire) {
            let st = lock(&sh.state);
            if st.closed {
                return Err(AuditError::Closed);
            }
            return Err(st.last_error.clone().unwrap_or(AuditError::Write {
                kind: std::io::ErrorKind::Other,
                message: "the last write failed".into(),
            }));
        }
        self.ready_for_change()
    }

    /// Cheap check before a request changes anything: fails when no disk space could be
    /// reserved ahead of the log, when checkpoints are failing, or when the log is
    /// closed. A gateway refuses mutating requests while this fails (fail closed). A
    /// failed last write does not refuse a change: the change's intent is appended
    /// first, which tries the log again, and a log that works again is used again at once.
    pub fn ready_for_change(&self) -> Result<(), AuditError> {
        let sh = &*self.shared;
        if sh.space_low.load(Ordering::Acquire) {
            return Err(AuditError::Write {
                kind: std::io::ErrorKind::StorageFull,
                message: "no disk space could be reserved for the audit log".into(),
            });
        }
        if sh.checkpoint_failing.load(Ordering::Acquire) {
            // Try again now (the directory was full or briefly not writable): changes
            // resume as soon as a checkpoint can be written, not at the next heartbeat.
            let retry = Duty {
                checkpoint: Some("retry"),
                sync: true,
                write_only: false,
            };
            if run_duty_on(sh, retry).is_err() || sh.checkpoint_failing.load(Ordering::Acquire) {
                return Err(AuditError::Checkpoint {
                    message: "the last checkpoint could not be written".into(),
                });
            }
        }
        if lock(&sh.state).closed {
            return Err(AuditError::Closed);
        }
        Ok(())
    }

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

    /// Writes a `stop` record and a `shutdown` checkpoint, syncs, and refuses further
    /// appends. Idempotent.
    pub fn close(&self) -> Result<(), AuditError> {
        self.close_with(Map::new())
    }

    /// [`close`](Self::close), with `details` (why it stops) in the `stop` record.
    pub fn close_with(&self, details: Map<String, Value>) -> Result<(), AuditError> {
        if lock(&self.shared.state).closed {
            return Ok(());
        }
        self.join_background_sync();
        self.join_start_checkpoint();
        self.stop_coalescing();
        self.append_due(self.shared.growth.drain());
        let stopped = self.append(AuditEvent::lifecycle(record::KIND_STOP, details));
        let duty = self.run_duty(Duty {
            checkpoint: Some("shutdown"),
            sync: true,
            write_only: false,
        });
        {
            let mut st = lock(&self.shared.state);
            st.closed = true;
            st.last_error = Some(AuditError::Closed);
        }
        self.stop_heartbeat();
        lock(&self.shared.io).release_reservation();
        let hooks = std::mem::take(&mut *lock(&self.shared.on_close));
        for hook in hooks {
            hook();
        }
        stopped.map(|_| ()).and(duty)
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

    /// Runs a leader turn for `duty` (waiting for any current leader first).
    fn run_duty(&self, duty: Duty) -> Result<(), AuditError> {
        run_duty_on(&self.shared, duty)
    }

    fn stop_heartbeat(&self) {
        self.join_background_sync();
        self.join_start_checkpoint();
        {
            let (beat, cv) = &*self.shared.beat;
            lock(beat).stopped = true;
            cv.notify_all();
        }
        if let Some(h) = lock(&self.shared.heartbeat_thread).take() {
            let _ = h.join();
        }
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

impl Shared {
    /// Tells the heartbeat thread that something may be due where nothing was.
    fn kick_heartbeat(&self) {
        let (beat, cv) = &*self.beat;
        lock(beat).kicked = true;
        cv.notify_one();
    }

    /// When the heartbeat has something to do next: a heartbeat checkpoint once records
    /// have waited `heartbeat` for one, a timed sync in `batch` mode. None: nothing.
    fn next_due(&self) -> Option<Instant> {
        let hb = {
            let st = lock(&self.state);
            match (self.heartbeat, st.uncovered_since) {
                (Some(hb), Some(since)) if !st.closed => Some(since + hb),
                _ => None,
            }
        };
        if self.mode != FsyncMode::Batch {
            return hb;
        }
        let sync = match self.io.try_lock() {
            Ok(io) => io.unsynced_since().map(|t| t + BATCH_SYNC_INTERVAL),
            // A leader is writing: look again after a batch interval.
            Err(_) => Some(Instant::now() + BATCH_SYNC_INTERVAL),
        };
        match (hb, sync) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The heartbeat's pace when what is due cannot be done at once.
    fn heartbeat_tick(&self) -> Duration {
        match (self.mode, self.heartbeat) {
            (FsyncMode::Batch, _) | (_, None) => BATCH_SYNC_INTERVAL,
            (_, Some(hb)) => (hb / 4).clamp(Duration::from_millis(50), Duration::from_secs(1)),
        }
    }

    /// Writes one batch (and syncs as the mode, or `sync`, requires); marks its records
    /// done or failed. Returns whether it failed. Called by the leader, without the state
    /// lock.
    /// `sync`: (sync even if the mode would not, write without syncing whatever the mode).
    fn write_batch(&self, io: &mut Io, batch: &Batch, sync: (bool, bool)) -> bool {
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

    /// One leader turn: write (and sync) the queue, then checkpoint if due. Called with
    /// the state lock held and `leader == false`; returns with it held again.
    fn lead<'a>(&'a self, mut st: MutexGuard<'a, State>, duty: Duty) -> MutexGuard<'a, State> {
        st.leader = true;
        drop(st);
        let mut io = lock(&self.io);
        let mut round = 0;
        let mut st = loop {
            round += 1;
            let mut st = lock(&self.state);
            let batch = std::mem::take(&mut st.queue);
            drop(st);
            let failed = self.write_batch(
                &mut io,
                &batch,
                (duty.sync && round == 1, duty.write_only && round == 1),
            );
            let st = lock(&self.state);
            // Keep leading while records wait (the disk stays busy and nobody has to be
            // woken to take over), but not for ever: this thread's own caller waits.
            if failed || st.queue.entries.is_empty() || round >= MAX_ROUNDS {
                break st;
            }
        };
        let due = self.checkpoint_due(&st, duty);
        let mut ckpt = None;
        // A checkpoint asked for by name (`start`, `retry`, `shutdown`...) is tried even
        // while the last write failed (a change waits for it, `ready_for_change`, before
        // its own append tries the log again), unless a sync failed: then what the file
        // holds may not be on disk, and only records written and synced anew tell.
        let failing = self.failing.load(Ordering::Acquire);
        if let Some(kind) = due
            && !st.ckpt_busy
            && (!failing || (duty.checkpoint.is_some() && !io.sync_failed))
        {
            // A checkpoint may only name records that are on disk.
            drop(st);
            let synced = io.sync();
            st = lock(&self.state);
            match synced {
                Ok(()) => {
                    st.ckpt_busy = true;
                    let tree = st.tree.clone().filter(|t| t.size() == st.durable_seq);
                    ckpt = Some((kind, st.durable_seq, st.durable_head, tree));
                }
                Err(e) => {
                    tracing::error!(log = %self.path.display(), error = %e, "audit sync before checkpoint failed");
                    self.checkpoint_failing.store(true, Ordering::Release);
                }
            }
        }
        drop(io);
        st.leader = false;
        // Hand over: the oldest queued appender that waits leads next; duty runners wait
        // on `cv`.
        if let Some(next) =
            (st.queue.entries.iter()).find(|e| e.waiter.waiting.load(Ordering::Relaxed))
        {
            next.waiter.thread.unpark();
        }
        if st.duty_waiters > 0 {
            self.cv.notify_all();
        }
        if let Some(ckpt) = ckpt {
            st = self.write_checkpoint(st, ckpt);
        }
        st
    }

    /// The checkpoint this turn owes: the one `duty` asks for, else a periodic one when
    /// `checkpoint_every` records have become durable since the last.
    fn checkpoint_due(&self, st: &State, duty: Duty) -> Option<&'static str> {
        match duty.checkpoint {
            Some(kind) => Some(kind),
            None if self.checkpoint_every > 0
                && st.durable_seq >= st.ckpt_seq + self.checkpoint_every =>
            {
                Some("periodic")
            }
            None => None,
        }
    }

    /// Writes a checkpoint (kind, seq, head, tree) without holding the state lock, then
    /// takes the lock again to note the result and wake the duty runners.
    fn write_checkpoint<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        (kind, seq, head, tree): PendingCheckpoint,
    ) -> MutexGuard<'a, State> {
        drop(st);
        let result = lock(&self.ckpt).write(&self.log_id, (seq, &head), tree.as_ref(), kind);
        let mut st = lock(&self.state);
        st.ckpt_busy = false;
        match result {
            Ok(()) => {
                st.ckpt_seq = st.ckpt_seq.max(seq);
                if st.durable_seq == seq {
                    st.uncovered_since = None;
                }
                self.checkpoint_failing.store(false, Ordering::Release);
            }
            Err(e) => {
                tracing::error!(log = %self.path.display(), error = %e, "audit checkpoint failed");
                self.checkpoint_failing.store(true, Ordering::Release);
            }
        }
        if st.duty_waiters > 0 {
            self.cv.notify_all();
        }
        st
    }

    /// Writes a batch's segments (rotating where a segment says), then syncs when
    /// asked: how many of its entries were written, and the first failure.
    fn write_segments(
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

impl State {
    /// The state of a log opened with `head` (seq and hash) as its last durable record,
    /// its active file `file_bytes` long, checkpointed up to `ckpt_seq`.
    fn resumed(
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
            sealed: false,
            duty_waiters: 0,
            tree,
            last_queued: None,
        }
    }
}

/// A checkpoint a leader is to write once the state lock is let go: its kind, the
/// seq and hash it covers, and the Merkle tree when it has that size.
type PendingCheckpoint = (&'static str, u64, [u8; 32], Option<CompactRange>);

/// The Merkle leaf hash of each of the first `done` records of a batch.
fn leaf_hashes(batch: &Batch, done: usize) -> Vec<merkle::Hash> {
    let mut start = 0;
    let mut out = Vec::with_capacity(done);
    for e in &batch.entries[..done] {
        let line = &batch.buf[start..e.end];
        out.push(merkle::leaf_hash(line.strip_suffix(b"\n").unwrap_or(line)));
        start = e.end;
    }
    out
}

/// Runs a leader turn for `duty` (waiting for any current leader first).
fn run_duty_on(sh: &Shared, duty: Duty) -> Result<(), AuditError> {
    let mut st = lock(&sh.state);
    // A checkpoint duty also waits for a checkpoint being written (heartbeat,
    // periodic) to finish, or the leader would skip its own.
    while st.leader || (duty.checkpoint.is_some() && st.ckpt_busy) {
        st.duty_waiters += 1;
        st = sh
            .cv
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.duty_waiters -= 1;
    }
    drop(sh.lead(st, duty));
    if duty.checkpoint.is_some() && sh.checkpoint_failing.load(Ordering::Acquire) {
        return Err(AuditError::Checkpoint {
            message: format!("see the log for {}", sh.path.display()),
        });
    }
    Ok(())
}

/// The heartbeat: timed syncs in `batch` mode, and a checkpoint once records have waited
/// `heartbeat` for one. It sleeps until the next of these is due, without end while none
/// is (a write that makes one due wakes it: an idle log costs no wake-up).
fn heartbeat_loop(weak: &Weak<Shared>, beat: &(Mutex<Beat>, Condvar)) {
    // After a turn, the next is no sooner than one `tick`: a checkpoint that keeps
    // failing, or a busy log, is tried again at that pace, and a deadline that passed
    // with nothing to do (none should) cannot make this thread spin.
    let mut not_before: Option<Instant> = None;
    loop {
        let (due, tick) = match weak.upgrade() {
            Some(sh) => (sh.next_due(), sh.heartbeat_tick()),
            None => return,
        };
        let due = match (due, not_before) {
            (Some(d), Some(n)) => Some(d.max(n)),
            (d, _) => d,
        };
        if !sleep_until(beat, due) {
            return;
        }
        let Some(sh) = weak.upgrade() else { return };
        run_due(&sh);
        not_before = Some(Instant::now() + tick);
    }
}

/// Waits until `due` (without end if None) or a kick; false once told to stop.
fn sleep_until(beat: &(Mutex<Beat>, Condvar), due: Option<Instant>) -> bool {
    let (flag, cv) = beat;
    let mut b = lock(flag);
    loop {
        if b.stopped {
            return false;
        }
        if std::mem::take(&mut b.kicked) {
            return true;
        }
        let Some(due) = due else {
            b = cv
                .wait(b)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            continue;
        };
        let now = Instant::now();
        if now >= due {
            return true;
        }
        b = cv
            .wait_timeout(b, due - now)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

/// Runs what is due now (a heartbeat checkpoint, a timed sync) unless the log is busy.
fn run_due(sh: &Shared) {
    let st = lock(&sh.state);
    if st.closed {
        return;
    }
    let hb_due = match (sh.heartbeat, st.uncovered_since) {
        (Some(hb), Some(since)) => since.elapsed() >= hb && st.durable_seq > st.ckpt_seq,
        _ => false,
    };
    let sync_due = sh.mode == FsyncMode::Batch && lock_free_unsynced(sh);
    if (hb_due || sync_due) && !st.leader && !st.ckpt_busy {
        drop(sh.lead(
            st,
            Duty {
                checkpoint: hb_due.then_some("heartbeat"),
                sync: true,
                write_only: false,
            },
        ));
    }
}

/// Whether the file has writes older than the batch interval that are not synced.
fn lock_free_unsynced(sh: &Shared) -> bool {
    sh.io
        .try_lock()
        .map(|io| io.unsynced_for() >= BATCH_SYNC_INTERVAL)
        .unwrap_or(false)
}

/// The `start` record's details: how the log was found (`check`, and what did not
/// verify), its format, this fsgate, how it syncs, whether it signs, why its
/// checkpoints carry no Merkle tree (warned of too), and the intents still open.
fn start_details(
    (check, problems): (&str, &[String]),
    settings: &AuditSettings,
    no_tree: Option<(&Path, &str)>,
    open_intents: &[Intent],
) -> Map<String, Value> {
    let mut details = Map::new();
    details.insert("check".into(), Value::String(check.to_owned()));
    details.insert("format".into(), json!(1));
    details.insert("fsgate".into(), json!(env!("CARGO_PKG_VERSION")));
    details.insert(
        "fsync".into(),
        json!(format!("{:?}", settings.fsync).to_lowercase()),
    );
    details.insert("pid".into(), json!(std::process::id()));
    details.insert("signed".into(), json!(settings.signing_key.is_some()));
    if !problems.is_empty() {
        details.insert("problems".into(), json!(problems));
    }
    if let Some((path, why)) = no_tree {
        tracing::warn!(log = %path.display(), "checkpoints carry no Merkle tree: {why}");
        details.insert("noTree".into(), Value::String(why.to_owned()));
    }
    if !open_intents.is_empty() {
        let carried: Vec<Value> = open_intents.iter().map(Intent::to_value).collect();
        details.insert("openIntents".into(), Value::Array(carried));
    }
    details
}
