//! [`BackupStore`]: saves, lists and opens versions through one directory handle.

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions};
use fsgate_base::sha256::Sha256;
use time::OffsetDateTime;

use super::config::{Retention, SizeLimits};
use super::counts::{Quota, Sweep};
use super::layout::{self, FILES_DIR, Sidecar, VERSIONS_DIR};
use super::packed;
use super::sparse::{Caps, Copied, CopyError, NoClone, Sizes, copy_sized};
use crate::config::BackupSettings;
use crate::error::{BackupError, BackupRef};
use fsgate_workspace::{spare, sync_pool};

/// How many timestamps `save` tries before giving up on a name clash.
const MAX_NAME_ATTEMPTS: u32 = 64;

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
    synced_shards: [AtomicBool; 256],
    /// The shards present were listed (and marked synced) once already.
    shards_listed: AtomicBool,
    /// Whether `FORMAT` and `versions/` were synced by this process (at its first
    /// backup: see `init`).
    layout_durable: AtomicBool,
    /// When the last pass over the whole store ran, and what it found.
    pub(crate) sweep: Mutex<Sweep>,
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
        }
    }

    /// Bytes of data the version stores (what counts against `max_total_bytes`).
    pub(crate) fn stored(&self) -> u64 {
        self.meta.stored.unwrap_or(self.meta.size)
    }
}

/// Where a new version goes.
struct NewVersion<'a> {
    dir: &'a Dir,
    shard: &'a str,
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
        super::init::init_layout(&root, &shown)?;
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
            synced_shards: std::array::from_fn(|_| AtomicBool::new(false)),
            shards_listed: AtomicBool::new(false),
            // Synced at each run's first backup, also when `FORMAT` reads back whole: it
            // may be in the page cache only, from a process that made the store and
            // ended before its first backup.
            layout_durable: AtomicBool::new(false),
            sweep: Mutex::new(Sweep::default()),
            no_clone: NoClone::default(),
            spares: AtomicBool::new(true),
            location: dir.to_path_buf(),
        })
    }

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
        let (saved, _, unsynced) = self.save_with(rel_path, (now, false, false), &mut fill)?;
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
        let st = super::sparse::sizes(file).map_err(BackupError::io("stat", rel_path))?;
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
    fn check_limits(&self, rel_path: &str, st: Sizes) -> Result<(), BackupError> {
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

    fn save_file_sized(
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
    fn save_unsynced(
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
        let saved = self.save_with(rel_path, (now, original, beside), &mut fill);
        self.settle_room(data, saved.as_ref().ok().map(|(_, stored, _)| *stored));
        let (saved, _, unsynced) = saved?;
        Ok((saved, unsynced))
    }

    /// What follows a durable save: the file is noted as changed, and only its own
    /// count grew, so it is kept to `keep_versions` now, without a pass over the whole
    /// store. The version is saved whatever the pruning does.
    fn after_save(&self, rel_path: &str) {
        self.note_changed(rel_path);
        match self.prune_path(rel_path) {
            Ok(report) if !report.removed.is_empty() => self.lock_quota().reports.push(report),
            Ok(_) => {}
            Err(e) => tracing::warn!("backup retention of {rel_path}: {e}"),
        }
    }

    /// Reserves a fresh name for a version of `rel_path` (at `now`; a session
    /// `original` or not) and fills it with `fill`; the version is still to be synced,
    /// and with `beside` so is a new shard's entry in `versions/`.
    fn save_with(
        &self,
        rel_path: &str,
        (now, original, beside): (OffsetDateTime, bool, bool),
        fill: &mut dyn FnMut(&mut File, &str) -> Result<Copied, BackupError>,
    ) -> Result<(BackupRef, u64, Unsynced), BackupError> {
        layout::validate_rel_path(rel_path)?;
        let dir_name = layout::dir_name(rel_path);
        let shard = layout::shard(rel_path);
        let (dir, versions) = if beside {
            let (dir, new) = self.open_shard_unsynced(&shard)?;
            let versions = match new {
                true => Some(
                    self.versions
                        .try_clone()
                        .map_err(BackupError::io("open", VERSIONS_DIR))?,
                ),
                false => None,
            };
            (dir, versions)
        } else {
            (self.open_shard(&shard)?, None)
        };
        let (ts, mut data) = self.reserve(&dir, &shard, &dir_name, now)?;
        let new = NewVersion {
            dir: &dir,
            shard: &shard,
            dir_name: &dir_name,
            rel_path,
            ts,
            original,
        };
        let (saved, stored, name) = self.finish_save(&new, &mut data, fill)?;
        let unsynced = Unsynced {
            data,
            dir,
            versions,
            name,
            shard,
        };
        Ok((saved, stored, unsynced))
    }

    /// Creates (if needed) and opens a shard directory. Its entry in `versions/` is
    /// synced before this process first saves into it, whoever created it: a version is
    /// durable only if the directory holding it is.
    pub(crate) fn open_shard(&self, shard: &str) -> Result<Dir, BackupError> {
        self.make_layout_durable()?;
        let synced = &self.synced_shards[shard_index(shard)];
        for _ in 0..2 {
            if !synced.load(Ordering::Acquire) {
                match self.versions.create_dir(shard) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(BackupError::io("create", shard)(e)),
                }
                self.sync_shards(shard)?;
            }
            match open_readable_dir(&self.versions, shard) {
                Ok(d) => return Ok(d),
                // Removed by hand since: make it again, once.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    synced.store(false, Ordering::Release);
                }
                Err(e) => return Err(BackupError::io("open", shard)(e)),
            }
        }
        Err(BackupError::io("open", shard)(
            io::ErrorKind::NotFound.into(),
        ))
    }

    /// [`open_shard`](Self::open_shard) that leaves the sync of a shard's entry in
    /// `versions/` to the caller: true if it is to be synced (this process has not).
    fn open_shard_unsynced(&self, shard: &str) -> Result<(Dir, bool), BackupError> {
        self.make_layout_durable()?;
        if self.synced_shards[shard_index(shard)].load(Ordering::Acquire)
            && let Ok(d) = open_readable_dir(&self.versions, shard)
        {
            return Ok((d, false));
        }
        match self.versions.create_dir(shard) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(BackupError::io("create", shard)(e)),
        }
        let dir =
            open_readable_dir(&self.versions, shard).map_err(BackupError::io("open", shard))?;
        Ok((dir, true))
    }

    /// Syncs the store's `FORMAT` and directory, once a run, before its first version.
    fn make_layout_durable(&self) -> Result<(), BackupError> {
        if self.layout_durable.load(Ordering::Acquire) {
            return Ok(());
        }
        super::init::sync_layout(&self.root)
            .map_err(BackupError::io("sync", self.location.display().to_string()))?;
        self.layout_durable.store(true, Ordering::Release);
        Ok(())
    }

    /// Syncs `versions/`, which makes `shard` (there now) durable. The first time, every
    /// shard listed before the sync too: one sync covers all the shards a store already
    /// has, not one each. Later, only `shard`: the others this process uses get their
    /// own first sync, so the listing is not repeated for each new shard of a new store.
    fn sync_shards(&self, shard: &str) -> Result<(), BackupError> {
        let present = if self.shards_listed.swap(true, Ordering::AcqRel) {
            Vec::new()
        } else {
            layout::names(&self.versions, VERSIONS_DIR)?
        };
        sync_dir(&self.versions).map_err(BackupError::io("sync", VERSIONS_DIR))?;
        let shards = present.iter().map(String::as_str).chain([shard]);
        for name in shards.filter(|n| layout::is_shard_name(n)) {
            self.synced_shards[shard_index(name)].store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Picks a fresh timestamp and creates its file, by linking an unnamed file made
    /// ahead or with `create_new`: either makes the name ours even against another
    /// process using the same store.
    pub(crate) fn reserve(
        &self,
        dir: &Dir,
        shard: &str,
        dir_name: &str,
        now: OffsetDateTime,
    ) -> Result<(OffsetDateTime, File), BackupError> {
        let mut ts = self.next_ts(now);
        // Spares are made in `versions/`, whatever the shard: each backup finds one.
        let mut spare = None;
        if self.spares.load(Ordering::Relaxed) {
            spare = spare::take(&self.versions);
            spare::want(&self.versions);
        }
        for _ in 0..MAX_NAME_ATTEMPTS {
            let name = layout::packed_name(dir_name, &layout::compact_ts(ts));
            match self.create_version(dir, &name, &mut spare) {
                Ok(f) => {
                    // Held until the file is closed, complete or removed: the sweep
                    // never takes a file whose saver is alive for a leftover. Where
                    // the filesystem has no locks, the sweep removes nothing either.
                    if let Err(e) = rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
                    {
                        tracing::debug!(error = %e, "backup store: cannot lock a new version");
                    }
                    return Ok((ts, f));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ts = self.next_ts(ts),
                Err(e) => return Err(BackupError::io("create", format!("{shard}/{name}"))(e)),
            }
        }
        Err(BackupError::Io {
            action: "create",
            target: format!("{shard}/{dir_name}"),
            source: io::Error::other("no free timestamp"),
        })
    }

    /// Creates the version file `name` in the shard `dir`, readable too (a clone,
    /// `FICLONE`, is hashed by reading it back): the unnamed file made ahead in
    /// `versions/` given that name, if there is one, else a new file. Either way the name
    /// is this call's alone (`AlreadyExists` if taken, the spare kept for the next name).
    fn create_version(
        &self,
        dir: &Dir,
        name: &str,
        spare: &mut Option<std::fs::File>,
    ) -> io::Result<File> {
        if let Some(f) = spare.take() {
            match spare::link(&f, dir, name) {
                Ok(()) => return Ok(File::from_std(f)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    *spare = Some(f);
                    return Err(e);
                }
                Err(e) => {
                    if spare::is_lasting(&e) {
                        self.spares.store(false, Ordering::Relaxed);
                    }
                    tracing::info!(error = %e, "backup store: versions are made in place (an unnamed file cannot be linked into a shard)");
                }
            }
        }
        let opts = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .clone();
        dir.open_with(name, &opts)
    }

    /// Writes the content, then its record as the trailer: once the file and its
    /// directory are synced ([`Unsynced`]), the version is durable. Returns it with the
    /// bytes of data it stores and its file's name; on failure the file is removed.
    fn finish_save(
        &self,
        new: &NewVersion<'_>,
        data: &mut File,
        fill: &mut dyn FnMut(&mut File, &str) -> Result<Copied, BackupError>,
    ) -> Result<(BackupRef, u64, String), BackupError> {
        let stem = layout::compact_ts(new.ts);
        let name = layout::packed_name(new.dir_name, &stem);
        let target = format!("{}/{name}", new.shard);
        let discard = || {
            let _ = new.dir.remove_file(&name);
        };
        let copied = match fill(data, &target) {
            Ok(c) => c,
            Err(e) => {
                discard();
                return Err(e);
            }
        };
        let meta = Sidecar {
            format: 2,
            path: new.rel_path.to_owned(),
            ts: layout::rfc3339_ts(new.ts),
            sha256: copied.sha256,
            size: copied.size,
            stored: Some(copied.stored),
            original: new.original,
        };
        // The file holds exactly the content (created empty; a copy or clone writes
        // nothing past the length it reports), so the trailer ends it: no truncate.
        if let Err(e) = packed::write_record(&*data, copied.size, &meta) {
            discard();
            return Err(BackupError::io("write", target)(e));
        }
        let version = Version {
            dir: new.dir_name.to_owned(),
            stem,
            at: new.ts,
            meta,
            place: Place::Packed {
                shard: new.shard.to_owned(),
            },
        };
        tracing::debug!(backup = %version.to_ref().id, size = copied.size, "backup written");
        Ok((version.to_ref(), copied.stored, name))
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
}

/// A version written and named, not yet synced: durable once its file and its shard
/// directory are (two syncs, which may run at once: until both have, the change that
/// needs the version waits, and a crash before leaves a file with no complete trailer,
/// which the sweep removes).
pub(crate) struct Unsynced {
    data: File,
    dir: Dir,
    /// `versions/`, when the shard's entry there is to be synced too.
    versions: Option<Dir>,
    name: String,
    shard: String,
}

impl Unsynced {
    /// Syncs the file, then its directory, on this thread; a file whose sync failed is
    /// removed.
    fn sync_now(self) -> Result<(), BackupError> {
        // fdatasync: a new file's length and blocks are what it needs to be read back.
        if let Err(e) = self.data.sync_data() {
            let target = self.target();
            drop(self.data);
            let _ = self.dir.remove_file(&self.name);
            return Err(BackupError::io("write", target)(e));
        }
        // Closed (its flock released) once complete.
        drop(self.data);
        if let Some(v) = &self.versions {
            sync_dir(v).map_err(BackupError::io("sync", VERSIONS_DIR))?;
        }
        sync_dir(&self.dir).map_err(BackupError::io("sync", self.shard))
    }

    /// Starts both syncs beside the caller.
    fn sync_beside(self) -> SyncingVersion {
        let target = self.target();
        let Unsynced {
            data,
            dir,
            versions,
            name,
            shard,
        } = self;
        let versions =
            versions.map(|v| (shard_index(&shard), sync_pool::start(move || sync_dir(&v))));
        let data = sync_pool::start(move || data.sync_data());
        let dir = sync_pool::start(move || {
            let synced = sync_dir(&dir);
            (dir, synced)
        });
        SyncingVersion {
            data,
            dir,
            versions,
            name,
            target,
        }
    }

    fn target(&self) -> String {
        format!("{}/{}", self.shard, self.name)
    }
}

/// The two syncs of a version, running beside the caller.
struct SyncingVersion {
    data: sync_pool::Pending<io::Result<()>>,
    dir: sync_pool::Pending<(Dir, io::Result<()>)>,
    /// A new shard's index, and the sync of its entry in `versions/`.
    versions: Option<(usize, sync_pool::Pending<io::Result<()>>)>,
    name: String,
    target: String,
}

impl SyncingVersion {
    /// Waits for every sync; Ok: the version is durable, and a new shard's index if its
    /// entry was synced.
    fn wait(self) -> Result<Option<usize>, BackupError> {
        let (dir, dir_synced) = self.dir.wait();
        let entry = self.versions.map(|(i, p)| (i, p.wait()));
        if let Err(e) = self.data.wait() {
            let _ = dir.remove_file(&self.name);
            return Err(BackupError::io("write", self.target)(e));
        }
        let shard = self.target.split('/').next().unwrap_or_default().to_owned();
        dir_synced.map_err(BackupError::io("sync", shard))?;
        match entry {
            Some((i, synced)) => synced
                .map(|()| Some(i))
                .map_err(BackupError::io("sync", VERSIONS_DIR)),
            None => Ok(None),
        }
    }
}

/// A version being made durable beside its caller
/// ([`BackupStore::save_opened_beside`]).
pub struct Saving<'a> {
    store: &'a BackupStore,
    rel_path: String,
    saved: BackupRef,
    syncs: SyncingVersion,
}

impl Saving<'_> {
    /// The version (written and named, maybe not yet durable).
    pub fn saved(&self) -> &BackupRef {
        &self.saved
    }

    /// Waits until the version is durable; Err: there is no backup (the caller must
    /// not change the file).
    pub fn wait(self) -> Result<BackupRef, BackupError> {
        if let Some(i) = self.syncs.wait()? {
            self.store.synced_shards[i].store(true, Ordering::Release);
        }
        self.store.after_save(&self.rel_path);
        Ok(self.saved)
    }
}

/// Opens the directory `name` (one component, not a symlink) of `parent` for reading:
/// a handle its sync can fsync as it is, where cap-std's `O_PATH` handle needs a second
/// open of `.` (and a close) for every sync.
fn open_readable_dir(parent: &Dir, name: &str) -> io::Result<Dir> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

/// The index of a shard directory's name (two hex digits) in `synced_shards`.
fn shard_index(shard: &str) -> usize {
    usize::from_str_radix(shard, 16).unwrap_or(0) % 256
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

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
