//! Removing a directory tree: exactly what was inspected (and backed up), bottom-up,
//! through the walker's own directory handles.
//!
//! Not `remove_dir_all`: it would also delete what appeared after the inspection, and
//! what lies deeper than the walk looks. Each entry is unlinked from its opened parent
//! directory (`unlinkat`) only if the inspection listed the same (device, inode) under
//! the same path; anything else stops the removal, and a directory that still holds
//! something when its turn comes is not removed (`rmdir` fails), so unseen content is
//! never deleted.

use std::collections::HashMap;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, unlinkat};

use super::kind::FileKind;
use super::walk::{Entry, MAX_DEPTH, Mode, Visit, Visitor, walk_dir};
use super::{Workspace, WsError};
use crate::path::RelPath;

/// What an entry was when inspected: its kind and (device, inode).
type Seen = (FileKind, Option<(u64, u64)>);

/// The inspected entries, by path.
struct Plan<'a> {
    seen: HashMap<&'a RelPath, Seen>,
}

impl Plan<'_> {
    /// Refuses an entry the inspection did not list as it is now.
    fn check(&self, e: &Entry) -> Result<(), WsError> {
        match self.seen.get(&e.path) {
            Some((kind, id)) if *kind == e.kind && id.is_some() && *id == e.id => Ok(()),
            _ => Err(WsError::Unseen(e.path.clone())),
        }
    }
}

fn unlink(dir: &Dir, e: &Entry, flags: AtFlags) -> Result<(), WsError> {
    unlinkat(dir, e.name.as_str(), flags).map_err(|err| {
        if err == rustix::io::Errno::NOTEMPTY || err == rustix::io::Errno::EXIST {
            WsError::Unseen(e.path.clone())
        } else {
            WsError::from_io(err.into())
        }
    })
}

impl Visitor for Plan<'_> {
    fn visit(&mut self, dir: &Dir, e: &Entry) -> Result<Visit, WsError> {
        self.check(e)?;
        if e.kind == FileKind::Directory {
            return Ok(Visit::Descend);
        }
        unlink(dir, e, AtFlags::empty())?;
        Ok(Visit::Skip)
    }

    fn leave(&mut self, parent: &Dir, e: &Entry) -> Result<(), WsError> {
        unlink(parent, e, AtFlags::REMOVEDIR)
    }
}

impl Workspace {
    /// Removes the directory `real` and everything beneath it, provided it holds
    /// exactly `inspected` (from [`Workspace::inspect_tree`]); stops with
    /// [`WsError::Unseen`] at the first entry that is not as inspected. What was removed
    /// before the stop stays removed.
    pub(crate) fn remove_tree(
        &self,
        parent: &Dir,
        name: &str,
        real: &RelPath,
        inspected: &[Entry],
    ) -> Result<(), WsError> {
        let mut plan = Plan {
            seen: inspected
                .iter()
                .map(|e| (&e.path, (e.kind, e.id)))
                .collect(),
        };
        let dir = parent.open_dir_nofollow(name).map_err(WsError::from_io)?;
        let walked = walk_dir(dir, real, MAX_DEPTH, Mode::Strict, &mut plan)?;
        if let Some(at) = walked.cut {
            return Err(WsError::Unseen(at));
        }
        unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(|err| {
            if err == rustix::io::Errno::NOTEMPTY || err == rustix::io::Errno::EXIST {
                WsError::Unseen(real.clone())
            } else {
                WsError::from_io(err.into())
            }
        })
    }
}
