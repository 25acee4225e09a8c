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
//!
//! A request that runs several operations (a door's task) keeps each one's lease with
//! its answer: its further leases pass the budget rather than wait for its own
//! (`How::further`), and the door bounds what it keeps by its answer's limit.

use std::sync::{Arc, Condvar, Mutex};

/// Whether a lease that does not fit waits for room or passes the budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Waits while the budget has no room (every request alone).
    #[default]
    Wait,
    /// Passes the budget instead, by at most one answer (like the oldest lease), and
    /// says so ([`Lease::overdrew`]). For a batch that holds the leases of answers it has
    /// not handed over yet: waiting, it could wait for itself. It must then hand over what
    /// it holds before it runs anything else.
    Overdraw,
}

/// Bytes of content that may be held at once, shared by every door and connection.
pub(crate) struct Budget {
    /// The total.
    cap: u64,
    /// Leased now, and the tickets of the leases alive.
    used: Mutex<State>,
    /// Signalled when a lease comes back, if anyone waits (see `State::waiting`).
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
    /// Threads waiting on `freed`: a lease given back wakes nobody (no futex call)
    /// when this is zero, which it nearly always is.
    waiting: usize,
}

/// Waits once on `freed`, counted in `waiting`.
fn wait_freed<'a>(
    mut st: std::sync::MutexGuard<'a, State>,
    freed: &Condvar,
) -> std::sync::MutexGuard<'a, State> {
    st.waiting += 1;
    let mut st = freed
        .wait(st)
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    st.waiting -= 1;
    st
}

/// Bytes of the budget held until dropped.
pub struct Lease {
    budget: Arc<Budget>,
    bytes: u64,
    ticket: u64,
    /// What it does when it does not fit.
    waiting: Waiting,
    /// It went past the budget instead of waiting.
    overdrew: bool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({} bytes)", self.bytes)
    }
}

impl Budget {
    /// A budget of `cap` bytes.
    pub(crate) fn new(cap: u64) -> Arc<Budget> {
        Arc::new(Budget {
            cap: cap.max(1),
            used: Mutex::new(State::default()),
            freed: Condvar::new(),
        })
    }

    /// Leases `bytes` (at most the whole budget), waiting while they do not fit. Blocks:
    /// call it on a blocking thread.
    #[cfg(test)]
    pub(crate) fn lease(self: &Arc<Budget>, bytes: u64) -> Lease {
        self.lease_as(bytes, Waiting::Wait)
    }

    /// Leases `bytes` (at most the whole budget); while they do not fit, waits or passes
    /// the budget as `waiting` says. Blocks: call it on a blocking thread.
    pub(crate) fn lease_as(self: &Arc<Budget>, bytes: u64, waiting: Waiting) -> Lease {
        let want = bytes.min(self.cap);
        let mut st = self.lock();
        let mut overdrew = false;
        while st.used > 0 && st.used + want > self.cap {
            if waiting == Waiting::Overdraw {
                overdrew = true;
                break;
            }
            st = wait_freed(st, &self.freed);
        }
        st.used += want;
        let ticket = st.next;
        st.next += 1;
        st.alive.insert(ticket);
        Lease {
            budget: Arc::clone(self),
            bytes: want,
            ticket,
            waiting,
            overdrew,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes leased now.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> u64 {
        self.lock().used
    }
}

impl Lease {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether it went past the budget rather than wait ([`Waiting::Overdraw`]).
    pub(crate) fn overdrew(&self) -> bool {
        self.overdrew
    }

    /// Holds `bytes` in all (more or fewer than now). Growing waits while the budget
    /// has no room, unless this is the oldest lease alive (see the module doc) or it
    /// was taken with `Waiting::Overdraw`. Blocks: call it on a blocking thread.
    pub fn resize(&mut self, bytes: u64) {
        let budget = Arc::clone(&self.budget);
        let mut st = budget.lock();
        if bytes > self.bytes {
            let more = bytes - self.bytes;
            while st.used + more > budget.cap && st.alive.first() != Some(&self.ticket) {
                if self.waiting == Waiting::Overdraw {
                    self.overdrew = true;
                    break;
                }
                st = wait_freed(st, &budget.freed);
            }
            st.used += more;
        } else {
            st.used = st.used.saturating_sub(self.bytes - bytes);
            if st.waiting > 0 {
                budget.freed.notify_all();
            }
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
        if st.waiting > 0 {
            self.budget.freed.notify_all();
        }
    }
}

pub use fsgate_workspace::json_string_len;

/// Bytes serde_json adds to escape each byte: 1 for `"`, `\\` and the controls with a
/// short form (`\b \t \n \f \r`), 5 for the other controls (`\u00XX`), 0 otherwise.
const EXTRA: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = 5;
        b += 1;
    }
    t[0x08] = 1;
    t[0x09] = 1;
    t[0x0a] = 1;
    t[0x0c] = 1;
    t[0x0d] = 1;
    t[b'"' as usize] = 1;
    t[b'\\' as usize] = 1;
    t
};

const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;
const fn splat(b: u8) -> u64 {
    (b as u64) * 0x0101_0101_0101_0101
}

/// The top bit of each byte of `w` that is zero (exact: no false positives).
fn zero_bytes(w: u64) -> u64 {
    !(((w & LOW7) + LOW7) | w | LOW7)
}

/// The top bit of each byte of `w` (8 bytes of text, little-endian) that JSON escapes:
/// below 0x20, `"` or `\\`. Exact, so the first set bit is the first such byte.
fn escaped_bytes(w: u64) -> u64 {
    let control = !(((w & LOW7) + splat(0x80 - 0x20)) | w) & HIGH;
    control | zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\'))
}

/// Eight bytes of `b` from `i` (the caller checks that they exist).
fn word(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(a)
}

/// [`json_string_len`], 32 bytes at a time: each block's escapes are counted with
/// comparisons only (no table lookup, no branch), which the compiler turns into SIMD.
pub fn json_text_len(s: &str) -> u64 {
    let b = s.as_bytes();
    let mut extra = 0u64;
    let mut blocks = b.chunks_exact(32);
    for block in &mut blocks {
        // Escaped bytes (each at least one more), and controls without a short form
        // (`\u00XX`: four more again); at most 32 each, so u8 does not overflow.
        let (mut one, mut four) = (0u8, 0u8);
        for &c in block {
            let control = c < 0x20;
            let short = matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d);
            one += u8::from(control | (c == b'"') | (c == b'\\'));
            four += u8::from(control & !short);
        }
        extra += u64::from(one) + 4 * u64::from(four);
    }
    let rest = blocks.remainder().iter();
    extra += rest.map(|&c| u64::from(EXTRA[usize::from(c)])).sum::<u64>();
    b.len() as u64 + extra + 2
}

/// Appends `s` as a JSON string, quotes included, byte for byte as serde_json writes
/// it; copies the runs that need no escaping whole.
pub fn escape_json_into(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escape_json_bytes_into(out, s.as_bytes());
    out.push(b'"');
}

/// Appends the JSON escaping of `b`, without quotes: a piece of a text, cut anywhere
/// (only ASCII bytes are escaped, so a cut inside a character changes nothing).
pub fn escape_json_bytes_into(out: &mut Vec<u8>, b: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if i + 8 <= b.len() {
            let m = escaped_bytes(word(b, i));
            if m == 0 {
                i += 8;
                continue;
            }
            i += (m.trailing_zeros() / 8) as usize;
        } else if EXTRA[usize::from(b[i])] == 0 {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[start..i]);
        let c = b[i];
        let short = match c {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            0x08 => Some(b'b'),
            0x09 => Some(b't'),
            0x0a => Some(b'n'),
            0x0c => Some(b'f'),
            0x0d => Some(b'r'),
            _ => None,
        };
        match short {
            Some(e) => out.extend_from_slice(&[b'\\', e]),
            None => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 0xf)],
            ]),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings with every byte that JSON escapes, at every offset within a word, beside
    /// multi-byte characters.
    fn samples() -> Vec<String> {
        let mut v: Vec<String> = [
            "",
            "plain",
            "q\"b\\",
            "\n\t\u{1}\u{1f}é\u{2028}",
            "\u{0}\u{7f}",
            "0123456789abcdef\"0123456789abcdef",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for c in (0u8..0x80).chain([b'"', b'\\']) {
            for at in 0..40 {
                let mut s = "x".repeat(at);
                s.push(char::from(c));
                s.push_str("é-yz\u{80}\u{ff}");
                s.push_str(&"w".repeat(at % 9));
                v.push(s);
            }
        }
        v.push("line of text\n".repeat(500));
        v
    }

    #[test]
    fn json_text_len_and_escape_agree_with_serde_json() {
        for s in samples() {
            let encoded = serde_json::to_string(&s).unwrap();
            assert_eq!(json_text_len(&s), encoded.len() as u64, "{s:?}");
            assert_eq!(json_string_len(&s), encoded.len() as u64, "{s:?}");
            let mut out = b"prefix".to_vec();
            escape_json_into(&mut out, &s);
            assert_eq!(&out[6..], encoded.as_bytes(), "{s:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn escaping_matches_serde_json_on_any_text(s in "(?s).{0,80}") {
            let encoded = serde_json::to_string(&s).unwrap();
            let mut out = Vec::new();
            escape_json_into(&mut out, &s);
            proptest::prop_assert_eq!(&out, encoded.as_bytes());
            proptest::prop_assert_eq!(json_text_len(&s), encoded.len() as u64);
        }
    }

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
