//! A version written and named made durable: its file's and its shard directory's
//! syncs, on this thread ([`Unsynced`]) or beside the caller ([`Saving`]).

use std::io;
use std::sync::atomic::Ordering;

use cap_std::fs::{Dir, File};

use super::shards::shard_index;
use super::{BackupStore, sync_dir};
use crate::error::{BackupError, BackupRef};
use crate::layout::VERSIONS_DIR;
use fsgate_workspace::sync_pool;

/// A version written and named, not yet synced: durable once its file and its shard
/// directory are (two syncs, which may run at once: until both have, the change that
/// needs the version waits, and a crash before leaves a file with no complete trailer,
/// which the sweep removes).
pub(crate) struct Unsynced {
    pub(super) data: File,
    pub(super) dir: Dir,
    /// `versions/`, when the shard's entry there is to be synced too.
    pub(super) versions: Option<Dir>,
    pub(super) name: String,
    pub(super) shard: String,
}

impl Unsynced {
    /// Syncs the file, then its directory, on this thread; a file whose sync failed is
    /// removed.
    pub(super) fn sync_now(self) -> Result<(), BackupError> {
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
    pub(super) fn sync_beside(self) -> SyncingVersion {
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

    pub(super) fn target(&self) -> String {
        format!("{}/{}", self.shard, self.name)
    }
}

/// The two syncs of a version, running beside the caller.
pub(super) struct SyncingVersion {
    pub(super) data: sync_pool::Pending<io::Result<()>>,
    pub(super) dir: sync_pool::Pending<(Dir, io::Result<()>)>,
    /// A new shard's index, and the sync of its entry in `versions/`.
    pub(super) versions: Option<(usize, sync_pool::Pending<io::Result<()>>)>,
    pub(super) name: String,
    pub(super) target: String,
}

impl SyncingVersion {
    /// Waits for every sync; Ok: the version is durable, and a new shard's index if its
    /// entry was synced.
    pub(super) fn wait(self) -> Result<Option<usize>, BackupError> {
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
    pub(super) store: &'a BackupStore,
    pub(super) rel_path: String,
    pub(super) saved: BackupRef,
    pub(super) syncs: SyncingVersion,
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
