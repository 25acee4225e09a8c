//! Changing the workspace: atomic writes, mkdir, rm, rename.
//!
//! Writes never modify a file in place: the content goes into a temporary file in the
//! same directory (see [`super::atomic`]), is fsynced, and renamed over the target, so a
//! reader sees the old content or the new, never half of it.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use cap_std::fs::Dir;

use super::atomic::{self, Staged, TempName};
use super::open::open_dir;
use super::walk::Entry;
use super::{Workspace, WsError};
use crate::path::RelPath;

/// What [`Workspace::remove`] was checked to remove.
#[derive(Debug, Clone, Copy)]
pub enum Removal<'a> {
    /// A file or a link (an empty directory is still removed: it holds nothing).
    File,
    /// An empty directory.
    Dir,
    /// A directory holding exactly these entries (from [`Workspace::inspect_tree`]).
    Tree(&'a [Entry]),
}

/// What a write replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    /// True if a previous file was replaced.
    pub replaced: bool,
}

fn split(real: &RelPath) -> Result<(RelPath, &str), WsError> {
    let name = real.file_name().ok_or(WsError::IsDir)?;
    Ok((real.parent().unwrap_or_default(), name))
}

/// Makes an entry change in `dir` durable (the sync shared with concurrent changes in
/// the same directory). A failure is logged: the change is done, and undoing it would
/// be worse.
fn sync_dir(dir: &Dir) {
    if let Err(e) = super::dir_sync::sync_dir_shared(dir) {
        tracing::warn!("cannot sync a workspace directory after a change: {e}");
    }
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

    /// Atomically replaces (or creates) the file at `real` with `content`; `temp` is the
    /// name its temporary file has, if it ever has one (see [`super::atomic`]). Without
    /// `may_replace` (the caller found no file there, so backed none up) a file that
    /// appeared meanwhile is not replaced: the error is [`WsError::Raced`].
    pub fn write_atomic(
        &self,
        real: &RelPath,
        content: &[u8],
        temp: &TempName,
        may_replace: bool,
    ) -> Result<WriteOutcome, WsError> {
        let staged = self.stage_write(real, content, temp, may_replace)?;
        self.publish_write(staged, content, temp)
    }

    /// The first half of [`write_atomic`](Self::write_atomic): checks the target, and
    /// where the filesystem has unnamed files, writes and syncs the content into one.
    /// Nothing in the workspace names it, so this may run before the write's intent is
    /// durable; [`publish_write`](Self::publish_write) then gives it its name. Where
    /// the content must be staged under a temporary name, that waits for the publish.
    pub fn stage_write(
        &self,
        real: &RelPath,
        content: &[u8],
        temp: &TempName,
        may_replace: bool,
    ) -> Result<StagedWrite, WsError> {
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let (replaced, mode) = check_target(&parent, name)?;
        if replaced && !may_replace {
            return Err(WsError::Raced);
        }
        let staged = match atomic::stage_unnamed(&parent) {
            Some(s) => Some(fill(s, content, mode, &parent, temp)?),
            None => None,
        };
        Ok(StagedWrite {
            parent,
            name: name.to_string(),
            staged,
            mode,
            replaced,
        })
    }

    /// The second half of [`write_atomic`](Self::write_atomic): the staged content takes
    /// the target's name, and the directory is synced.
    pub fn publish_write(
        &self,
        w: StagedWrite,
        content: &[u8],
        temp: &TempName,
    ) -> Result<WriteOutcome, WsError> {
        let StagedWrite {
            parent,
            name,
            staged,
            mode,
            replaced,
        } = w;
        // A name taken after the check holds a file nobody backed up.
        let published = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::AlreadyExists => WsError::Raced,
            _ => WsError::from_io(e),
        };
        let staged = match staged {
            Some(s) => s,
            None => {
                let s = atomic::stage_named(&parent, temp).map_err(WsError::from_io)?;
                fill(s, content, mode, &parent, temp)?
            }
        };
        if !atomic::publish(&parent, staged, temp, &name, !replaced).map_err(published)? {
            // The unnamed file could not be linked here: once more, under its name.
            let staged = atomic::stage_named(&parent, temp).map_err(WsError::from_io)?;
            let staged = fill(staged, content, mode, &parent, temp)?;
            atomic::publish(&parent, staged, temp, &name, !replaced).map_err(published)?;
        }
        sync_dir(&parent);
        Ok(WriteOutcome { replaced })
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
    /// [`StatInfo::kind`](super::StatInfo)'s terms.
    pub fn entry_kind(&self, real: &RelPath) -> Result<super::FileKind, WsError> {
        let (parent_rel, name) = split(real)?;
        let parent = open_dir(&self.root, &parent_rel).map_err(WsError::from_io)?;
        let ft = parent
            .symlink_metadata(name)
            .map_err(WsError::from_io)?
            .file_type();
        Ok(super::FileKind::from_predicates(
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
            (false, Removal::File) => parent.remove_file(name).map_err(WsError::from_io)?,
        }
        sync_dir(&parent);
        Ok(())
    }

    /// Renames `from` to `to` (both canonical parents, final components not followed).
    pub fn rename(&self, from: &RelPath, to: &RelPath) -> Result<(), WsError> {
        let (fp, fname) = split(from)?;
        let (tp, tname) = split(to)?;
        let from_dir = open_dir(&self.root, &fp).map_err(WsError::from_io)?;
        let to_dir = open_dir(&self.root, &tp).map_err(WsError::from_io)?;
        match from_dir.rename(fname, &to_dir, tname) {
            Ok(()) => {
                sync_dir(&to_dir);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                Err(WsError::CrossDirRename)
            }
            Err(e) => Err(WsError::from_io(e)),
        }
    }
}

/// A write staged by [`Workspace::stage_write`], waiting to take its name.
pub struct StagedWrite {
    parent: Dir,
    name: String,
    /// The content in an unnamed file, written and synced; None: to be staged under
    /// the temporary name when published.
    staged: Option<Staged>,
    mode: u32,
    replaced: bool,
}

/// What is at `name` in `parent` now: whether a regular file will be replaced, and the
/// mode the new content gets (the replaced file's, else 0644). Anything but a regular
/// file with one link is refused.
fn check_target(parent: &Dir, name: &str) -> Result<(bool, u32), WsError> {
    let m = match parent.symlink_metadata(name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((false, 0o644)),
        Err(e) => return Err(WsError::from_io(e)),
    };
    let ft = m.file_type();
    if ft.is_dir() {
        return Err(WsError::IsDir);
    }
    if ft.is_symlink() {
        return Err(WsError::Raced);
    }
    if !ft.is_file() {
        return Err(WsError::Special("a special file"));
    }
    if cap_std::fs::MetadataExt::nlink(&m) > 1 {
        return Err(WsError::HardLink(cap_std::fs::MetadataExt::nlink(&m)));
    }
    Ok((true, cap_std::fs::MetadataExt::mode(&m) & 0o7777))
}

/// Writes `content` into the staged file, sets its mode and syncs it; on failure the
/// staged file is discarded.
fn fill(
    mut staged: Staged,
    content: &[u8],
    mode: u32,
    parent: &Dir,
    temp: &TempName,
) -> Result<Staged, WsError> {
    let f = staged.file();
    // sync_all, not sync_data: the mode set here is metadata fdatasync need not write,
    // and on a new inode fdatasync saves nothing (its size changed: the inode is
    // written either way).
    let done = f
        .write_all(content)
        .and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(mode)))
        .and_then(|()| f.sync_all());
    match done {
        Ok(()) => Ok(staged),
        Err(e) => {
            atomic::discard(parent, staged, temp);
            Err(WsError::from_io(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that appears at a new file's name after the gateway found none (and so
    /// backed none up) is never replaced; one it found (and backed up) is.
    #[test]
    fn a_new_file_never_replaces_a_file_that_appeared_meanwhile() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let rel = RelPath::parse_rooted("n.txt").expect("rel");
        std::fs::write(tmp.path().join("n.txt"), "the user's").expect("write");
        let temp = TempName::new().expect("name");
        let err = ws
            .write_atomic(&rel, b"agent", &temp, false)
            .expect_err("refused");
        assert!(matches!(err, WsError::Raced), "{err}");
        let text = std::fs::read_to_string(tmp.path().join("n.txt")).expect("read");
        assert_eq!(text, "the user's");
        let out = ws.write_atomic(&rel, b"agent", &temp, true).expect("write");
        assert!(out.replaced);
        let fresh = RelPath::parse_rooted("m.txt").expect("rel");
        let out = ws
            .write_atomic(&fresh, b"new", &temp, false)
            .expect("write");
        assert!(!out.replaced);
        let names = std::fs::read_dir(tmp.path()).expect("ls").count();
        assert_eq!(names, 2, "no temporary file left");
    }
}
