//! Opening the log's files at start-up: its directory, the lock, the active file, the
//! signing key and the checkpoint sink, all by path before Landlock.

use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use super::{Io, file_id, open_rw};
use crate::checkpoint::Sink;
use crate::config::AuditSettings;
use crate::error::AuditError;
use crate::keys;
use crate::series::lock_name;

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
            .filter(|n| !crate::series::is_sidecar(n) && crate::series::split_name(n).1.is_none())
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
}
