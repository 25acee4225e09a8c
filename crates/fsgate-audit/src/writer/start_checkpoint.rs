//! The deferred `start` checkpoint ([`OpenOptions::defer_start_checkpoint`]): written on
//! a thread of its own once the log is quiet, so that its file sync, rename and
//! directory sync do not queue on the disk in front of the handshake's records (whose
//! answers wait for their syncs).
//!
//! [`OpenOptions::defer_start_checkpoint`]: super::OpenOptions::defer_start_checkpoint

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::AuditLog;
use super::background_sync::Flush;
use super::leader::run_duty_on;
use super::state::{Duty, Shared, lock};
use crate::error::AuditError;

/// The checkpoint waits until no record has been queued for this long...
const QUIET: Duration = Duration::from_millis(10);
/// ...but no longer than this after it was started.
const LATEST: Duration = Duration::from_secs(1);

impl AuditLog {
    /// Starts the thread that writes the deferred `start` checkpoint, if one is due; it
    /// first runs `flush`. Gives `flush` back when no such thread was started.
    pub(super) fn start_checkpoint_in_background(
        &self,
        flush: Option<Flush>,
    ) -> Result<Option<Flush>, AuditError> {
        if !self
            .shared
            .start_checkpoint_due
            .swap(false, Ordering::AcqRel)
        {
            return Ok(flush);
        }
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("fsgate-audit-start-checkpoint".into())
            .spawn(move || {
                if let Some(f) = flush {
                    f.run(&shared);
                }
                wait_until_quiet(&shared);
                let duty = Duty {
                    checkpoint: Some("start"),
                    sync: true,
                    write_only: false,
                };
                if let Err(e) = run_duty_on(&shared, duty) {
                    tracing::error!(log = %shared.path.display(), "audit start checkpoint: {e}");
                }
            })
            .map_err(|e| AuditError::io("start checkpoint thread for", &self.shared.path, &e))?;
        *lock(&self.shared.start_checkpoint_thread) = Some(handle);
        Ok(None)
    }

    /// Has the deferred `start` checkpoint written now and waits for it, so that no
    /// later checkpoint (the shutdown one) can be overtaken by it.
    pub(super) fn join_start_checkpoint(&self) {
        let Some(handle) = lock(&self.shared.start_checkpoint_thread).take() else {
            return;
        };
        let gate = &self.shared.start_gate;
        *lock(&gate.closing) = true;
        gate.cv.notify_all();
        let _ = handle.join();
    }
}

/// Returns once no record has been queued for [`QUIET`], [`LATEST`] after it was
/// called at the latest, or at once when the log is closing.
fn wait_until_quiet(sh: &Shared) {
    let latest = Instant::now() + LATEST;
    let gate = &sh.start_gate;
    let mut closing = lock(&gate.closing);
    loop {
        let last = lock(&sh.state).last_queued;
        let now = Instant::now();
        let due = last.map_or(now, |t| t + QUIET).min(latest);
        if *closing || now >= due {
            return;
        }
        closing = gate
            .cv
            .wait_timeout(closing, due - now)
            .map_or_else(|p| p.into_inner().0, |(g, _)| g);
    }
}
