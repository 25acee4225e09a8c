//! Writes to one path, one after the other.
//!
//! A write to a file that does not exist yet publishes it with "no replace": a file
//! that appeared meanwhile is never overwritten without its backup. Two writes of one
//! new file sent together (a client that pipelines) would otherwise both find it
//! missing, and all but the first would be refused as a race. Holding the path for the
//! whole write makes the second one find the first one's file, and back it up like any
//! overwrite. Only paths being written are held, so this is bounded by the writes in
//! flight. The hold lasts until the write's directory entry is durable (it is synced
//! beside the outcome record, after the operation itself returns), so that the next
//! write of the path is announced only once this one's name is on disk.

use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The paths being written now.
#[derive(Default)]
pub(crate) struct PathLocks {
    held: Mutex<Paths>,
    freed: Condvar,
}

#[derive(Default)]
struct Paths {
    held: HashSet<String>,
    /// Writes waiting for a path: only then does a release wake anyone (a wake-up with
    /// nobody waiting is still a syscall, on every write's path).
    waiting: usize,
}

/// A path held until this is dropped.
pub(crate) struct Held {
    locks: Arc<PathLocks>,
    path: String,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("path", &self.path).finish()
    }
}

impl PathLocks {
    fn lock(&self) -> MutexGuard<'_, Paths> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until no other write holds `path`, then holds it.
    pub(crate) fn hold(self: &Arc<Self>, path: &str) -> Held {
        let mut paths = self.lock();
        while paths.held.contains(path) {
            paths.waiting += 1;
            paths = self
                .freed
                .wait(paths)
                .unwrap_or_else(PoisonError::into_inner);
            paths.waiting -= 1;
        }
        paths.held.insert(path.to_string());
        Held {
            locks: Arc::clone(self),
            path: path.to_string(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut paths = self.locks.lock();
        paths.held.remove(&self.path);
        if paths.waiting > 0 {
            self.locks.freed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Holders of one path never overlap; other paths are not held up; nothing is kept
    /// once every holder is done.
    #[test]
    fn one_holder_of_a_path_at_a_time() {
        let locks = Arc::new(PathLocks::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _held = locks.hold("a/b.txt");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                        let _other = locks.hold("other.txt");
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("a holder panicked");
        }
        let paths = locks.lock();
        assert!(paths.held.is_empty() && paths.waiting == 0);
    }
}
