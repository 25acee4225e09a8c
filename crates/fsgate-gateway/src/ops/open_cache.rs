//! The files the filesystem view opened whose content was found clean, by version, so
//! that a build opening one file a hundred times pays for one scan.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use fsgate_policy::Policy;

/// One version of one file under one policy: where it is, its device and inode, its
/// size, its modification and status-change times (nanoseconds), and the policy's
/// digest. Any write changes the status-change time; a reloaded policy is another key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Version {
    path: Box<str>,
    id: (u64, u64),
    size: u64,
    times: (i64, i64, i64, i64),
    policy: Box<str>,
}

impl Version {
    pub(crate) fn of(
        file: &std::fs::File,
        real: &fsgate_base::path::RelPath,
        pol: &Policy,
    ) -> Option<Version> {
        use std::os::unix::fs::MetadataExt;
        let m = file.metadata().ok()?;
        Some(Version {
            path: real.as_str().into(),
            id: (m.dev(), m.ino()),
            size: m.size(),
            times: (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()),
            policy: pol.sha256().into(),
        })
    }
}

/// The versions found clean (with what the record says of their content: its length and
/// SHA-256), so that a build opening one file a hundred times pays for one scan.
/// Bounded: past [`MAX_CLEAN_OPENS`] it forgets everything and starts again.
#[derive(Debug, Default)]
pub(crate) struct CleanOpens(Mutex<HashMap<Version, (usize, String)>>);

/// Versions remembered at most (a few hundred bytes each).
const MAX_CLEAN_OPENS: usize = 16_384;

impl CleanOpens {
    pub(crate) fn get(&self, v: &Version) -> Option<(usize, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(v)
            .cloned()
    }

    pub(crate) fn insert(&self, v: Version, what: (usize, String)) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= MAX_CLEAN_OPENS {
            seen.clear();
        }
        seen.insert(v, what);
    }
}
