//! The log's files, as the leader sees them: the active file (append, sync, repair after
//! a failed write, disk space reserved ahead), rotation, and checkpoint writing. Every
//! file operation after start-up goes through one directory handle.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use ed25519_dalek::SigningKey;

use super::checkpoint::{self, Checkpoint, Sink};
use super::config::{AuditSettings, BATCH_SYNC_INTERVAL, FsyncMode};
use super::keys;
use super::merkle::CompactRange;
use super::series::{checkpoint_name, lock_name, rotated_name};
use crate::error::AuditError;

/// Disk space kept reserved beyond the end of the active file.
const RESERVE_BYTES: u64 = 256 * 1024;
/// Extend the reservation when less than this remains.
const RESERVE_LOW_WATER: u64 = 64 * 1024;

/// A failure the test hook can inject into the next batch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Write half of the data, then fail with "no space left on device".
    Write,
    /// Write everything, then fail the sync.
    Sync,
}

/// The open files of a log. Only the current leader touches it.
pub(crate) struct Io {
    /// The log's directory: every file operation after start-up goes through it.
    pub(crate) dir: Dir,
    /// Its path, for messages.
    pub(crate) dir_path: PathBuf,
    /// The active file's name.
    pub(crate) name: String,
    /// The active file, opened for appending.
    pub(crate) file: std::fs::File,
    /// Its device and inode, to recognise it at the log's path.
    file_id: (u64, u64),
    /// Bytes of the active file that hold committed records.
    len: u64,
    /// Seq of the first record in the active file.
    first_seq: u64,
    /// A failed write may have left bytes past `len`: cut them before writing again.
    needs_repair: bool,
    /// A sync failed since the last batch written whole: what the file holds past its
    /// last good sync may not be on disk, whatever a later sync says (Linux reports a
    /// writeback error once), so no checkpoint may name it until records are written
    /// and synced again.
    pub(crate) sync_failed: bool,
    /// A rotation renamed the active file but could not create the new one yet.
    rotated_away: bool,
    /// Since when written data has waited for a sync.
    unsynced_since: Option<Instant>,
    /// Disk space is reserved up to this offset.
    reserved_to: u64,
    /// The filesystem supports reserving space (`fallocate`).
    reserve_supported: bool,
    /// Signs checkpoints; also checks the existing one at start-up.
    pub(crate) signer: Option<SigningKey>,
    /// Until `checkpoint_writer` takes it over.
    pub(super) sink: Option<Sink>,
    /// Held (flock) for the life of the log: one writer per log.
    _lock: std::fs::File,
    /// Test hook: failures to inject into the next writes.
    faults: Option<(Fault, u32)>,
    /// Writes that succeed before the armed faults begin.
    fault_skip: u32,
}

fn write_err(what: &str, e: &std::io::Error) -> AuditError {
    AuditError::Write {
        kind: e.kind(),
        message: format!("{what}: {e}"),
    }
}

impl Io {
    /// Opens the directory, takes the lock, loads the key and the sink, opens the file.
    ///
    /// # Ambient Authority
    ///
    /// Opens `path`'s directory, the key file and the sink by path.
    pub(crate) fn open(path: &Path, settings: &AuditSettings) -> Result<Io, AuditError> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !super::series::is_sidecar(n) && super::series::split_name(n).1.is_none())
            .ok_or_else(|| {
                AuditError::Config(format!(
                    "{} is not usable as an audit log file name",
                    path.display()
                ))
            })?
            .to_owned();
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder
            .create(&dir_path)
            .map_err(|e| AuditError::io("create directory", &dir_path, &e))?;
        let dir = Dir::open_ambient_dir(&dir_path, cap_std::ambient_authority())
            .map_err(|e| AuditError::io("open directory", &dir_path, &e))?;
        let lock = open_rw(&dir, &lock_name(&name), false)
            .map_err(|e| AuditError::io("open", dir_path.join(lock_name(&name)), &e))?;
        #[cfg(unix)]
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |_| AuditError::Locked {
                path: path.to_owned(),
            },
        )?;
        let signer = match &settings.signing_key {
            Some(p) => Some(keys::load_signing_key(p)?),
            None => None,
        };
        let sink = match &settings.checkpoint_sink {
            Some(spec) => Some(Sink::open(spec)?),
            None => None,
        };
        let file = open_rw(&dir, &name, true)
            .map_err(|e| AuditError::io("open", dir_path.join(&name), &e))?;
        let file_id =
            file_id(&file).map_err(|e| AuditError::io("stat", dir_path.join(&name), &e))?;
        Ok(Io {
            dir,
            dir_path,
            name,
            file,
            file_id,
            len: 0,
            first_seq: 1,
            needs_repair: false,
            sync_failed: false,
            rotated_away: false,
            unsynced_since: None,
            reserved_to: 0,
            reserve_supported: true,
            signer,
            sink,
            _lock: lock,
            faults: None,
            fault_skip: 0,
        })
    }

    /// Sets what recovery found: committed length and first seq of the active file.
    pub(crate) fn set_active(&mut self, len: u64, first_seq: u64) {
        self.len = len;
        self.first_seq = first_seq;
    }

    /// Committed bytes in the active file.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The full path of a file in the log's directory (for messages).
    pub(crate) fn path_of(&self, name: &str) -> PathBuf {
        self.dir_path.join(name)
    }

    /// Since when written data has waited for a sync (None: all synced).
    pub(crate) fn unsynced_since(&self) -> Option<Instant> {
        self.unsynced_since
    }

    /// How long written data has waited for a sync.
    pub(crate) fn unsynced_for(&self) -> Duration {
        self.unsynced_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Arms the test hook.
    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fn inject(&mut self, fault: Fault, count: u32) {
        self.inject_after(fault, 0, count);
    }

    /// Arms the test hook after `skip` writes that succeed.
    #[cfg(any(test, feature = "fault-injection"))]
    pub(crate) fn inject_after(&mut self, fault: Fault, skip: u32, count: u32) {
        self.faults = (count > 0).then_some((fault, count));
        self.fault_skip = skip;
    }

    fn take_fault(&mut self) -> Option<Fault> {
        if self.faults.is_some() && self.fault_skip > 0 {
            self.fault_skip -= 1;
            return None;
        }
        let (fault, left) = self.faults.as_mut()?;
        let fault = *fault;
        *left -= 1;
        if *left == 0 {
            self.faults = None;
        }
        Some(fault)
    }

    /// Writes one segment of a batch (rotating first when `rotate_to` names the first seq
    /// of a new file) and syncs as `mode` requires. On error the file is cut back to its
    /// committed length (or marked for repair) and nothing of the segment counts.
    pub(crate) fn write_segment(
        &mut self,
        data: &[u8],
        rotate_to: Option<u64>,
        mode: FsyncMode,
    ) -> Result<(), AuditError> {
        if self.needs_repair {
            self.repair()?;
        }
        if let Some(seq) = rotate_to {
            self.rotate(seq)?;
        }
        self.check_in_place()
            .map_err(|e| write_err("check that the log file is in place", &e))?;
        let fault = self.take_fault();
        let result = match fault {
            Some(Fault::Write) => self
                .file
                .write_all(&data[..data.len() / 2])
                .and(Err(std::io::Error::from(std::io::ErrorKind::StorageFull))),
            _ => self.file.write_all(data),
        };
        if let Err(e) = result {
            self.needs_repair = true;
            let _ = self.repair();
            return Err(write_err("write", &e));
        }
        self.unsynced_since.get_or_insert_with(Instant::now);
        let must_sync = match mode {
            FsyncMode::Always => true,
            FsyncMode::Batch => self.unsynced_for() >= BATCH_SYNC_INTERVAL,
            FsyncMode::Never => false,
        };
        let synced = if fault == Some(Fault::Sync) {
            Err(std::io::Error::other("injected sync failure"))
        } else if must_sync {
            self.file.sync_data()
        } else {
            Ok(())
        };
        if let Err(e) = synced {
            // After a failed fsync the page cache cannot be trusted: drop the segment.
            self.sync_failed = true;
            self.needs_repair = true;
            let _ = self.repair();
            return Err(write_err("sync", &e));
        }
        if must_sync {
            self.unsynced_since = None;
        }
        self.len += data.len() as u64;
        Ok(())
    }

    /// Refuses to write into a log file that is no longer the one at the log's path: one
    /// that was unlinked (its directory removed), or whose path now names another file
    /// (the directory moved or replaced). A record written there would be lost to every
    /// reader of the log. (`stat` by path is not restricted by Landlock.) One `stat` of
    /// the path: if it names the open file's inode, that file is still linked there (its
    /// inode cannot be reused while it is open), so no `fstat` for its link count.
    fn check_in_place(&self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let at_path = match std::fs::metadata(self.path_of(&self.name)) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the log file was removed (its directory deleted?)",
                ));
            }
            Err(e) => return Err(e),
        };
        if (at_path.dev(), at_path.ino()) != self.file_id {
            return Err(std::io::Error::other(
                "the log's path now names another file (its directory was moved or replaced)",
            ));
        }
        Ok(())
    }

    /// Syncs written data, if any.
    pub(crate) fn sync(&mut self) -> Result<(), AuditError> {
        if self.unsynced_since.is_some() {
            self.file.sync_data().map_err(|e| {
                self.sync_failed = true;
                write_err("sync", &e)
            })?;
            self.unsynced_since = None;
        }
        Ok(())
    }

    /// Cuts the active file back to its committed length.
    fn repair(&mut self) -> Result<(), AuditError> {
        self.file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| write_err("cut back a failed write", &e))?;
        self.needs_repair = false;
        Ok(())
    }

    /// Closes the active file as `NAME.<first seq>` and starts a new one for `seq`.
    fn rotate(&mut self, seq: u64) -> Result<(), AuditError> {
        if !self.rotated_away {
            self.file.sync_data().map_err(|e| write_err("sync", &e))?;
            self.release_reservation();
            let to = rotated_name(&self.name, self.first_seq);
            self.dir
                .rename(&self.name, &self.dir, &to)
                .map_err(|e| write_err(&format!("rotate to {to}"), &e))?;
            self.rotated_away = true;
        }
        let file = open_rw(&self.dir, &self.name, true)
            .and_then(|f| f.set_len(0).map(|()| f))
            .map_err(|e| write_err("create the next log file", &e))?;
        let id = file_id(&file).map_err(|e| write_err("stat the next log file", &e))?;
        checkpoint::sync_dir(&self.dir).map_err(|e| write_err("sync directory", &e))?;
        self.file = file;
        self.file_id = id;
        self.rotated_away = false;
        self.len = 0;
        self.first_seq = seq;
        self.reserved_to = 0;
        self.unsynced_since = None;
        Ok(())
    }

    /// Keeps disk space reserved ahead of the log, so that a full disk is noticed (and
    /// requests refused) before a record cannot be written. Returns false when the
    /// reservation could not be extended.
    pub(crate) fn reserve(&mut self) -> bool {
        if !self.reserve_supported || self.reserved_to >= self.len + RESERVE_LOW_WATER {
            return true;
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{FallocateFlags, fallocate};
            match fallocate(
                &self.file,
                FallocateFlags::KEEP_SIZE,
                self.len,
                RESERVE_BYTES,
            ) {
                Ok(()) => {
                    self.reserved_to = self.len + RESERVE_BYTES;
                    true
                }
                Err(e) if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::DQUOT => false,
                Err(_) => {
                    self.reserve_supported = false;
                    true
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.reserve_supported = false;
            true
        }
    }

    /// Gives back the space reserved past the end of the file.
    pub(crate) fn release_reservation(&mut self) {
        if self.reserved_to > 0 {
            let _ = self.file.set_len(self.len);
            self.reserved_to = 0;
        }
    }

    /// The checkpoint writer, which takes over the sink; it shares the directory.
    pub(crate) fn checkpoint_writer(&mut self) -> Result<CkptWriter, AuditError> {
        Ok(CkptWriter {
            dir: self
                .dir
                .try_clone()
                .map_err(|e| AuditError::io("reopen", &self.dir_path, &e))?,
            dir_path: self.dir_path.clone(),
            name: checkpoint_name(&self.name),
            signer: self.signer.clone(),
            sink: self.sink.take(),
        })
    }
}

/// Writes checkpoints: the atomic checkpoint file, then the sink. Runs outside the
/// leader role, so appends go on while a checkpoint is synced.
pub(crate) struct CkptWriter {
    /// A second handle on the log's directory.
    dir: Dir,
    /// Its path, for messages.
    dir_path: PathBuf,
    /// `NAME.checkpoint`.
    name: String,
    /// Signs checkpoints, when configured.
    signer: Option<SigningKey>,
    /// The second place checkpoints go, when configured.
    sink: Option<Sink>,
}

impl CkptWriter {
    /// Writes a checkpoint of (`seq`, `head`); the record must already be on disk.
    pub(crate) fn write(
        &mut self,
        log_id: &str,
        (seq, head): (u64, &[u8; 32]),
        tree: Option<&CompactRange>,
        kind: &str,
    ) -> Result<(), AuditError> {
        let head = hex::encode(head);
        let ts = super::canonical::now_ts();
        let signer = self.signer.as_ref();
        let cp = Checkpoint::build(log_id, (seq, &head), kind, &ts, tree, signer);
        let mut line = cp.to_line();
        line.push('\n');
        checkpoint::write_atomic(&self.dir, &self.name, line.as_bytes()).map_err(|e| {
            AuditError::Checkpoint {
                message: format!("{}: {e}", self.dir_path.join(&self.name).display()),
            }
        })?;
        if let Some(sink) = &mut self.sink {
            sink.send(line.trim_end())
                .map_err(|message| AuditError::Checkpoint { message })?;
        }
        Ok(())
    }
}

/// The device and inode of an open file.
fn file_id(file: &std::fs::File) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// Opens (creating, mode 0600) a file in `dir` for writing; `append` for log files.
pub(crate) fn open_rw(dir: &Dir, name: &str, append: bool) -> std::io::Result<std::fs::File> {
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.read(true).create(true);
    if append {
        opts.append(true);
    } else {
        opts.write(true);
    }
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    dir.open_with(name, &opts).map(cap_std::fs::File::into_std)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log file alone (its directory kept) unlinked, renamed away, renamed and
    /// replaced, or replaced by a symlink to another file: the open file is no longer
    /// the one at the log's path, and writing is refused. A file only rewritten in
    /// place stays accepted.
    #[test]
    fn the_log_file_itself_moved_or_replaced_is_not_in_place() {
        let cases: [fn(&Path); 4] = [
            |p| std::fs::remove_file(p).unwrap(),
            |p| std::fs::rename(p, p.with_extension("old")).unwrap(),
            |p| {
                std::fs::rename(p, p.with_extension("old")).unwrap();
                std::fs::write(p, "").unwrap();
            },
            |p| {
                std::fs::write(p.with_extension("other"), "").unwrap();
                std::fs::remove_file(p).unwrap();
                std::os::unix::fs::symlink(p.with_extension("other"), p).unwrap();
            },
        ];
        for (i, change) in cases.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("audit.jsonl");
            let io = Io::open(&path, &AuditSettings::default()).unwrap();
            io.check_in_place().unwrap();
            std::fs::write(&path, "rewritten in place\n").unwrap();
            io.check_in_place().unwrap();
            change(&path);
            assert!(io.check_in_place().is_err(), "case {i}");
        }
    }
}
