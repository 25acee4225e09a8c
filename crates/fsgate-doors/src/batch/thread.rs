//! The batch thread: started by the first request, it takes what waits, runs it as one
//! batch, and again; it ends after its keep-alive without a request, or once its door
//! is gone and all is answered.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::batched::Batched;
use super::order::Order;
use super::run::run_waiting;

/// Requests one batch takes at most: the batch's answers wait for its slowest request.
pub(super) const MAX_BATCH: usize = 64;

/// Starts the batch thread if none runs.
pub(super) trait Kick: Send + Sync {
    fn kick(&self);
}

/// A door's queue and what its thread needs. Dropped (which completes `ended`) once the
/// door is gone and no thread runs; `door` is dropped before that.
pub(super) struct Queue<B: Batched> {
    pub(super) door: Arc<B>,
    pub(super) order: Arc<Order>,
    /// Only the thread takes from it.
    pub(super) jobs: Mutex<mpsc::Receiver<(u64, B::Job)>>,
    /// A thread runs (or is starting) and will see every job queued before it clears this.
    pub(super) running: AtomicBool,
    /// Whose blocking pool runs the queue if no thread can be started.
    pub(super) rt: Option<tokio::runtime::Handle>,
    pub(super) name: String,
    pub(super) me: Weak<Queue<B>>,
    /// How long the thread waits for a request before it ends ([`super::KEEP_ALIVE`]).
    pub(super) keep_alive: Duration,
    /// Declared last: completes after the other fields are dropped.
    pub(super) _ended: Ended,
}

/// Completes the `ended` receiver when dropped.
pub(super) struct Ended(pub(super) Option<oneshot::Sender<()>>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl<B: Batched> Kick for Queue<B> {
    fn kick(&self) {
        // Pairs with the fence in `work`: either the thread sees this job, or this sees
        // `running` cleared and starts one.
        fence(Ordering::SeqCst);
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(queue) = self.me.upgrade() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || queue.work());
        if let Err(e) = spawned {
            // Nothing else would take the queued jobs: run them on the blocking pool.
            tracing::warn!("cannot start the batch thread, using the blocking pool: {e}");
            if let (Some(queue), Some(rt)) = (self.me.upgrade(), &self.rt) {
                rt.spawn_blocking(move || queue.work());
            }
        }
    }
}

/// Waits up to `within` for the next job (None: none came, or the door is gone),
/// parked: no runtime timer, which a runtime shutting down would no longer serve.
pub(super) fn recv_within<T>(jobs: &mut mpsc::Receiver<T>, within: Duration) -> Option<T> {
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let deadline = Instant::now() + within;
    loop {
        if let std::task::Poll::Ready(job) = jobs.poll_recv(&mut cx) {
            return job;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::park_timeout(left);
    }
}

/// Wakes the thread parked in [`recv_within`].
pub(super) struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl<B: Batched> Queue<B> {
    /// The thread: takes what waits, runs it as one batch, and again; ends after
    /// its keep-alive without a job, or once the door is dropped and all is answered.
    pub(super) fn work(&self) {
        let mut waiting = VecDeque::new();
        loop {
            let more = {
                let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
                self.take(&mut jobs, &mut waiting)
            };
            if more {
                run_waiting(&*self.door, &self.order, &mut waiting);
                continue;
            }
            self.running.store(false, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            // A job queued before `running` was cleared saw it set and left it to us.
            let queued = !self
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty();
            if !queued || self.running.swap(true, Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Moves up to [`MAX_BATCH`] jobs into `waiting`, waiting up to its keep-alive for
    /// the first; false if none came.
    pub(super) fn take(
        &self,
        jobs: &mut mpsc::Receiver<(u64, B::Job)>,
        waiting: &mut VecDeque<(u64, B::Job)>,
    ) -> bool {
        if waiting.is_empty() {
            let first = match jobs.try_recv() {
                Ok(job) => Some(job),
                Err(mpsc::error::TryRecvError::Disconnected) => None,
                Err(mpsc::error::TryRecvError::Empty) => recv_within(jobs, self.keep_alive),
            };
            match first {
                Some(job) => waiting.push_back(job),
                None => return false,
            }
        }
        while waiting.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        true
    }
}
