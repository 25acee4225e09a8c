//! Helper threads for a walk or a grep, counted across every one at once: a walk or a
//! grep takes what is free, up to one less than the cores, and gives it back when done.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Helper threads searching for some grep now, across every grep.
pub(super) static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// One less than the cores this process may run on.
pub(super) fn helper_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
    })
}

/// Helper threads one grep may start, held until it ends.
pub(super) struct Permits(pub(super) usize);

impl Permits {
    /// As many as are free, up to one less than the cores (none: the grep runs alone).
    pub(super) fn take() -> Permits {
        let limit = helper_limit();
        let mut cur = HELPERS.load(Ordering::Relaxed);
        loop {
            let n = limit.saturating_sub(cur);
            if n == 0 {
                return Permits(0);
            }
            match HELPERS.compare_exchange_weak(cur, cur + n, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Permits(n),
                Err(now) => cur = now,
            }
        }
    }

    /// How many were taken.
    pub(super) fn count(&self) -> usize {
        self.0
    }

    /// Exactly `n`, whatever the others hold (tests: the threaded path on any machine).
    #[cfg(test)]
    pub(super) fn forced(n: usize) -> Permits {
        HELPERS.fetch_add(n, Ordering::AcqRel);
        Permits(n)
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        HELPERS.fetch_sub(self.0, Ordering::AcqRel);
    }
}
