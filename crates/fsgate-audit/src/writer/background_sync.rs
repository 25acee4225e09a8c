//! Records written and synced by one of the log's own threads while the appender goes
//! on ([`AuditLog::start_with`]): the gateway's `start` record, whose sync would
//! otherwise hold up the rest of start-up (the runtime, reading and checking the first
//! request) for the disk's time.
//!
//! No answer can overtake such a record: a later record is queued behind it, and at
//! `fsync = "always"` is answered only once a sync that began after this one's write
//! has ended.
//!
//! The same thread then starts the heartbeat thread, which the appender would otherwise
//! start itself: making a thread is a tenth of a millisecond or more of start-up. (A
//! thread made by a confined thread is confined as it is.)

use std::sync::Arc;

use super::leader::run_duty_on;
use super::state::{Duty, Shared, lock};
use super::{AuditLog, Ticket};
use crate::error::AuditError;
use crate::record::AuditEvent;

/// A queued record that a thread of the log writes and syncs, and whose failure it logs.
pub(super) struct Flush {
    ticket: Ticket,
    kind: String,
}

impl Flush {
    /// Leads the queue (this record in it) once no one else does, then starts the
    /// heartbeat; after that the record's outcome is known, so the wait below returns at
    /// once.
    pub(super) fn run(self, shared: &Arc<Shared>) {
        let _ = run_duty_on(shared, Duty::default());
        let log = AuditLog {
            shared: Arc::clone(shared),
            owner: false,
        };
        if let Err(e) = log.start_heartbeat() {
            tracing::error!("audit log: {e}");
        }
        if let Err(e) = log.wait(self.ticket) {
            tracing::error!("audit log: cannot record `{}`: {e}", self.kind);
        }
    }
}

impl AuditLog {
    /// Queues `ev` (its place in the chain fixed before any record appended later) and
    /// starts the log's threads as [`start`](Self::start) does; the first of them
    /// writes and syncs `ev` at once, as `[audit] fsync` requires, then starts the
    /// heartbeat thread, while this returns. A failure is logged (and, as for any
    /// failed write, refuses the records queued behind it). When no thread can be
    /// started, `ev` is written here and now.
    pub fn start_with(&self, ev: &AuditEvent) -> Result<(), AuditError> {
        let ticket = match self.append_deferred(ev) {
            Ok(t) => t,
            Err(e) => {
                self.start()?;
                return Err(e);
            }
        };
        let flush = Flush {
            ticket,
            kind: ev.kind.clone(),
        };
        let started = match self.start_checkpoint_in_background(Some(flush)) {
            Ok(Some(unflushed)) => self.flush_on_a_thread(unflushed),
            Ok(None) => Ok(()),
            Err(e) => {
                self.flush_here();
                return Err(e);
            }
        };
        // A thread just made often waits on this one's CPU until this one blocks, which
        // at start-up is once the first request is read: up to 1.8 ms in traces, all of
        // it before the disk is even asked. Yielding lets it start its sync first (it
        // then waits on the disk); with a CPU of its own it has, and this returns at once.
        std::thread::yield_now();
        started
    }

    /// Has a thread of its own write and sync `flush`'s record (and start the
    /// heartbeat); with no thread to be had, both are done here.
    fn flush_on_a_thread(&self, flush: Flush) -> Result<(), AuditError> {
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("fsgate-audit-sync".into())
            .spawn(move || flush.run(&shared));
        match spawned {
            Ok(h) => {
                *lock(&self.shared.background_sync_thread) = Some(h);
                Ok(())
            }
            Err(_) => {
                self.flush_here();
                self.start_heartbeat()
            }
        }
    }

    /// Writes the queue on this thread: the record of a [`Flush`] whose thread could not
    /// be started went with it, and is in the queue still.
    fn flush_here(&self) {
        if let Err(e) = run_duty_on(&self.shared, Duty::default()) {
            tracing::error!("audit log: {e}");
        }
    }

    /// Waits for the thread of [`flush_on_a_thread`](Self::flush_on_a_thread), if any.
    pub(super) fn join_background_sync(&self) {
        if let Some(h) = lock(&self.shared.background_sync_thread).take() {
            let _ = h.join();
        }
    }
}
