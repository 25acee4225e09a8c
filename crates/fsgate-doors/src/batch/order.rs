//! The order of one connection's requests: the changes still running, and the batched
//! reads read after them, which wait until they are done.

use std::collections::BTreeSet;

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The order of one connection's requests: which changes, admitted when, are still
/// running.
#[derive(Default)]
pub(super) struct Order {
    pub(super) state: Mutex<OrderState>,
    pub(super) done: Condvar,
}

#[derive(Default)]
pub(super) struct OrderState {
    /// The last admission number given.
    pub(super) last: u64,
    /// Admission numbers of the changes still running.
    pub(super) running: BTreeSet<u64>,
    /// Threads in [`Order::wait_ready`]: a change that ends wakes someone only then (a
    /// wake-up with nobody waiting is still a syscall, on every change's path).
    pub(super) waiting: usize,
}

impl Order {
    pub(super) fn lock(&self) -> MutexGuard<'_, OrderState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next admission number; `running`: the request is a change and now runs.
    pub(super) fn admit(&self, running: bool) -> u64 {
        let mut st = self.lock();
        st.last += 1;
        let seq = st.last;
        if running {
            st.running.insert(seq);
        }
        seq
    }

    /// Whether every change admitted before `seq` is done.
    pub(super) fn ready(&self, seq: u64) -> bool {
        self.lock().running.first().is_none_or(|&first| first > seq)
    }

    pub(super) fn wait_ready(&self, seq: u64) {
        let mut st = self.lock();
        while st.running.first().is_some_and(|&first| first < seq) {
            st.waiting += 1;
            st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.waiting -= 1;
        }
    }
}

/// A change in flight: batched requests read after it wait until this is dropped (when
/// the change is done).
pub(crate) struct Change {
    pub(super) order: Arc<Order>,
    pub(super) seq: u64,
}

impl Drop for Change {
    fn drop(&mut self) {
        let mut st = self.order.lock();
        st.running.remove(&self.seq);
        if st.waiting > 0 {
            self.order.done.notify_all();
        }
    }
}
