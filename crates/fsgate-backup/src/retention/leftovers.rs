//! Crash leftovers: one-file versions without a complete trailer, and layout-1 temporary
//! or sidecar-less files, removed once older than [`ORPHAN_GRACE`] and no saver holds
//! them; a prune removes them along with what retention removes.

use std::collections::HashSet;
use std::time::Duration;

use time::OffsetDateTime;

use crate::error::BackupError;
use crate::layout::{DATA_SUFFIX, FILES_DIR, META_SUFFIX, TMP_SUFFIX, names};
use crate::scan::Incomplete;
use crate::store::BackupStore;

/// Incomplete files (crash leftovers) younger than this are left alone: they may belong
/// to a save in progress in another process.
const ORPHAN_GRACE: Duration = Duration::from_secs(3600);

impl BackupStore {
    /// Removes one-file versions that were found without a complete trailer and are
    /// older than [`ORPHAN_GRACE`] (younger ones may be saves in progress), and only
    /// those no saver holds locked (a saver stopped for hours is still alive).
    pub(super) fn remove_incomplete(
        &self,
        incomplete: &[Incomplete],
        now: OffsetDateTime,
    ) -> usize {
        let cutoff = std::time::SystemTime::from(now) - ORPHAN_GRACE;
        let mut removed = 0;
        for (shard, name) in incomplete {
            let Ok(Some(dir)) = self.shard_dir(shard) else {
                continue;
            };
            if abandoned(&dir, name, cutoff) && dir.remove_file(name).is_ok() {
                tracing::warn!(
                    file = format!("{shard}/{name}"),
                    "backup store: removed crash leftover"
                );
                removed += 1;
            }
        }
        removed
    }

    /// Removes layout-1 crash leftovers older than [`ORPHAN_GRACE`] and empty per-path
    /// directories (no save writes there any more).
    pub(super) fn remove_legacy_leftovers(
        &self,
        now: OffsetDateTime,
    ) -> Result<usize, BackupError> {
        let Some(files) = &self.legacy else {
            return Ok(0);
        };
        let mut removed = 0;
        let cutoff = std::time::SystemTime::from(now) - ORPHAN_GRACE;
        for dir_name in names(files, FILES_DIR)? {
            let Ok(dir) = files.open_dir(&dir_name) else {
                continue;
            };
            let entries = names(&dir, &dir_name)?;
            let sidecars: HashSet<&str> = entries
                .iter()
                .filter_map(|n| n.strip_suffix(META_SUFFIX))
                .collect();
            let mut removed_here = 0;
            for name in &entries {
                let orphan = name.ends_with(TMP_SUFFIX)
                    || name
                        .strip_suffix(DATA_SUFFIX)
                        .is_some_and(|s| !sidecars.contains(s));
                let old = orphan
                    && dir
                        .metadata(name)
                        .and_then(|m| m.modified())
                        .is_ok_and(|m| m.into_std() < cutoff);
                if old && dir.remove_file(name).is_ok() {
                    tracing::warn!(
                        file = format!("{dir_name}/{name}"),
                        "backup store: removed crash leftover"
                    );
                    removed_here += 1;
                }
            }
            if entries.len() == removed_here {
                // rmdir of a directory that is not empty fails harmlessly.
                let _ = files.remove_dir(&dir_name);
            }
            removed += removed_here;
        }
        Ok(removed)
    }
}

/// Whether the incomplete file `name` in `dir` is a crash's leftover: its saver holds
/// no lock on it, it is still incomplete once locked, and it is older than `cutoff`.
fn abandoned(dir: &cap_std::fs::Dir, name: &str, cutoff: std::time::SystemTime) -> bool {
    use rustix::fs::{FlockOperation, flock};
    let Ok(file) = crate::scan::open_nonblocking(dir, name) else {
        return false;
    };
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
        return false; // a save in progress
    }
    let incomplete = matches!(
        crate::packed::read_record(&file),
        Err(crate::packed::Unread::Incomplete(_))
    );
    let old = file
        .metadata()
        .and_then(|m| m.modified())
        .is_ok_and(|m| m.into_std() < cutoff);
    incomplete && old
}
