//! Backup store: previous versions of files, outside the workspace (issue 3, points 11-13).
//!
//! # Layer
//!
//! Owns: the store of previous versions and the `backup` commands. Depends on
//! `fsgate-base`, `fsgate-workspace` (reading what it saves) and `fsgate-audit` (the
//! records of a `backup restore`). May not touch: the policy or the doors.
//!
//! # Layout
//!
//! - [`config`]: the `[backup]` policy section ([`BackupSettings`]).
//! - `layout`: directory names, timestamps and records on disk.
//! - `packed`: one file per version, the content with its record as a trailer.
//! - [`store`]: [`BackupStore`] — open once at start-up, then `save`, `list`.
//! - `scan`: finding versions (`open_version`, `list`), of both layouts.
//! - `retention`: [`BackupStore::prune`], keep-N / max-age / byte budget.
//! - `restore`: [`restore`], which backs up the current content first.
//! - [`cli`]: `fsgate backup list|restore`.
//!
//! The gateway calls [`BackupStore::save`] with the current content before any write,
//! edit, rm or replacing rename, and refuses the operation if it returns an error (fail
//! closed). After [`BackupStore::open`] every access goes through the store's directory
//! handle, so Landlock may confine the process to that directory afterwards.

pub mod audit;
pub mod cli;
pub mod config;
mod init;
mod layout;
mod packed;
/// Entry points for the fuzz targets in `fuzz/` (crate feature `fuzzing` only).
#[cfg(feature = "fuzzing")]
pub mod fuzz {
    /// Reads `bytes` as a one-file version through the store's trailer parser: Some
    /// (content length, record's content size, record length) if it reads as complete.
    pub fn version_trailer(bytes: &[u8]) -> Option<(u64, u64, usize)> {
        use std::os::fd::AsFd;
        let fd = rustix::fs::memfd_create("fsgate-fuzz", rustix::fs::MemfdFlags::CLOEXEC).ok()?;
        super::sparse::write_all_at(fd.as_fd(), bytes, 0).ok()?;
        let (meta, len) = super::packed::read_record(&fd).ok()?;
        let record = serde_json::to_vec(&meta).ok()?.len();
        Some((len, meta.size, record))
    }
}
mod quota;
mod restore;
mod retention;
mod scan;
mod sparse;
pub mod store;

use std::io;

pub use cli::{BackupCommand, workspace_state_dir};
pub use config::{BackupSettings, OnLimit};
pub use restore::{RestoreReport, restore};
pub use retention::{PruneReason, PruneReport, PrunedVersion};
pub use store::BackupStore;
pub use store::Saving;

/// One saved version of a workspace file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BackupRef {
    /// Store-wide unique id, `<escaped path>/<compact timestamp>`; the audit log names
    /// backups by it.
    pub id: String,
    /// Workspace-relative path the content came from.
    pub rel_path: String,
    /// When it was saved: UTC, RFC 3339 with nanoseconds (`--at` accepts it).
    pub ts: String,
    /// SHA-256 of the saved content, lowercase hex.
    pub sha256: String,
    /// Size of the saved content in bytes.
    pub size: u64,
    /// The content the file had before the gateway first changed it in a session (a
    /// gateway run): `keep_versions` and `max_total_bytes` never remove the newest such
    /// version of a file.
    pub original: bool,
}

/// Everything that can go wrong in the backup store.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A filesystem call failed.
    #[error("backup store: cannot {action} {target}: {source}")]
    Io {
        /// What was being done ("create", "write", "sync", ...).
        action: &'static str,
        /// Which file or directory (store-relative, or the store path at open).
        target: String,
        /// The OS error.
        source: io::Error,
    },
    /// A path that is not a plain workspace-relative path.
    #[error("backup store: invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// No version matches.
    #[error("no backup of {path:?}{}", at.as_ref().map(|a| format!(" at or before {a}")).unwrap_or_default())]
    NotFound {
        /// The workspace path asked for.
        path: String,
        /// The `--at` value, if any.
        at: Option<String>,
    },
    /// A timestamp that cannot be parsed.
    #[error(
        "bad timestamp {0:?}: expected RFC 3339 (2025-01-02T03:04:05Z), a date (2025-01-02) or a backup timestamp"
    )]
    BadTimestamp(String),
    /// The `[backup]` settings are invalid.
    #[error("{0}")]
    BadSettings(String),
    /// The store directory is unsafe or not a backup store.
    #[error("backup store {path}: {reason}")]
    UnsafeDir {
        /// The directory.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The restore could not be recorded ahead in the audit log, so nothing changed.
    #[error("the restore could not be recorded in the audit log, so nothing was changed: {0}")]
    NotRecorded(String),
    /// A stored version is damaged (record unreadable, content does not match its hash).
    #[error("backup {id} is damaged: {reason}")]
    Corrupt {
        /// The version id.
        id: String,
        /// What does not match.
        reason: String,
    },
    /// The current file cannot be backed up or replaced (directory, symlink, ...).
    #[error("cannot restore {path:?}: {reason}")]
    NotRestorable {
        /// The workspace path.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// A backup would pass a size limit of `[backup]`.
    #[error("{message}")]
    TooLarge {
        /// The limit's name, e.g. `backup.max_file_bytes`.
        limit: &'static str,
        /// One line naming the file, the size and the limit.
        message: String,
    },
    /// Neither `XDG_STATE_HOME` nor `HOME` is usable, so there is no default location.
    #[error(
        "no default backup directory: neither XDG_STATE_HOME nor HOME is set to an absolute path; pass --backup-dir"
    )]
    NoStateDir,
}

impl BackupError {
    /// Builds a closure mapping an `io::Error` to [`BackupError::Io`].
    pub(crate) fn io(
        action: &'static str,
        target: impl Into<String>,
    ) -> impl FnOnce(io::Error) -> Self {
        let target = target.into();
        move |source| BackupError::Io {
            action,
            target,
            source,
        }
    }
}
