//! Appending: a record chained and queued ([`Ticket`]), then waited for (leading the
//! group commit when nobody else does); the intents whose entries became durable, named
//! by the next record; the growth budgets asked before any work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::queue::{DONE, Entry, FAILED, PENDING, Waiter};
use super::state::{Duty, lock};
use super::{AuditLog, Ticket};
use crate::canonical;
use crate::error::AuditError;
use crate::growth::Refusal;
use crate::record::{self, AuditEvent, Receipt};

impl AuditLog {
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
    pub(super) fn queue(&self, ev: &AuditEvent) -> Result<Ticket, AuditError> {
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
        if st.broken {
            let e = st.last_error.clone();
            drop(st);
            self.renote_durable_entries(named);
            return Err(e.unwrap_or(AuditError::Closed));
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
    pub(super) fn name_durable_entries(&self, ev: &AuditEvent) -> (Vec<u64>, Option<AuditEvent>) {
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
    pub(super) fn renote_durable_entries(&self, seqs: Vec<u64>) {
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
    pub(super) fn append_due(&self, due: Vec<AuditEvent>) {
        for ev in due {
            if let Err(e) = self.append(ev) {
                tracing::error!("audit log: cannot record `growth-limit`: {e}");
            }
        }
    }
}
