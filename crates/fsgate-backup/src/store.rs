//! [`BackupStore`]: saves, lists and opens versions through one directory handle.
//!
//! This file holds the store and what a version found on disk is; `open`: opening a
//! store directory (created private, its owner checked); `save`: saving a file's
//! content within the limits; `new_version`: a version file named, created and
//! written; `shards`: the shard directories and their syncs; `durable`: a written
//! version made durable, here or beside the caller ([`durable::Saving`]).

pub(crate) mod durable;
mod new_version;
mod open;
mod save;
mod shards;

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;
use fsgate_base::sha256::Sha256;
use time::OffsetDateTime;

use crate::config::{Retention, SizeLimits};
use crate::counts::{Quota, Sweep};
use crate::error::{BackupError, BackupRef};
use crate::layout::{self, Sidecar};
use crate::sparse::NoClone;

/// The backup store, opened once at start-up on a directory outside the workspace.
///
/// After [`open`](Self::open) it touches the filesystem only through its directory
/// handles, never through ambient paths, so it keeps working once Landlock confines the
/// process to the store directory.
#[derive(Debug)]
pub struct BackupStore {
    /// Handle on `<store>/versions`, the parent of the shard directories.
    pub(crate) versions: Dir,
    /// Handle on `<store>/files` of a store that has layout-1 versions (read, listed,
    /// restored from and pruned; never written).
    pub(crate) legacy: Option<Dir>,
    /// Handle on the store directory itself; Landlock rules are bound to it.
    root: Dir,
    /// Retention rules from `[backup]`.
    pub(crate) retention: Retention,
    /// Size limits of one backup from `[backup]`.
    limits: SizeLimits,
    /// Bytes the store holds and bytes being saved, for `max_total_bytes`.
    pub(crate) quota: Mutex<Quota>,
    /// Workspace paths changed since the store was opened (this session).
    pub(crate) touched: Mutex<HashSet<String>>,
    /// Last timestamp handed out, so timestamps from this process strictly increase.
    last_ts: Mutex<OffsetDateTime>,
    /// Shards whose entry in `versions/` this process has synced (or seen synced):
    /// a version in one is durable once its file and the shard are synced.
    synced_shards: Arc<[AtomicBool; 256]>,
    /// The shards present were listed (and marked synced) once already.
    shards_listed: AtomicBool,
    /// The helper job that makes every shard ahead was handed over (see `shards`).
    shards_ahead: AtomicBool,
    /// Whether `FORMAT` and `versions/` were synced by this process (at its first
    /// backup: see `init`).
    layout_durable: AtomicBool,
    /// When the last pass over the whole store ran, and what it found.
    pub(crate) sweep: Mutex<Sweep>,
    /// Held by a pass over the whole store while it runs: a save that must count the
    /// store's bytes waits for the pass's count rather than read every record again.
    pub(crate) pass: Mutex<()>,
    /// Devices whose files cannot be cloned into the store (no `FICLONE` tried again).
    no_clone: NoClone,
    /// False once an unnamed file made in `versions/` could not be linked into a shard
    /// (a sandbox without Landlock's `Refer`, say): versions are then made in place.
    spares: AtomicBool,
    /// Where the store is, for messages only (never opened again).
    location: PathBuf,
}

/// Where a version's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// Layout 1: `files/<dir>/<stem>.data` and its sidecar `<stem>.json`.
    Legacy,
    /// One file, `versions/<shard>/<dir>@<stem>.backup`.
    Packed {
        /// The shard directory's name.
        shard: String,
    },
}

/// A version found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    /// The escaped path (layout 1: the per-path directory's name).
    pub dir: String,
    /// Compact timestamp, the version's name within its path.
    pub stem: String,
    /// When it was saved.
    pub at: OffsetDateTime,
    /// Its record.
    pub meta: Sidecar,
    /// Where it is stored.
    pub place: Place,
}

impl Version {
    /// The public description of this version.
    pub(crate) fn to_ref(&self) -> BackupRef {
        BackupRef {
            id: format!("{}/{}", self.dir, self.stem),
            rel_path: self.meta.path.clone(),
            ts: self.meta.ts.clone(),
            sha256: self.meta.sha256.clone(),
            size: self.meta.size,
            original: self.meta.original,
            mode: self.meta.mode,
        }
    }

    /// Bytes of data the version stores (what counts against `max_total_bytes`).
    pub(crate) fn stored(&self) -> u64 {
        self.meta.stored.unwrap_or(self.meta.size)
    }
}

impl BackupStore {
    /// What a change does when its backup would pass a size limit.
    pub fn on_limit(&self) -> crate::config::OnLimit {
        self.limits.on_limit
    }

    /// The store directory handle, for the sandbox plan (bind the Landlock rule to it).
    pub fn dir(&self) -> &Dir {
        &self.root
    }

    /// The path the store was opened at (for messages; do not open it again).
    pub fn location(&self) -> &Path {
        &self.location
    }

    /// Lists versions, oldest first per path, paths in order. With `path`, only that
    /// file and (if it is a directory path) everything beneath it.
    pub fn list(&self, path: Option<&str>) -> Result<Vec<BackupRef>, BackupError> {
        let prefix = match path.map(|p| p.trim_end_matches('/')) {
            Some(p) => {
                layout::validate_rel_path(p)?;
                Some(p)
            }
            None => None,
        };
        let wanted = |p: &str| match prefix {
            None => true,
            Some(pre) => {
                p == pre
                    || p.strip_prefix(pre)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
        };
        let mut versions = self.scan(&wanted)?;
        versions.sort_by(|a, b| a.meta.path.cmp(&b.meta.path).then(a.at.cmp(&b.at)));
        Ok(versions.iter().map(Version::to_ref).collect())
    }
}

/// Copies `src` into `dst`, returning the byte count and the SHA-256 (hex) of the bytes.
pub fn copy_hashing(src: &mut dyn Read, dst: &mut dyn Write) -> io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])?;
        total += n as u64;
    }
    dst.flush()?;
    Ok((total, hex::encode(hasher.finalize())))
}

/// fsyncs a directory so that new, renamed or removed entries survive a crash; one
/// sync is shared by the saves into the same shard at once.
pub(crate) fn sync_dir(dir: &Dir) -> io::Result<()> {
    fsgate_workspace::sync_dir_shared(dir)
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
