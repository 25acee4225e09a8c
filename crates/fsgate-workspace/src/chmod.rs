//! chmod: the permission bits of a file or directory, set through a descriptor opened
//! beneath the root (never through a name a symlink could lead elsewhere).

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use fsgate_base::path::RelPath;

use crate::error::WsError;
use crate::open::{OpenKind, open_beneath};
use crate::root::Workspace;

impl Workspace {
    /// The permission bits (`0o7777`) of the regular file or directory `real`.
    pub fn mode_of(&self, real: &RelPath) -> Result<u32, WsError> {
        let probe = open_beneath(&self.root, real, OpenKind::Path).map_err(WsError::from_io)?;
        let meta = probe.metadata()?;
        Ok(meta.mode() & 0o7777)
    }

    /// Sets the permission bits of the regular file or directory `real` to `mode`
    /// (`0o777` of it: set-ID and sticky bits are never set here) and syncs the change.
    /// A link, a special file, or a file with several hard links (it may be a link to
    /// a file outside) is refused.
    pub fn chmod(&self, real: &RelPath, mode: u32) -> Result<(), WsError> {
        let file = self.open_to_change_metadata(real)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
        file.sync_all()?;
        Ok(())
    }

    /// The regular file or directory `real`, opened (not `O_PATH`: fchmod and futimens
    /// need a real descriptor) for a change of its metadata. A link, a special file, or
    /// a file with several hard links (it may be a link to a file outside) is refused,
    /// and so is a name that changed between the look and the open.
    pub(crate) fn open_to_change_metadata(&self, real: &RelPath) -> Result<std::fs::File, WsError> {
        let probe = open_beneath(&self.root, real, OpenKind::Path).map_err(WsError::from_io)?;
        let meta = probe.metadata()?;
        let kind = if meta.is_dir() {
            OpenKind::Directory
        } else if meta.is_file() {
            OpenKind::ReadFile
        } else {
            return Err(WsError::Special("a link or special file"));
        };
        if meta.is_file() && meta.nlink() > 1 {
            return Err(WsError::HardLink(meta.nlink()));
        }
        let file = open_beneath(&self.root, real, kind).map_err(WsError::from_io)?;
        let now = file.metadata()?;
        if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
            return Err(WsError::Raced);
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chmod_sets_the_bits_and_never_follows_a_link() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("run.sh"), "#!/bin/sh\n").expect("write");
        std::os::unix::fs::symlink("run.sh", tmp.path().join("link")).expect("symlink");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = |p: &str| RelPath::parse_rooted(p).expect("rel");
        ws.chmod(&rel("/run.sh"), 0o4755).expect("chmod");
        assert_eq!(ws.mode_of(&rel("/run.sh")).expect("mode"), 0o755);
        assert!(ws.chmod(&rel("/link"), 0o700).is_err());
        assert_eq!(ws.mode_of(&rel("/run.sh")).expect("mode"), 0o755);
    }
}
