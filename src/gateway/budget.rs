//! The gateway-wide bound on file content held in memory by requests in flight, and the
//! bound on each answer's encoded size.
//!
//! A read leases as many bytes as it will hold before it reads them; the lease travels
//! with the answer until the door has queued it for the client (where the connection's
//! own byte bound takes over), then it is returned. A read that does not fit waits for
//! leases to come back; one larger than the whole budget waits until nothing else is
//! leased, then proceeds alone, so nothing deadlocks and no request is refused for it.

use std::sync::{Arc, Condvar, Mutex};

/// Bytes of content that may be held at once, shared by every door and connection.
pub struct Budget {
    /// The total.
    cap: u64,
    /// Leased now.
    used: Mutex<u64>,
    /// Signalled when a lease comes back.
    freed: Condvar,
}

/// Bytes of the budget held until dropped.
pub struct Lease {
    budget: Arc<Budget>,
    bytes: u64,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({} bytes)", self.bytes)
    }
}

impl Budget {
    /// A budget of `cap` bytes.
    pub fn new(cap: u64) -> Arc<Budget> {
        Arc::new(Budget {
            cap: cap.max(1),
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Leases `bytes` (at most the whole budget), waiting while they do not fit. Blocks:
    /// call it on a blocking thread.
    pub fn lease(self: &Arc<Budget>, bytes: u64) -> Lease {
        let want = bytes.min(self.cap);
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *used > 0 && *used + want > self.cap {
            used = self
                .freed
                .wait(used)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *used += want;
        Lease {
            budget: Arc::clone(self),
            bytes: want,
        }
    }

    /// Bytes leased now.
    #[cfg(test)]
    pub fn in_use(&self) -> u64 {
        *self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut used = self
            .budget
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *used = used.saturating_sub(self.bytes);
        self.budget.freed.notify_all();
    }
}

pub use crate::workspace::json_string_len;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_length_is_exact() {
        for s in [
            "",
            "plain",
            "q\"b\\",
            "\n\t\u{1}\u{1f}é\u{2028}",
            "\u{0}\u{7f}",
        ] {
            let encoded = serde_json::to_string(s).unwrap();
            assert_eq!(json_string_len(s), encoded.len() as u64, "{s:?}");
        }
    }

    #[test]
    fn leases_wait_for_room_and_an_oversized_one_goes_alone() {
        let b = Budget::new(10);
        let a = b.lease(6);
        let b2 = Arc::clone(&b);
        let waiter = std::thread::spawn(move || {
            let l = b2.lease(6);
            b2.in_use() + l.bytes - l.bytes
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(b.in_use(), 6, "the second lease must wait");
        drop(a);
        assert_eq!(waiter.join().unwrap(), 6);
        // Larger than the whole budget: capped, alone.
        let big = b.lease(1000);
        assert_eq!(b.in_use(), 10);
        drop(big);
        assert_eq!(b.in_use(), 0);
    }
}
