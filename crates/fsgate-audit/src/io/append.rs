//! Writing a batch's segment to the active file (checked in place first), syncing it,
//! cutting back a failed write, and rotating to a new file.

use std::io::Write;
use std::time::Instant;

use super::{Fault, Io, file_id, open_rw, write_err};
use crate::checkpoint::{self};
use crate::config::{BATCH_SYNC_INTERVAL, FsyncMode};
use crate::error::AuditError;
use crate::series::rotated_name;

impl Io {
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
            Some(Fault::Panic) => {
                let _ = self.file.write_all(&data[..data.len() / 2]);
                panic!("injected panic in the middle of an audit write");
            }
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
    pub(super) fn check_in_place(&self) -> std::io::Result<()> {
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
    pub(super) fn repair(&mut self) -> Result<(), AuditError> {
        self.file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| write_err("cut back a failed write", &e))?;
        self.needs_repair = false;
        Ok(())
    }

    /// Closes the active file as `NAME.<first seq>` and starts a new one for `seq`.
    pub(super) fn rotate(&mut self, seq: u64) -> Result<(), AuditError> {
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
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::AuditSettings;

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
