//! A new version file: a fresh timestamp reserved as its name (against this process
//! and any other using the store), the file created (a clone where it can be), the
//! content written with its record as the trailer.

use std::io;
use std::sync::atomic::Ordering;

use cap_std::fs::{Dir, File, OpenOptions};
use time::OffsetDateTime;

use super::durable::Unsynced;
use super::{BackupStore, Place, Version};
use crate::error::{BackupError, BackupRef};
use crate::layout::{self, Sidecar, VERSIONS_DIR};
use crate::packed;
use crate::sparse::Copied;
use fsgate_workspace::spare;

/// How many timestamps `save` tries before giving up on a name clash.
pub(super) const MAX_NAME_ATTEMPTS: u32 = 64;

/// Where a new version goes.
pub(super) struct NewVersion<'a> {
    dir: &'a Dir,
    shard: &'a str,
    dir_name: &'a str,
    rel_path: &'a str,
    ts: OffsetDateTime,
    original: bool,
    /// The permission bits of the file the content came from, when known.
    mode: Option<u32>,
}

impl BackupStore {
    /// Reserves a fresh name for a version of `rel_path` (at `now`; a session
    /// `original` or not; its file's permission bits `mode`, when known) and fills it
    /// with `fill`; the version is still to be synced, and with `beside` so is a new
    /// shard's entry in `versions/`.
    pub(super) fn save_with(
        &self,
        (rel_path, mode): (&str, Option<u32>),
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
            mode,
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
    pub(super) fn create_version(
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
    pub(super) fn finish_save(
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
            mode: new.mode,
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
    pub(super) fn next_ts(&self, now: OffsetDateTime) -> OffsetDateTime {
        let mut last = self.last_ts.lock().unwrap_or_else(|p| p.into_inner());
        let ts = if now > *last {
            now
        } else {
            *last + time::Duration::nanoseconds(1)
        };
        *last = ts;
        ts
    }
}
