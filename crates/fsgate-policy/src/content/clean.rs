//! What one compiled scanner already found clean: the same bytes at the same path are
//! not scanned again by it. A file an agent reads again unchanged then costs a lookup
//! instead of a scan (about 2 us of a 4 KiB read's 25 us of CPU).
//!
//! The key is the path and the SHA-256 of the very bytes scanned, which a request
//! computes anyway for its audit record: other bytes cannot match without a SHA-256
//! collision. Only clean results are kept (a finding is scanned again every time, so
//! its record and error are built as before), and each scanner has its own memory, so
//! a reloaded policy starts with none. Bounded: past [`MAX_BYTES`] counted for its keys
//! it forgets everything and starts again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Bytes counted for the keys kept, at most (each key's path, plus [`KEY_OVERHEAD`]).
pub(super) const MAX_BYTES: usize = 1 << 20;

/// Paths kept per digest (identical files under many names): past it, the oldest goes.
const PATHS_PER_DIGEST: usize = 8;

/// Bytes counted per key besides its path's: the digest, its list and the path's
/// allocation, the table's slot at its load factor, and the allocator's headers. An
/// estimate on the high side, so that the memory used stays near [`MAX_BYTES`].
const KEY_OVERHEAD: usize = 160;

/// The (path, content digest) pairs a scanner found clean.
#[derive(Debug, Default)]
pub(crate) struct CleanScans {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    paths: HashMap<[u8; 32], Vec<Box<str>>>,
    bytes: usize,
}

impl CleanScans {
    /// Whether these bytes (`digest`) at `path` were found clean before.
    pub(crate) fn contains(&self, path: &str, digest: &[u8; 32]) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.paths
            .get(digest)
            .is_some_and(|ps| ps.iter().any(|p| &**p == path))
    }

    /// Notes that these bytes at `path` were found clean.
    pub(crate) fn insert(&self, path: &str, digest: [u8; 32]) {
        let cost = path.len() + KEY_OVERHEAD;
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.bytes + cost > MAX_BYTES {
            *seen = Seen::default();
        }
        let paths = seen.paths.entry(digest).or_default();
        if paths.iter().any(|p| &**p == path) {
            return;
        }
        let mut freed = 0;
        if paths.len() >= PATHS_PER_DIGEST {
            freed = paths.remove(0).len() + KEY_OVERHEAD;
        }
        paths.push(path.into());
        seen.bytes = seen.bytes + cost - freed;
    }

    /// Bytes counted now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(i: u32) -> [u8; 32] {
        let mut d = [0u8; 32];
        d[..4].copy_from_slice(&i.to_le_bytes());
        d
    }

    #[test]
    fn a_pair_is_known_only_as_inserted() {
        let c = CleanScans::default();
        assert!(!c.contains("a.txt", &digest(1)));
        c.insert("a.txt", digest(1));
        assert!(c.contains("a.txt", &digest(1)));
        assert!(!c.contains("b.txt", &digest(1)), "same bytes, other path");
        assert!(!c.contains("a.txt", &digest(2)), "same path, other bytes");
    }

    #[test]
    fn identical_files_keep_the_latest_paths() {
        let c = CleanScans::default();
        for i in 0..=PATHS_PER_DIGEST {
            c.insert(&format!("f{i}"), digest(7));
        }
        assert!(!c.contains("f0", &digest(7)), "the oldest went");
        assert!(c.contains(&format!("f{PATHS_PER_DIGEST}"), &digest(7)));
        let per = KEY_OVERHEAD + 2;
        assert_eq!(c.bytes(), PATHS_PER_DIGEST * per);
    }

    proptest::proptest! {
        /// Whatever is inserted, the count stays within the bound.
        #[test]
        fn the_memory_stays_bounded(keys in proptest::collection::vec((0u32..5000, "[a-z/]{1,300}"), 1..3000)) {
            let c = CleanScans::default();
            for (d, p) in &keys {
                c.insert(p, digest(*d));
                proptest::prop_assert!(c.bytes() <= MAX_BYTES);
            }
            let (d, p) = keys.last().expect("one key");
            proptest::prop_assert!(c.contains(p, &digest(*d)), "the last insert is kept");
        }
    }
}
