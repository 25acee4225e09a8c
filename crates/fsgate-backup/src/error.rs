//! A saved version's reference, and everything that can go wrong in the store.

use std::io;
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
    /// The permission bits of the file the content came from, when the version records
    /// them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
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
