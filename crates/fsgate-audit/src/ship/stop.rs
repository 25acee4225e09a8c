//! Telling the shipping threads to finish, and by when: they drain what is left until
//! the deadline, then end.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a stopping shipper looks whether its last sends were acknowledged.
const DRAIN_POLL: Duration = Duration::from_millis(5);

/// Tells the shipping threads to finish (and by when).
#[derive(Debug, Default)]
pub(super) struct Stop {
    /// Set once: ship what is left until this instant, then end.
    deadline: Mutex<Option<Instant>>,
    /// Wakes sleeping threads.
    cv: Condvar,
}

impl Stop {
    /// Asks the threads to drain until `deadline` and end.
    pub(super) fn request(&self, deadline: Instant) {
        *self.lock() = Some(deadline);
        self.cv.notify_all();
    }

    /// The drain deadline, once stopping.
    pub(super) fn deadline(&self) -> Option<Instant> {
        *self.lock()
    }

    /// Sleeps for `d`, or until asked to stop; once stopping, a few milliseconds.
    pub(super) fn sleep(&self, d: Duration) {
        let guard = self.lock();
        let d = if guard.is_some() {
            d.min(DRAIN_POLL)
        } else {
            d
        };
        let _ = self.cv.wait_timeout(guard, d);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
