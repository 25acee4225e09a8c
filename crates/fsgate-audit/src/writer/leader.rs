//! A leader's turn: it writes everything queued (up to [`MAX_ROUNDS`] batches), then
//! the checkpoint due, outside the state lock, and hands over to the next waiting
//! appender or duty runner.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use super::AuditLog;
use super::queue::{Batch, PENDING};
use super::state::{Duty, Shared, State, lock};
use crate::error::AuditError;
use crate::merkle::CompactRange;

/// At most this many batches are written by one leader before it hands over.
pub(super) const MAX_ROUNDS: u32 = 8;

impl AuditLog {
    /// Runs a leader turn for `duty` (waiting for any current leader first).
    pub(super) fn run_duty(&self, duty: Duty) -> Result<(), AuditError> {
        run_duty_on(&self.shared, duty)
    }
}

impl Shared {
    /// One leader turn: write (and sync) the queue, then checkpoint if due. Called with
    /// the state lock held and `leader == false`; returns with it held again.
    pub(super) fn lead<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        duty: Duty,
    ) -> MutexGuard<'a, State> {
        st.leader = true;
        drop(st);
        // Declared before `io`, so that an unwinding turn lets go of the files first.
        let mut turn = Turn {
            shared: self,
            batch: Batch::default(),
            over: false,
        };
        let mut io = lock(&self.io);
        let mut round = 0;
        let mut st = loop {
            round += 1;
            let mut st = lock(&self.state);
            turn.batch = std::mem::take(&mut st.queue);
            drop(st);
            let failed = self.write_batch(
                &mut io,
                &turn.batch,
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
        turn.over = true;
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
    pub(super) fn checkpoint_due(&self, st: &State, duty: Duty) -> Option<&'static str> {
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
    pub(super) fn write_checkpoint<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        (kind, seq, head, tree): PendingCheckpoint,
    ) -> MutexGuard<'a, State> {
        drop(st);
        let unwinding = CheckpointTurn(self);
        let result = lock(&self.ckpt).write(&self.log_id, (seq, &head), tree.as_ref(), kind);
        std::mem::forget(unwinding);
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
}

/// A leader's turn, stepped down if it unwinds (a defect panicked in it): otherwise
/// `leader` would stay set and every appender would wait for it for ever.
struct Turn<'a> {
    shared: &'a Shared,
    /// The batch being written (its appenders wait for it).
    batch: Batch,
    /// The turn ended normally.
    over: bool,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.over {
            self.shared.abandon_turn(&self.batch);
        }
    }
}

impl Shared {
    /// Ends a turn that unwound: what it was writing and everything queued fails, and
    /// the log takes no more records (fail closed): the turn may have written records
    /// it did not count yet, so a later record could reuse their seqs. A restart's
    /// recovery settles the file. The next appender or duty runner is let go.
    fn abandon_turn(&self, batch: &Batch) {
        let mut st = lock(&self.state);
        tracing::error!(log = %self.path.display(), "audit writer failed unexpectedly; nothing more is recorded and every request is refused until fsgate restarts");
        st.last_error = Some(AuditError::Write {
            kind: std::io::ErrorKind::Other,
            message: "the audit writer failed unexpectedly; restart fsgate".into(),
        });
        st.broken = true;
        let queued = std::mem::take(&mut st.queue);
        st.leader = false;
        self.failing.store(true, Ordering::Release);
        if st.duty_waiters > 0 {
            self.cv.notify_all();
        }
        drop(st);
        for e in batch.entries.iter().chain(&queued.entries) {
            if e.waiter.state.load(Ordering::Acquire) == PENDING {
                e.waiter.finish(super::queue::FAILED);
            }
        }
    }
}

/// A checkpoint being written, let go if its writing unwinds (a defect): otherwise
/// `ckpt_busy` would stay set and every checkpoint duty (close's `shutdown`) would wait
/// for it for ever. Forgotten when the writing returns.
struct CheckpointTurn<'a>(&'a Shared);

impl Drop for CheckpointTurn<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.0.state);
        st.ckpt_busy = false;
        self.0.checkpoint_failing.store(true, Ordering::Release);
        self.0.cv.notify_all();
    }
}

/// A checkpoint a leader is to write once the state lock is let go: its kind, the
/// seq and hash it covers, and the Merkle tree when it has that size.
pub(super) type PendingCheckpoint = (&'static str, u64, [u8; 32], Option<CompactRange>);

/// Runs a leader turn for `duty` (waiting for any current leader first).
pub(super) fn run_duty_on(sh: &Shared, duty: Duty) -> Result<(), AuditError> {
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
