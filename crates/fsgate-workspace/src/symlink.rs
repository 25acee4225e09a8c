//! Symbolic links themselves: one made beneath the root (its target checked by the
//! caller), and an entry's metadata without following a final link, with its target.

use std::path::PathBuf;

use fsgate_base::path::RelPath;

use crate::error::WsError;
use crate::open::open_dir;
use crate::read::StatInfo;
use crate::read::stat_info;
use crate::root::Workspace;
use crate::write::{split, sync_dir};

/// The longest target a link may hold (the kernel's `PATH_MAX`, its final NUL
/// included).
pub const MAX_TARGET_BYTES: usize = 4095;

impl Workspace {
    /// Makes the symbolic link `real` leading to `target` (which the caller has checked
    /// stays in the workspace) and syncs its directory. Nothing is replaced: a name
    /// already there is [`WsError::Exists`].
    pub fn symlink(&self, target: &str, real: &RelPath) -> Result<(), WsError> {
        if target.is_empty() || target.len() > MAX_TARGET_BYTES {
            return Err(WsError::NameTooLong);
        }
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        // cap-std refuses an absolute target itself, a second guard.
        parent.symlink(target, name).map_err(WsError::from_io)?;
        sync_dir(&parent);
        Ok(())
    }

    /// The metadata of the entry at `real` itself (a final symlink not followed; the
    /// components before it have none), and for a link its target.
    pub fn lstat(&self, real: &RelPath) -> Result<StatInfo, WsError> {
        let Ok((parent_rel, name)) = split(real) else {
            return self.stat(real);
        };
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let fd = rustix::fs::openat(
            &parent,
            name,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| WsError::from_io(e.into()))?;
        let file = std::fs::File::from(fd);
        let mut info = stat_info(&file.metadata()?);
        if info.kind == crate::kind::FileKind::Symlink {
            // readlinkat with an empty name reads the link the O_PATH descriptor holds.
            let target = rustix::fs::readlinkat(&file, "", Vec::new())
                .map_err(|e| WsError::from_io(e.into()))?;
            use std::os::unix::ffi::OsStringExt;
            info.target = Some(PathBuf::from(std::ffi::OsString::from_vec(
                target.into_bytes(),
            )));
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_made_beneath_the_root_and_stated_without_following() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("a.txt"), "hello").expect("write");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = |p: &str| RelPath::parse_rooted(p).expect("rel");
        ws.symlink("a.txt", &rel("/b")).expect("symlink");
        let info = ws.lstat(&rel("/b")).expect("lstat");
        assert_eq!(info.kind, crate::FileKind::Symlink);
        assert_eq!(info.target, Some(PathBuf::from("a.txt")));
        assert_eq!(info.size, 5, "a link's size is its target's length");
        assert_eq!(ws.lstat(&rel("/a.txt")).expect("lstat").target, None);
        assert!(matches!(
            ws.symlink("a.txt", &rel("/b")),
            Err(WsError::Exists)
        ));
        assert!(ws.symlink("/etc/passwd", &rel("/c")).is_err());
        assert!(std::fs::symlink_metadata(tmp.path().join("c")).is_err());
    }
}
