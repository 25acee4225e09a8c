//! The gate before a change ([`AuditLog::ready_for_change`]) and closing the log
//! (the `stop` record, the `shutdown` checkpoint, the close hooks).

use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::AuditLog;
use super::leader::run_duty_on;
use super::state::{Duty, lock};
use crate::error::AuditError;
use crate::record::{self, AuditEvent};

impl AuditLog {
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
        let st = lock(&sh.state);
        if st.closed {
            return Err(AuditError::Closed);
        }
        if st.broken {
            return Err(st.last_error.clone().unwrap_or(AuditError::Closed));
        }
        Ok(())
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
}
