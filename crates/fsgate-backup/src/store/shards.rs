//! The shard directories under `versions/`: created and opened, and their entries
//! (and the store's `FORMAT`) synced once a run. The first time a run meets a shard it
//! has not synced, a helper makes every missing shard at once, with one sync of
//! `versions/`: in a new store, the next backups then find their shard made and synced
//! instead of each making its own (a `mkdir` and one more sync on the request's path).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use cap_std::fs::Dir;

use super::{BackupStore, sync_dir};
use crate::error::BackupError;
use crate::layout::{self, VERSIONS_DIR};

impl BackupStore {
    /// Creates (if needed) and opens a shard directory. Its entry in `versions/` is
    /// synced before this process first saves into it, whoever created it: a version is
    /// durable only if the directory holding it is.
    pub(crate) fn open_shard(&self, shard: &str) -> Result<Dir, BackupError> {
        self.make_layout_durable()?;
        let synced = &self.synced_shards[shard_index(shard)];
        for _ in 0..2 {
            if !synced.load(Ordering::Acquire) {
                self.make_every_shard_ahead();
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
    pub(super) fn open_shard_unsynced(&self, shard: &str) -> Result<(Dir, bool), BackupError> {
        self.make_layout_durable()?;
        if self.synced_shards[shard_index(shard)].load(Ordering::Acquire)
            && let Ok(d) = open_readable_dir(&self.versions, shard)
        {
            return Ok((d, false));
        }
        self.make_every_shard_ahead();
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
    pub(super) fn make_layout_durable(&self) -> Result<(), BackupError> {
        if self.layout_durable.load(Ordering::Acquire) {
            return Ok(());
        }
        crate::init::sync_layout(&self.root)
            .map_err(BackupError::io("sync", self.location.display().to_string()))?;
        self.layout_durable.store(true, Ordering::Release);
        Ok(())
    }

    /// Syncs `versions/`, which makes `shard` (there now) durable. The first time, every
    /// shard listed before the sync too: one sync covers all the shards a store already
    /// has, not one each. Later, only `shard`: the others this process uses get their
    /// own first sync, so the listing is not repeated for each new shard of a new store.
    pub(super) fn sync_shards(&self, shard: &str) -> Result<(), BackupError> {
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
}

impl BackupStore {
    /// Hands a helper, once a run, the making of every shard still missing and one sync
    /// of `versions/` for all of them; they then count as synced. Nothing waits for it
    /// (never a request's thread): a backup meanwhile makes and syncs its own shard as
    /// before.
    fn make_every_shard_ahead(&self) {
        if self.shards_ahead.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(versions) = self.versions.try_clone() else {
            return;
        };
        let synced = std::sync::Arc::clone(&self.synced_shards);
        // No helper free now: the next one done with a job makes them.
        fsgate_workspace::sync_pool::offer_or_later(move || every_shard(&versions, &synced));
    }
}

/// Makes each of the 256 shards in `versions` that is missing, syncs `versions` once,
/// then marks every shard that was there before that sync as synced.
fn every_shard(versions: &Dir, synced: &[AtomicBool; 256]) {
    let mut present = [false; 256];
    for (i, there) in present.iter_mut().enumerate() {
        if synced[i].load(Ordering::Acquire) {
            continue;
        }
        match versions.create_dir(format!("{i:02x}")) {
            Ok(()) => *there = true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => *there = true,
            Err(e) => {
                tracing::debug!(error = %e, "backup store: shards not made ahead");
                break;
            }
        }
    }
    if let Err(e) = sync_dir(versions) {
        // A write-back error is reported once: say it where a person sees it. A
        // filesystem that cannot sync directories at all says so on every backup.
        if fsgate_workspace::cannot_sync_dirs(&e) {
            tracing::debug!(error = %e, "backup store: shards made ahead not synced");
        } else {
            tracing::warn!(error = %e, "backup store: shards made ahead not synced");
        }
        return;
    }
    for (flag, _) in synced.iter().zip(present).filter(|(_, there)| *there) {
        flag.store(true, Ordering::Release);
    }
}

/// Opens the directory `name` (one component, not a symlink) of `parent` for reading:
/// a handle its sync can fsync as it is, where cap-std's `O_PATH` handle needs a second
/// open of `.` (and a close) for every sync.
pub(super) fn open_readable_dir(parent: &Dir, name: &str) -> io::Result<Dir> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

/// The index of a shard directory's name (two hex digits) in `synced_shards`.
pub(super) fn shard_index(shard: &str) -> usize {
    usize::from_str_radix(shard, 16).unwrap_or(0) % 256
}
