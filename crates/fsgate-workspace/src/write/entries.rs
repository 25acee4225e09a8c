//! Changing entries rather than content: directories made (one, or every missing one),
//! an entry removed only if it is what the checks before saw, a rename that replaces only
//! what it may; each directory changed is synced.

use super::{Replace, allowed, split, sync_dir};
use crate::atomic;
use crate::error::WsError;
use crate::open::open_dir;
use crate::root::Workspace;
use crate::walk::Entry;
use fsgate_base::path::RelPath;

/// What [`Workspace::remove`] was checked to remove.
#[derive(Debug, Clone, Copy)]
pub enum Removal<'a> {
    /// A file or a link (an empty directory is still removed: it holds nothing).
    File,
    /// The regular file whose backup was saved (device, inode): not removed if another
    /// has taken its name ([`WsError::Replaced`]).
    Saved(u64, u64),
    /// A link or special file, so nothing was backed up: not removed if a regular file
    /// has taken its name ([`WsError::Raced`]).
    NotAFile,
    /// An empty directory.
    Dir,
    /// A directory holding exactly these entries (from [`Workspace::inspect_tree`]).
    Tree(&'a [Entry]),
}

impl Workspace {
    /// Creates every missing directory of `real` (canonical prefix + missing tail).
    pub fn create_dirs(&self, real: &RelPath) -> Result<(), WsError> {
        let mut cur = RelPath::root();
        for comp in real.components() {
            let parent = open_dir(&self.root, &cur).map_err(WsError::from_io)?;
            match parent.create_dir(comp) {
                Ok(()) => sync_dir(&parent),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let m = parent.symlink_metadata(comp)?;
                    if !m.is_dir() {
                        return Err(WsError::NotDir);
                    }
                }
                Err(e) => return Err(WsError::from_io(e)),
            }
            cur = cur.join(comp);
        }
        Ok(())
    }

    /// Creates the directory `real`.
    pub fn mkdir(&self, real: &RelPath, recursive: bool) -> Result<(), WsError> {
        if recursive {
            return self.create_dirs(real);
        }
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        parent.create_dir(name).map_err(WsError::from_io)?;
        sync_dir(&parent);
        Ok(())
    }

    /// The kind of the entry at `real` itself (a final symlink is not followed), in
    /// [`StatInfo::kind`](crate::StatInfo)'s terms.
    pub fn entry_kind(&self, real: &RelPath) -> Result<crate::kind::FileKind, WsError> {
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let ft = parent
            .symlink_metadata(name)
            .map_err(WsError::from_io)?
            .file_type();
        Ok(crate::kind::FileKind::from_predicates(
            ft.is_file(),
            ft.is_dir(),
            ft.is_symlink(),
        ))
    }

    /// Removes the entry at `real` without following a final symlink (removing a link
    /// removes the link), and syncs its directory. `expect` is what the checks before
    /// saw there: a directory is removed with what is beneath it only as the inspection
    /// listed it ([`Workspace::inspect_tree`]), else only if it is empty; and what was
    /// checked as a directory is not removed if something else now has its name.
    pub fn remove(&self, real: &RelPath, expect: Removal<'_>) -> Result<(), WsError> {
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let m = parent.symlink_metadata(name).map_err(WsError::from_io)?;
        match (m.is_dir(), expect) {
            (true, Removal::Tree(entries)) => self.remove_tree(&parent, name, real, entries)?,
            (true, _) => parent.remove_dir(name).map_err(WsError::from_io)?,
            // Swapped for a file (or link) since it was checked as a directory.
            (false, Removal::Dir | Removal::Tree(_)) => {
                return Err(WsError::Unseen(real.clone()));
            }
            (false, Removal::Saved(dev, ino)) => {
                use cap_std::fs::MetadataExt;
                if !m.is_file() || (m.dev(), m.ino()) != (dev, ino) {
                    return Err(WsError::Replaced);
                }
                parent.remove_file(name).map_err(WsError::from_io)?;
            }
            (false, Removal::NotAFile) if m.is_file() => return Err(WsError::Raced),
            (false, Removal::File | Removal::NotAFile) => {
                parent.remove_file(name).map_err(WsError::from_io)?;
            }
        }
        sync_dir(&parent);
        Ok(())
    }

    /// Renames `from` to `to` (both canonical parents, final components not followed);
    /// `may` says what the rename may replace at `to` (only a regular file is checked
    /// against [`Replace::Saved`]; a name found free is never taken from a file that
    /// appeared meanwhile, where the filesystem has `RENAME_NOREPLACE`). Both
    /// directories are synced.
    pub fn rename(&self, from: &RelPath, to: &RelPath, may: Replace) -> Result<(), WsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let from_dir = open_dir(&self.root, &fp).map_err(WsError::from_io)?;
        let to_dir = open_dir(&self.root, &tp).map_err(WsError::from_io)?;
        if let Replace::Saved(..) = may {
            let found = to_dir.symlink_metadata(tname).ok().filter(|m| m.is_file());
            use cap_std::fs::MetadataExt;
            allowed(may, found.map(|m| (m.dev(), m.ino())))?;
        }
        let fresh = may == Replace::Nothing;
        match atomic::rename_between(&from_dir, fname, &to_dir, tname, fresh) {
            Ok(()) => {
                sync_renamed(&from_dir, &to_dir, fp != tp);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && fresh => Err(WsError::Raced),
            Err(e) => Err(rename_error(e)),
        }
    }

    /// Renames `from` to `to` only if nothing at all is at `to`, in one step
    /// (`renameat2(RENAME_NOREPLACE)`): of several moves onto one free name, exactly one
    /// succeeds. Anything there is [`WsError::DestinationExists`]; a filesystem without
    /// the flag is [`WsError::NoReplaceUnsupported`] (never a look, then a rename). Both
    /// directories are synced.
    pub fn rename_no_replace(&self, from: &RelPath, to: &RelPath) -> Result<(), WsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let from_dir = open_dir(&self.root, &fp).map_err(WsError::from_io)?;
        let to_dir = open_dir(&self.root, &tp).map_err(WsError::from_io)?;
        match atomic::rename_no_replace(&from_dir, fname, &to_dir, tname) {
            Ok(()) => {
                sync_renamed(&from_dir, &to_dir, fp != tp);
                Ok(())
            }
            Err(rustix::io::Errno::EXIST) => Err(WsError::DestinationExists),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                Err(WsError::NoReplaceUnsupported)
            }
            Err(e) => Err(rename_error(e.into())),
        }
    }
}

/// Syncs the directory a rename put its entry in, and the one it left if another.
fn sync_renamed(from_dir: &cap_std::fs::Dir, to_dir: &cap_std::fs::Dir, two: bool) {
    sync_dir(to_dir);
    if two {
        sync_dir(from_dir);
    }
}

/// A rename's failure: `EXDEV` is the kernel sandbox refusing a cross-directory move.
fn rename_error(e: std::io::Error) -> WsError {
    if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) {
        WsError::CrossDirRename
    } else {
        WsError::from_io(e)
    }
}
