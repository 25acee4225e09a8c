//! The gateway-wide bound on file content held in memory by requests in flight, and the
//! bound on each answer's encoded size.
//!
//! A read leases as many bytes as it will hold before it reads them; the lease travels
//! with the answer until the door has queued it for the client (where the connection's
//! own byte bound takes over), then it is returned. A read that does not fit waits for
//! leases to come back; one larger than the whole budget waits until nothing else is
//! leased, then proceeds alone, so nothing deadlocks and no request is refused for it.
//!
//! An answer that is collected piece by piece (grep, glob, ls) grows its lease as it
//! goes ([`Lease::grow`]). A lease that grows while holding bytes could wait forever on
//! others doing the same, so the oldest lease alive never waits: it may pass the budget
//! by what it needs (at most one answer's worth), finishes, and the next oldest goes on.

use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex};

thread_local! {
    /// Inside [`unwaiting`] on this thread: whether a lease went past the budget.
    static UNWAITING: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Runs `f` with the leases it takes (or grows) on this thread never waiting for room;
/// also says whether one went past the budget. For a batch that holds the leases of
/// answers it has not handed over yet: waiting, it could wait for itself. A lease that
/// does not fit passes the budget instead (by at most one answer, like the oldest lease),
/// and the batch must hand over what it holds before it runs anything else.
pub fn unwaiting<R>(f: impl FnOnce() -> R) -> (R, bool) {
    let outer = UNWAITING.with(|u| u.replace(Some(false)));
    let result = f();
    let overdrawn = UNWAITING.with(|u| u.replace(outer)) == Some(true);
    (result, overdrawn)
}

/// True (and noted) if this thread may not wait: the lease goes past the budget.
fn overdraw_instead() -> bool {
    UNWAITING.with(|u| match u.get() {
        Some(_) => {
            u.set(Some(true));
            true
        }
        None => false,
    })
}

/// Bytes of content that may be held at once, shared by every door and connection.
pub struct Budget {
    /// The total.
    cap: u64,
    /// Leased now, and the tickets of the leases alive.
    used: Mutex<State>,
    /// Signalled when a lease comes back.
    freed: Condvar,
}

/// What the budget's lock guards.
#[derive(Default)]
struct State {
    /// Bytes leased now.
    used: u64,
    /// Tickets of the leases alive: the smallest is the oldest, which never waits.
    alive: std::collections::BTreeSet<u64>,
    /// The next ticket.
    next: u64,
}

/// Bytes of the budget held until dropped.
pub struct Lease {
    budget: Arc<Budget>,
    bytes: u64,
    ticket: u64,
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
            used: Mutex::new(State::default()),
            freed: Condvar::new(),
        })
    }

    /// Leases `bytes` (at most the whole budget), waiting while they do not fit. Blocks:
    /// call it on a blocking thread.
    pub fn lease(self: &Arc<Budget>, bytes: u64) -> Lease {
        let want = bytes.min(self.cap);
        let mut st = self.lock();
        while st.used > 0 && st.used + want > self.cap {
            if overdraw_instead() {
                break;
            }
            st = self
                .freed
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        st.used += want;
        let ticket = st.next;
        st.next += 1;
        st.alive.insert(ticket);
        Lease {
            budget: Arc::clone(self),
            bytes: want,
            ticket,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes leased now.
    #[cfg(test)]
    pub fn in_use(&self) -> u64 {
        self.lock().used
    }
}

impl Lease {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `bytes` in all (more or fewer than now). Growing waits while the budget
    /// has no room, unless this is the oldest lease alive (see the module doc). Blocks:
    /// call it on a blocking thread.
    pub fn resize(&mut self, bytes: u64) {
        let budget = Arc::clone(&self.budget);
        let mut st = budget.lock();
        if bytes > self.bytes {
            let more = bytes - self.bytes;
            while st.used + more > budget.cap && st.alive.first() != Some(&self.ticket) {
                if overdraw_instead() {
                    break;
                }
                st = budget
                    .freed
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            st.used += more;
        } else {
            st.used = st.used.saturating_sub(self.bytes - bytes);
            budget.freed.notify_all();
        }
        self.bytes = bytes;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut st = self.budget.lock();
        st.used = st.used.saturating_sub(self.bytes);
        st.alive.remove(&self.ticket);
        // Also wakes a grower that has just become the oldest.
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

    #[test]
    fn growing_leases_never_deadlock_the_oldest_goes_past_the_budget() {
        let b = Budget::new(10);
        let mut old = b.lease(6);
        let mut young = b.lease(4);
        // The younger cannot grow while the budget is full: it waits.
        let b2 = Arc::clone(&b);
        let grower = std::thread::spawn(move || {
            young.resize(8);
            let held = b2.in_use();
            drop(young);
            held
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(b.in_use(), 10, "the younger lease must wait");
        // The oldest grows at once, past the budget, and its end lets the younger on.
        old.resize(9);
        assert_eq!(b.in_use(), 13);
        drop(old);
        assert_eq!(grower.join().unwrap(), 8);
        assert_eq!(b.in_use(), 0);
    }
}
