//! The heartbeat thread: timed syncs in `batch` mode and idle checkpoints, sleeping
//! until the next thing due and without end while nothing is.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::AuditLog;
use super::state::{Beat, Duty, Shared, lock};
use crate::config::{BATCH_SYNC_INTERVAL, FsyncMode};
use crate::error::AuditError;

impl AuditLog {
    /// The heartbeat's half of [`start`](Self::start).
    pub(super) fn start_heartbeat(&self) -> Result<(), AuditError> {
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

    pub(super) fn stop_heartbeat(&self) {
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

impl Shared {
    /// Tells the heartbeat thread that something may be due where nothing was.
    pub(super) fn kick_heartbeat(&self) {
        let (beat, cv) = &*self.beat;
        lock(beat).kicked = true;
        cv.notify_one();
    }

    /// When the heartbeat has something to do next: a heartbeat checkpoint once records
    /// have waited `heartbeat` for one, a timed sync in `batch` mode. None: nothing.
    pub(super) fn next_due(&self) -> Option<Instant> {
        let hb = {
            let st = lock(&self.state);
            match (self.heartbeat, st.uncovered_since) {
                // A heartbeat too far off to name as an instant is never due.
                (Some(hb), Some(since)) if !st.closed => since.checked_add(hb),
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
    pub(super) fn heartbeat_tick(&self) -> Duration {
        match (self.mode, self.heartbeat) {
            (FsyncMode::Batch, _) | (_, None) => BATCH_SYNC_INTERVAL,
            (_, Some(hb)) => (hb / 4).clamp(Duration::from_millis(50), Duration::from_secs(1)),
        }
    }
}

/// The heartbeat: timed syncs in `batch` mode, and a checkpoint once records have waited
/// `heartbeat` for one. It sleeps until the next of these is due, without end while none
/// is (a write that makes one due wakes it: an idle log costs no wake-up).
pub(super) fn heartbeat_loop(weak: &Weak<Shared>, beat: &(Mutex<Beat>, Condvar)) {
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
pub(super) fn sleep_until(beat: &(Mutex<Beat>, Condvar), due: Option<Instant>) -> bool {
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
pub(super) fn run_due(sh: &Shared) {
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
pub(super) fn lock_free_unsynced(sh: &Shared) -> bool {
    sh.io
        .try_lock()
        .map(|io| io.unsynced_for() >= BATCH_SYNC_INTERVAL)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use crate::config::{AuditSettings, FsyncMode};
    use crate::tests::{open, request, settings, temp_log};

    /// A heartbeat too far off to name as an instant (the policy's `heartbeat_secs` has
    /// no upper bound) is never due: the heartbeat thread used to panic on the addition.
    #[test]
    fn a_heartbeat_beyond_any_instant_is_never_due() {
        let (_d, path) = temp_log();
        let s = AuditSettings {
            heartbeat_secs: Some(i64::MAX as u64),
            ..settings(FsyncMode::Always)
        };
        let log = open(&path, &s);
        log.append(request(1)).unwrap();
        assert_eq!(log.shared.next_due(), None);
        log.close().unwrap();
    }
}
