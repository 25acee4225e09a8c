//! The log's files, as the leader sees them: the active file (append, sync, repair after
//! a failed write, disk space reserved ahead), rotation, and checkpoint writing. Every
//! file operation after start-up goes through one directory handle.
//!
//! This file holds the open files ([`Io`]), what they tell, and the faults tests inject;
//! `open`: opening them at start-up; `append`: writing a batch's segment, syncing,
//! repairing, rotating; `reserve`: the disk space reserved ahead; `ckpt_writer`:
//! checkpoints written outside the leader role.

mod append;
pub(crate) mod ckpt_writer;
mod open;
mod reserve;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use ed25519_dalek::SigningKey;

use super::checkpoint::Sink;
use crate::error::AuditError;

/// A failure the test hook can inject into the next batch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Write half of the data, then fail with "no space left on device".
    Write,
    /// Write everything, then fail the sync.
    Sync,
    /// Write half of the data, then panic: a defect's stand-in, for the leader's
    /// unwinding (the log must step its leader down, not hang its appenders).
    Panic,
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

pub(super) fn write_err(what: &str, e: &std::io::Error) -> AuditError {
    AuditError::Write {
        kind: e.kind(),
        message: format!("{what}: {e}"),
    }
}

impl Io {
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
}

/// The device and inode of an open file.
pub(super) fn file_id(file: &std::fs::File) -> std::io::Result<(u64, u64)> {
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
