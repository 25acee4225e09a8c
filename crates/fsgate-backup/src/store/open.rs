//! Opening a store directory: created with mode 0700, refused when another user owns
//! it or others can write it, its layout checked.

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use time::OffsetDateTime;

use super::BackupStore;
use crate::config::BackupSettings;
use crate::counts::{Quota, Sweep};
use crate::error::BackupError;
use crate::layout::{FILES_DIR, VERSIONS_DIR};
use crate::sparse::NoClone;

impl BackupStore {
    /// Opens (creating it with mode 0700 if missing) the store at `dir`.
    ///
    /// Refuses a directory owned by another user or writable by group or others, and a
    /// non-empty directory that is not a backup store (so a mistyped `--backup-dir`
    /// never makes fsgate prune someone's files).
    ///
    /// # Ambient Authority
    ///
    /// Opens `dir` by path. Call it at start-up, before Landlock is applied.
    pub fn open(dir: &Path, settings: &BackupSettings) -> Result<Self, BackupError> {
        let retention = settings.retention()?;
        let shown = dir.display().to_string();
        create_private_dir_all(dir).map_err(BackupError::io("create", shown.clone()))?;
        let root = Dir::open_ambient_dir(dir, ambient_authority())
            .map_err(BackupError::io("open", shown.clone()))?;
        check_ownership(&root, &shown)?;
        crate::init::init_layout(&root, &shown)?;
        let versions = root
            .open_dir(VERSIONS_DIR)
            .map_err(BackupError::io("open", format!("{shown}/{VERSIONS_DIR}")))?;
        let legacy = match root.open_dir(FILES_DIR) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(BackupError::io("open", format!("{shown}/{FILES_DIR}"))(e)),
        };
        Ok(BackupStore {
            versions,
            legacy,
            root,
            retention,
            limits: settings.size_limits(),
            quota: Mutex::new(Quota::default()),
            touched: Mutex::new(HashSet::new()),
            last_ts: Mutex::new(OffsetDateTime::UNIX_EPOCH),
            synced_shards: std::sync::Arc::new(std::array::from_fn(|_| AtomicBool::new(false))),
            shards_listed: AtomicBool::new(false),
            shards_ahead: AtomicBool::new(false),
            // Synced at each run's first backup, also when `FORMAT` reads back whole: it
            // may be in the page cache only, from a process that made the store and
            // ended before its first backup.
            layout_durable: AtomicBool::new(false),
            sweep: Mutex::new(Sweep::default()),
            pass: Mutex::new(()),
            no_clone: NoClone::default(),
            spares: AtomicBool::new(true),
            location: dir.to_path_buf(),
        })
    }
}

/// `mkdir -p` with mode 0700 for every directory it creates.
pub(super) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Refuses a store directory another user owns or others can write.
pub(super) fn check_ownership(root: &Dir, shown: &str) -> Result<(), BackupError> {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        let meta = root
            .dir_metadata()
            .map_err(BackupError::io("stat", shown))?;
        let unsafe_dir = |reason: String| BackupError::UnsafeDir {
            path: shown.to_owned(),
            reason,
        };
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(unsafe_dir(format!(
                "owned by uid {}, not by this user ({me})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unsafe_dir(format!(
                "writable by group or others (mode {:o}); run chmod 700 on it",
                meta.mode() & 0o7777
            )));
        }
        if meta.mode() & 0o077 != 0 {
            tracing::warn!(
                dir = shown,
                mode = format!("{:o}", meta.mode() & 0o7777),
                "backup store is readable by others; chmod 700 recommended"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = (root, shown);
    Ok(())
}
