//! [`BackupStore`]: saves, lists and opens versions through one directory handle.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::config::{Retention, SizeLimits};
use super::layout::{
    self, DATA_SUFFIX, FILES_DIR, FORMAT_FILE, FORMAT_TEXT, META_SUFFIX, Sidecar, TMP_SUFFIX,
};
use super::quota::Quota;
use super::sparse::{self, Caps, Copied, CopyError, clone_or_copy};
use super::{BackupError, BackupRef, BackupSettings};

/// How many timestamps `save` tries before giving up on a name clash.
const MAX_NAME_ATTEMPTS: u32 = 64;
/// How many times `save` recreates a per-path directory another process pruned.
const MAX_DIR_ATTEMPTS: u32 = 32;

/// Marks a per-path directory as in use by a save until dropped.
pub(crate) struct DirClaim<'a> {
    store: &'a BackupStore,
    dir_name: &'a str,
}

impl<'a> DirClaim<'a> {
    pub(crate) fn new(store: &'a BackupStore, dir_name: &'a str) -> Self {
        *store.lock_saving().entry(dir_name.to_owned()).or_insert(0) += 1;
        DirClaim { store, dir_name }
    }
}

impl Drop for DirClaim<'_> {
    fn drop(&mut self) {
        let mut saving = self.store.lock_saving();
        if let Some(n) = saving.get_mut(self.dir_name) {
            *n -= 1;
            if *n == 0 {
                saving.remove(self.dir_name);
            }
        }
    }
}

/// The backup store, opened once at start-up on a directory outside the workspace.
///
/// After [`open`](Self::open) it touches the filesystem only through its directory
/// handles, never through ambient paths, so it keeps working once Landlock confines the
/// process to the store directory.
#[derive(Debug)]
pub struct BackupStore {
    /// Handle on `<store>/files`, the parent of every per-path directory.
    pub(crate) files: Dir,
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
    /// Per-path directories saves of this process are using, with their counts;
    /// retention never removes them (it holds this lock while it removes one).
    pub(crate) saving: Mutex<HashMap<String, usize>>,
    /// When the last pass over the whole store ran, and what it found.
    pub(crate) sweep: Mutex<super::retention::Sweep>,
    /// Where the store is, for messages only (never opened again).
    location: PathBuf,
}

/// A version found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    /// Name of the per-path directory.
    pub dir: String,
    /// File stem (compact timestamp) of the version's files.
    pub stem: String,
    /// When it was saved.
    pub at: OffsetDateTime,
    /// Its sidecar.
    pub meta: Sidecar,
}

impl Version {
    /// The public description of this version.
    pub fn to_ref(&self) -> BackupRef {
        BackupRef {
            id: format!("{}/{}", self.dir, self.stem),
            rel_path: self.meta.path.clone(),
            ts: self.meta.ts.clone(),
            sha256: self.meta.sha256.clone(),
            size: self.meta.size,
            original: self.meta.original,
        }
    }

    /// Bytes of data the version stores (what counts against `max_total_bytes`).
    pub fn stored(&self) -> u64 {
        self.meta.stored.unwrap_or(self.meta.size)
    }
}

/// Where a new version goes.
struct NewVersion<'a> {
    dir: &'a Dir,
    dir_name: &'a str,
    rel_path: &'a str,
    ts: OffsetDateTime,
    original: bool,
}

/// The error for a backup past `[backup] <key>`.
fn too_large(rel_path: &str, key: &'static str, seen: u64, limit: u64) -> BackupError {
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
        init_layout(&root, &shown)?;
        let files = root
            .open_dir(FILES_DIR)
            .map_err(BackupError::io("open", format!("{shown}/{FILES_DIR}")))?;
        Ok(BackupStore {
            files,
            root,
            retention,
            limits: settings.size_limits(),
            quota: Mutex::new(Quota::default()),
            touched: Mutex::new(HashSet::new()),
            last_ts: Mutex::new(OffsetDateTime::UNIX_EPOCH),
            saving: Mutex::new(HashMap::new()),
            sweep: Mutex::new(super::retention::Sweep::default()),
            location: dir.to_path_buf(),
        })
    }

    /// What a change does when its backup would pass a size limit.
    pub fn on_limit(&self) -> super::OnLimit {
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

    /// Saves `content`, the current content of workspace file `rel_path`, as a new
    /// version and makes it durable (file and directory fsync) before returning.
    /// A plain stream copy without size limits, for `fsgate backup restore` (the user's
    /// own action); the gateway uses [`save_file`](Self::save_file).
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
        self.save_with(rel_path, now, false, &mut fill)
            .map(|(r, _)| r)
    }

    /// Saves the current content of the opened workspace file `file` (path `rel_path`)
    /// within the `[backup]` limits: checked from its fstat before anything is copied,
    /// and again byte by byte while it is copied (sparse-aware, or cloned). Past a limit
    /// nothing is kept and the error is [`BackupError::TooLarge`].
    pub fn save_file(&self, rel_path: &str, file: &impl AsFd) -> Result<BackupRef, BackupError> {
        layout::validate_rel_path(rel_path)?;
        let (size, data) = sparse::data_bytes(file).map_err(BackupError::io("stat", rel_path))?;
        let lim = self.limits;
        if data > lim.max_file_bytes {
            return Err(too_large(
                rel_path,
                "max_file_bytes",
                data,
                lim.max_file_bytes,
            ));
        }
        if size > lim.max_sparse_bytes {
            return Err(too_large(
                rel_path,
                "max_sparse_bytes",
                size,
                lim.max_sparse_bytes,
            ));
        }
        let room = self.reserve_room(rel_path, data)?;
        let caps = Caps {
            data: lim.max_file_bytes.min(room),
            len: lim.max_sparse_bytes,
        };
        let original = self.is_first_change(rel_path);
        let mut fill = |dst: &mut File, target: &str| {
            clone_or_copy(file, &*dst, caps).map_err(|e| match e {
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
        let saved = self.save_with(rel_path, OffsetDateTime::now_utc(), original, &mut fill);
        self.settle_room(data, saved.as_ref().ok().map(|(_, stored)| *stored));
        let (saved, _) = saved?;
        self.note_changed(rel_path);
        // Only this file's count grew: keep it to `keep_versions` now, without a pass
        // over the whole store. The version is saved whatever the pruning does.
        match self.prune_path(rel_path) {
            Ok(report) if !report.removed.is_empty() => self.lock_quota().reports.push(report),
            Ok(_) => {}
            Err(e) => tracing::warn!("backup retention of {rel_path}: {e}"),
        }
        Ok(saved)
    }

    /// Reserves a fresh name for a version of `rel_path` and fills it with `fill`.
    fn save_with(
        &self,
        rel_path: &str,
        now: OffsetDateTime,
        original: bool,
        fill: &mut dyn FnMut(&mut File, &str) -> Result<Copied, BackupError>,
    ) -> Result<(BackupRef, u64), BackupError> {
        layout::validate_rel_path(rel_path)?;
        let dir_name = layout::dir_name(rel_path);
        // Retention in this process leaves the directory alone while we use it.
        let _claim = DirClaim::new(self, &dir_name);
        // Another process's prune may still remove an empty per-path directory between
        // our create_dir, open and create_new: start again in that case.
        for attempt in 0..MAX_DIR_ATTEMPTS {
            let reserved = self
                .open_path_dir(&dir_name)
                .and_then(|dir| self.reserve(&dir, &dir_name, now).map(|r| (dir, r)));
            match reserved {
                Ok((dir, (ts, data))) => {
                    let name = NewVersion {
                        dir: &dir,
                        dir_name: &dir_name,
                        rel_path,
                        ts,
                        original,
                    };
                    return self.finish_save(&name, data, fill);
                }
                Err(BackupError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    // Let the other process's prune pass before trying again.
                    std::thread::sleep(std::time::Duration::from_micros(50 * u64::from(attempt)));
                }
                Err(e) => return Err(e),
            }
        }
        Err(BackupError::Io {
            action: "create",
            target: dir_name.clone(),
            source: io::Error::other("directory keeps disappearing (concurrent prune?)"),
        })
    }

    /// The per-path directories in use by saves, locked.
    pub(crate) fn lock_saving(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.saving.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates (if needed) and opens the per-path directory.
    pub(crate) fn open_path_dir(&self, dir_name: &str) -> Result<Dir, BackupError> {
        match self.files.create_dir(dir_name) {
            Ok(()) => sync_dir(&self.files).map_err(BackupError::io("sync", FILES_DIR))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(BackupError::io("create", dir_name)(e)),
        }
        self.files
            .open_dir(dir_name)
            .map_err(BackupError::io("open", dir_name))
    }

    /// Picks a fresh timestamp and creates its data file with `create_new`, which is
    /// what makes the name ours even against another process using the same store.
    fn reserve(
        &self,
        dir: &Dir,
        dir_name: &str,
        now: OffsetDateTime,
    ) -> Result<(OffsetDateTime, File), BackupError> {
        let mut ts = self.next_ts(now);
        for _ in 0..MAX_NAME_ATTEMPTS {
            let name = format!("{}{DATA_SUFFIX}", layout::compact_ts(ts));
            // Readable too: a clone (`FICLONE`) is hashed by reading it back.
            let opts = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .clone();
            match dir.open_with(&name, &opts) {
                Ok(f) => return Ok((ts, f)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ts = self.next_ts(ts),
                Err(e) => return Err(BackupError::io("create", format!("{dir_name}/{name}"))(e)),
            }
        }
        Err(BackupError::Io {
            action: "create",
            target: dir_name.to_owned(),
            source: io::Error::other("no free timestamp"),
        })
    }

    /// Writes the content and then the sidecar, which commits the version. Returns it
    /// with the bytes of data it stores.
    fn finish_save(
        &self,
        new: &NewVersion<'_>,
        mut data: File,
        fill: &mut dyn FnMut(&mut File, &str) -> Result<Copied, BackupError>,
    ) -> Result<(BackupRef, u64), BackupError> {
        let (dir, dir_name) = (new.dir, new.dir_name);
        let stem = layout::compact_ts(new.ts);
        let data_name = format!("{stem}{DATA_SUFFIX}");
        let target = format!("{dir_name}/{data_name}");
        let copied = match fill(&mut data, &target) {
            Ok(c) => c,
            Err(e) => {
                drop(data);
                let _ = dir.remove_file(&data_name);
                return Err(e);
            }
        };
        let meta = Sidecar {
            format: 1,
            path: new.rel_path.to_owned(),
            ts: layout::rfc3339_ts(new.ts),
            sha256: copied.sha256,
            size: copied.size,
            stored: Some(copied.stored),
            original: new.original,
        };
        let committed = write_sidecar(dir, &stem, &meta, &data);
        drop(data);
        if let Err(e) = committed {
            let _ = dir.remove_file(&data_name);
            return Err(BackupError::io("write sidecar", target)(e));
        }
        sync_dir(dir).map_err(BackupError::io("sync", dir_name))?;
        let version = Version {
            dir: dir_name.to_owned(),
            stem,
            at: new.ts,
            meta,
        };
        tracing::debug!(backup = %version.to_ref().id, size = copied.size, "backup saved");
        Ok((version.to_ref(), copied.stored))
    }

    /// A timestamp after both `now` and every timestamp this store handed out before.
    fn next_ts(&self, now: OffsetDateTime) -> OffsetDateTime {
        let mut last = self.last_ts.lock().unwrap_or_else(|p| p.into_inner());
        let ts = if now > *last {
            now
        } else {
            *last + time::Duration::nanoseconds(1)
        };
        *last = ts;
        ts
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

    /// Opens one version of `rel_path`: the latest, or with `at` the one whose
    /// timestamp or id is `at`, else the latest saved at or before the time `at`.
    pub fn open_version(
        &self,
        rel_path: &str,
        at: Option<&str>,
    ) -> Result<(BackupRef, File), BackupError> {
        layout::validate_rel_path(rel_path)?;
        let not_found = || BackupError::NotFound {
            path: rel_path.to_owned(),
            at: at.map(str::to_owned),
        };
        let dir_name = layout::dir_name(rel_path);
        let dir = match self.files.open_dir(&dir_name) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(not_found()),
            Err(e) => return Err(BackupError::io("open", dir_name)(e)),
        };
        let versions: Vec<Version> = self
            .versions_in(&dir, &dir_name)?
            .into_iter()
            .filter(|v| v.meta.path == rel_path)
            .collect();
        let chosen = select(&versions, at)?.ok_or_else(not_found)?;
        let data_name = format!("{}{DATA_SUFFIX}", chosen.stem);
        let file = dir
            .open(&data_name)
            .map_err(BackupError::io("open", format!("{dir_name}/{data_name}")))?;
        Ok((chosen.to_ref(), file))
    }

    /// Every committed version whose path `wanted` accepts.
    pub(crate) fn scan(&self, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<Version>, BackupError> {
        let mut out = Vec::new();
        for entry in self
            .files
            .entries()
            .map_err(BackupError::io("list", FILES_DIR))?
        {
            let entry = entry.map_err(BackupError::io("list", FILES_DIR))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(name = ?entry.file_name(), "backup store: ignoring foreign entry");
                continue;
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                tracing::warn!(name, "backup store: ignoring non-directory entry");
                continue;
            }
            // Plain names decode to their path, so unwanted ones are skipped unread.
            if layout::decode_dir_name(&name).is_some_and(|p| !wanted(&p)) {
                continue;
            }
            let dir = match entry.open_dir() {
                Ok(d) => d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // pruned meanwhile
                Err(e) => return Err(BackupError::io("open", name)(e)),
            };
            out.extend(
                self.versions_in(&dir, &name)?
                    .into_iter()
                    .filter(|v| wanted(&v.meta.path)),
            );
        }
        Ok(out)
    }

    /// The committed versions in one per-path directory, oldest first. Sidecars that do
    /// not parse or do not match their file name are reported and skipped.
    pub(crate) fn versions_in(
        &self,
        dir: &Dir,
        dir_name: &str,
    ) -> Result<Vec<Version>, BackupError> {
        let mut out = Vec::new();
        for entry in dir.entries().map_err(BackupError::io("list", dir_name))? {
            let entry = entry.map_err(BackupError::io("list", dir_name))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(META_SUFFIX)) else {
                continue;
            };
            if stem.starts_with('.') {
                continue; // a sidecar being written
            }
            match read_sidecar(dir, dir_name, stem) {
                Ok(v) => out.push(v),
                Err(e) => tracing::warn!(error = %e, "backup store: skipping damaged version"),
            }
        }
        out.sort_by_key(|v| v.at);
        Ok(out)
    }
}

/// Picks the version `at` designates among `versions` (sorted oldest first).
fn select<'v>(
    versions: &'v [Version],
    at: Option<&str>,
) -> Result<Option<&'v Version>, BackupError> {
    let Some(at) = at else {
        return Ok(versions.last());
    };
    let exact = versions
        .iter()
        .find(|v| v.stem == at || v.meta.ts == at || format!("{}/{}", v.dir, v.stem) == at);
    if exact.is_some() {
        return Ok(exact);
    }
    let t = layout::parse_ts(at)?;
    Ok(versions.iter().rev().find(|v| v.at <= t))
}

/// Reads and checks the sidecar `<stem>.json` in `dir`.
fn read_sidecar(dir: &Dir, dir_name: &str, stem: &str) -> Result<Version, BackupError> {
    let id = format!("{dir_name}/{stem}");
    let corrupt = |reason: String| BackupError::Corrupt {
        id: id.clone(),
        reason,
    };
    let text = dir
        .read_to_string(format!("{stem}{META_SUFFIX}"))
        .map_err(|e| corrupt(format!("sidecar unreadable: {e}")))?;
    let meta: Sidecar =
        serde_json::from_str(&text).map_err(|e| corrupt(format!("sidecar: {e}")))?;
    let at = layout::parse_ts(&meta.ts).map_err(|e| corrupt(e.to_string()))?;
    if meta.format != 1
        || layout::compact_ts(at) != stem
        || layout::dir_name(&meta.path) != dir_name
    {
        return Err(corrupt(format!(
            "sidecar does not match its name ({} at {})",
            meta.path, meta.ts
        )));
    }
    Ok(Version {
        dir: dir_name.to_owned(),
        stem: stem.to_owned(),
        at,
        meta,
    })
}

/// Writes `<stem>.json` via a temp file and rename, so it appears complete or not at
/// all, after making both it and `data` durable (the caller then fsyncs the directory).
fn write_sidecar(dir: &Dir, stem: &str, meta: &Sidecar, data: &File) -> io::Result<()> {
    let tmp = format!(".{stem}{META_SUFFIX}{TMP_SUFFIX}");
    let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
    let result = (|| {
        let mut f = dir.open_with(&tmp, OpenOptions::new().write(true).create_new(true))?;
        f.write_all(&bytes)?;
        data.sync_all()?;
        f.sync_all()?;
        dir.rename(&tmp, dir, format!("{stem}{META_SUFFIX}"))
    })();
    if result.is_err() {
        let _ = dir.remove_file(&tmp);
    }
    result
}

/// Copies `src` into `dst`, returning the byte count and the SHA-256 (hex) of the bytes.
pub(crate) fn copy_hashing(src: &mut dyn Read, dst: &mut dyn Write) -> io::Result<(u64, String)> {
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

/// fsyncs a directory so that new, renamed or removed entries survive a crash.
///
/// cap-std holds directories as `O_PATH` descriptors, which fsync rejects (EBADF), so
/// this opens `.` beneath the handle for reading first.
pub(crate) fn sync_dir(dir: &Dir) -> io::Result<()> {
    #[cfg(unix)]
    {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsync(&fd)?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// `mkdir -p` with mode 0700 for every directory it creates.
fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Refuses a store directory another user owns or others can write.
fn check_ownership(root: &Dir, shown: &str) -> Result<(), BackupError> {
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

/// Creates `FORMAT` and `files/` in a new store, or checks an existing one.
fn init_layout(root: &Dir, shown: &str) -> Result<(), BackupError> {
    let unsafe_dir = |reason: String| BackupError::UnsafeDir {
        path: shown.to_owned(),
        reason,
    };
    // Only what this call creates needs syncing into the directory: a store opened
    // again (every start but the first) costs no fsync.
    let mut created = false;
    match root.read_to_string(FORMAT_FILE) {
        Ok(text) if text == FORMAT_TEXT => {}
        Ok(text) => {
            return Err(unsafe_dir(format!(
                "unknown store format {:?}",
                text.trim()
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut entries = root.entries().map_err(BackupError::io("list", shown))?;
            if entries.next().is_some() {
                return Err(unsafe_dir(
                    "directory is not empty and is not an fsgate backup store (no FORMAT file)"
                        .into(),
                ));
            }
            let mut f = root
                .open_with(FORMAT_FILE, OpenOptions::new().write(true).create_new(true))
                .map_err(BackupError::io("create", format!("{shown}/{FORMAT_FILE}")))?;
            f.write_all(FORMAT_TEXT.as_bytes())
                .and_then(|()| f.sync_all())
                .map_err(BackupError::io("write", format!("{shown}/{FORMAT_FILE}")))?;
            created = true;
        }
        Err(e) => return Err(BackupError::io("read", format!("{shown}/{FORMAT_FILE}"))(e)),
    }
    match root.create_dir(FILES_DIR) {
        Ok(()) => created = true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(BackupError::io("create", format!("{shown}/{FILES_DIR}"))(e)),
    }
    if created {
        sync_dir(root).map_err(BackupError::io("sync", shown))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
