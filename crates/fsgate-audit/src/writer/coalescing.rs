//! The writer's side of coalesced reads (`crate::coalesce`): holding an allowed
//! read, appending a process's held reads before its next record of another kind, the
//! thread that appends the groups that are due, and the last groups before `stop`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::state::{Shared, lock};
use super::{AuditLog, Ticket};
use crate::coalesce::{Added, Coalescer};
use crate::error::AuditError;
use crate::record::{self, AuditEvent};

impl AuditLog {
    /// Records an allowed read that a caller does not wait for (a process's lookup,
    /// listing or open under `fsgate run`): held with the same process's other reads
    /// and written within a second as one `reads` record naming each path and its
    /// count (audit/FORMAT.md section 2). Anything else (a refusal, a change, an
    /// error) is queued as [`append_deferred`](Self::append_deferred) does, after the
    /// reads its process made before it, and its ticket handed back.
    pub fn append_coalesced(&self, ev: &AuditEvent) -> Result<Option<Ticket>, AuditError> {
        let policy = match &ev.policy_sha256 {
            Some(p) => Arc::clone(p),
            None => self
                .shared
                .policy
                .read()
                .map(|p| Arc::clone(&p))
                .unwrap_or_else(|p| Arc::clone(&p.into_inner())),
        };
        match self.shared.coalescer.add(ev, policy) {
            Added::NotMine => self.append_deferred(ev).map(Some),
            Added::Held(now) => {
                self.start_coalescing();
                // The thread is behind: queued here, written with the next record.
                self.queue_all(&now);
                Ok(None)
            }
        }
    }

    /// Queues the reads held for `ev`'s process, so they come before `ev` in the log.
    pub(super) fn queue_held_reads_of(&self, ev: &AuditEvent) {
        if ev.peer.is_empty()
            || !matches!(ev.kind.as_str(), record::KIND_REQUEST | record::KIND_INTENT)
        {
            return;
        }
        let held = self.shared.coalescer.take_for(&ev.session, &ev.peer);
        self.queue_all(&held);
    }

    fn queue_all(&self, events: &[AuditEvent]) {
        for ev in events {
            if let Err(e) = self.queue(ev) {
                tracing::error!("audit log: cannot record a process's reads: {e}");
            }
        }
    }

    /// Starts the thread that appends groups once due (each at most a second old).
    fn start_coalescing(&self) {
        let sh = &self.shared;
        if sh.coalescing.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(sh);
        let coalescer = Arc::clone(&sh.coalescer);
        let spawned = std::thread::Builder::new()
            .name("fsgate-audit-reads".into())
            .spawn(move || coalesce_loop(&weak, &coalescer));
        match spawned {
            Ok(h) => *lock(&sh.coalesce_thread) = Some(h),
            Err(e) => {
                // Nothing would write the held groups on time: write them now, and
                // hold nothing from now on.
                tracing::error!("audit log: cannot start the reads thread: {e}");
                let held = sh.coalescer.stop();
                self.append_all(&held);
            }
        }
    }

    /// Stops holding reads and appends every group held, waiting for them (before the
    /// `stop` record, or as the log is dropped).
    pub(super) fn stop_coalescing(&self) {
        let held = self.shared.coalescer.stop();
        if let Some(h) = lock(&self.shared.coalesce_thread).take() {
            let _ = h.join();
        }
        self.append_all(&held);
    }

    fn append_all(&self, events: &[AuditEvent]) {
        let tickets: Vec<Ticket> = events.iter().filter_map(|ev| self.queue(ev).ok()).collect();
        for t in tickets {
            if let Err(e) = self.wait(t) {
                tracing::error!("audit log: cannot record a process's reads: {e}");
            }
        }
    }
}

/// Appends each group once due, until the log stops holding reads or is gone.
fn coalesce_loop(weak: &Weak<Shared>, coalescer: &Coalescer) {
    while let Some(due) = coalescer.due() {
        let Some(shared) = weak.upgrade() else { return };
        let log = AuditLog {
            shared,
            owner: false,
        };
        log.append_all(&due);
    }
}
