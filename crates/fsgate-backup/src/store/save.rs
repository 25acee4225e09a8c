//! Saving a workspace file's current content as a new version, within `[backup]`'s
//! size limits, synced on this thread or beside the caller.

use std::io::Read;
use std::os::fd::AsFd;

use cap_std::fs::File;
use time::OffsetDateTime;

use super::durable::{Saving, Unsynced};
use super::{BackupStore, copy_hashing};
use crate::error::{BackupError, BackupRef};
use crate::layout::{self};
use crate::sparse::{Caps, Copied, CopyError, Sizes, copy_sized};

/// The error for a backup past `[backup] <key>`.
pub(super) fn too_large(rel_path: &str, key: &'static str, seen: u64, limit: u64) -> BackupError {
    let (limit_name, what) = match key {
        "max_file_bytes" => ("backup.max_file_bytes", "bytes of data"),
        "max_sparse_bytes" => ("backup.max_sparse_bytes", "bytes (holes included)"),
        _ => (
            "backup.max_total_bytes",
            "bytes of data, more than the store has room for",
        ),
    };
    BackupError::TooLarge {
        limit: limit_name,
        message: format!(
            "the backup of {rel_path:?} needs {seen} {what}; [backup] {key} allows {limit}"
        ),
    }
}

impl BackupStore {
    /// Saves `content`, the current content of workspace file `rel_path`, as a new
    /// version and makes it durable (file and directory fsync) before returning.
    /// A plain stream copy without size limits, for `fsgate backup restore` (the user's
    /// own action); the gateway uses [`save_opened`](Self::save_opened) and
    /// [`save_opened_beside`](Self::save_opened_beside).
    ///
    /// An error means there is no backup: the caller must refuse the operation.
    pub fn save(&self, rel_path: &str, content: &mut dyn Read) -> Result<BackupRef, BackupError> {
        let now = OffsetDateTime::now_utc();
        self.save_at(rel_path, content, now)
    }

    /// [`save`](Self::save) with the clock given (tests use old timestamps).
    pub(crate) fn save_at(
        &self,
        rel_path: &str,
        content: &mut dyn Read,
        now: OffsetDateTime,
    ) -> Result<BackupRef, BackupError> {
        let mut fill = |data: &mut File, target: &str| {
            let (size, sha256) =
                copy_hashing(content, data).map_err(BackupError::io("write", target))?;
            Ok(Copied {
                size,
                stored: size,
                sha256,
            })
        };
        let (saved, _, unsynced) =
            self.save_with((rel_path, None), (now, false, false), &mut fill)?;
        unsynced.sync_now()?;
        Ok(saved)
    }

    /// Saves the current content of the opened workspace file `file` (path `rel_path`)
    /// within the `[backup]` limits: checked from its fstat before anything is copied,
    /// and again byte by byte while it is copied (sparse-aware, or cloned). Past a limit
    /// nothing is kept and the error is [`BackupError::TooLarge`].
    #[cfg(test)]
    pub(crate) fn save_file(
        &self,
        rel_path: &str,
        file: &impl AsFd,
    ) -> Result<BackupRef, BackupError> {
        let st = crate::sparse::sizes(file).map_err(BackupError::io("stat", rel_path))?;
        self.save_file_sized(rel_path, file, st)
    }

    /// Saves the current content of the opened workspace file `file` (path `rel_path`)
    /// within the `[backup]` limits, from the fstat the caller just made when it opened
    /// it: `size`, `blocks` (of 512 bytes) and `dev`.
    pub fn save_opened(
        &self,
        rel_path: &str,
        file: &impl AsFd,
        (size, blocks, dev): (u64, u64, u64),
    ) -> Result<BackupRef, BackupError> {
        self.save_file_sized(rel_path, file, Sizes::of(size, blocks, dev))
    }

    /// [`save_opened`](Self::save_opened) whose two syncs (the version's file and its
    /// shard directory) run beside the caller (see `workspace::sync_pool`): the version
    /// is written and named when this returns, and durable once [`Saving::wait`] has
    /// returned Ok. The caller changes nothing before that.
    pub fn save_opened_beside(
        &self,
        rel_path: &str,
        file: &impl AsFd,
        (size, blocks, dev): (u64, u64, u64),
    ) -> Result<Saving<'_>, BackupError> {
        let st = Sizes::of(size, blocks, dev);
        let (saved, unsynced) = self.save_unsynced(rel_path, file, st, true)?;
        Ok(Saving {
            store: self,
            rel_path: rel_path.to_owned(),
            saved,
            syncs: unsynced.sync_beside(),
        })
    }

    /// Refuses a backup whose fstat already passes `max_file_bytes` or `max_sparse_bytes`.
    pub(super) fn check_limits(&self, rel_path: &str, st: Sizes) -> Result<(), BackupError> {
        let lim = self.limits;
        if st.data > lim.max_file_bytes {
            return Err(too_large(
                rel_path,
                "max_file_bytes",
                st.data,
                lim.max_file_bytes,
            ));
        }
        if st.size > lim.max_sparse_bytes {
            return Err(too_large(
                rel_path,
                "max_sparse_bytes",
                st.size,
                lim.max_sparse_bytes,
            ));
        }
        Ok(())
    }

    pub(super) fn save_file_sized(
        &self,
        rel_path: &str,
        file: &impl AsFd,
        st: Sizes,
    ) -> Result<BackupRef, BackupError> {
        let (saved, unsynced) = self.save_unsynced(rel_path, file, st, false)?;
        unsynced.sync_now()?;
        self.after_save(rel_path);
        Ok(saved)
    }

    /// Writes a version of the opened `file` within the limits, not yet synced; with
    /// `beside`, a new shard's entry is not synced yet either.
    pub(super) fn save_unsynced(
        &self,
        rel_path: &str,
        file: &impl AsFd,
        st: Sizes,
        beside: bool,
    ) -> Result<(BackupRef, Unsynced), BackupError> {
        layout::validate_rel_path(rel_path)?;
        self.check_limits(rel_path, st)?;
        let (lim, data) = (self.limits, st.data);
        let room = self.reserve_room(rel_path, data)?;
        let caps = Caps {
            data: lim.max_file_bytes.min(room),
            len: lim.max_sparse_bytes,
        };
        let original = self.is_first_change(rel_path);
        let mut fill = |dst: &mut File, target: &str| {
            copy_sized(file, st, &*dst, caps, &self.no_clone).map_err(|e| match e {
                CopyError::Io(e) => BackupError::io("write", target)(e),
                CopyError::Limit { data: false, seen } => {
                    too_large(rel_path, "max_sparse_bytes", seen, caps.len)
                }
                CopyError::Limit { data: true, seen } if caps.data < lim.max_file_bytes => {
                    too_large(rel_path, "max_total_bytes", seen, caps.data)
                }
                CopyError::Limit { seen, .. } => {
                    too_large(rel_path, "max_file_bytes", seen, lim.max_file_bytes)
                }
            })
        };
        let now = OffsetDateTime::now_utc();
        // Kept with the version, so that an undo that makes the file again gives it
        // back its permissions (a 0600 file is not made world-readable).
        let mode = rustix::fs::fstat(file).ok().map(|st| st.st_mode & 0o777);
        let saved = self.save_with((rel_path, mode), (now, original, beside), &mut fill);
        self.settle_room(data, saved.as_ref().ok().map(|(_, stored, _)| *stored));
        let (saved, _, unsynced) = saved?;
        Ok((saved, unsynced))
    }

    /// What follows a durable save: the file is noted as changed, and only its own
    /// count grew, so it is kept to `keep_versions` now, without a pass over the whole
    /// store. The version is saved whatever the pruning does.
    pub(super) fn after_save(&self, rel_path: &str) {
        self.note_changed(rel_path);
        match self.prune_path(rel_path) {
            Ok(report) if !report.removed.is_empty() => self.lock_quota().reports.push(report),
            Ok(_) => {}
            Err(e) => tracing::warn!("backup retention of {rel_path}: {e}"),
        }
    }
}
