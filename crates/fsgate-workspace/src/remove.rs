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
use cap_std::fs::{Dir, MetadataExt};
use rustix::fs::{AtFlags, unlinkat};

use super::kind::FileKind;
use super::walk::{Entry, MAX_DEPTH, Mode, Visit, Visitor, walk_dir};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

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

/// Unlinks `e` from `dir` if the name still holds the entry listed: the listing may be
/// old (a directory's entries are listed before its earlier siblings' subtrees are
/// removed), and a name swapped since must not be deleted.
fn unlink(dir: &Dir, e: &Entry, flags: AtFlags) -> Result<(), WsError> {
    let now = dir.symlink_metadata(&e.name).map_err(WsError::from_io)?;
    if e.id != Some((now.dev(), now.ino())) {
        return Err(WsError::Unseen(e.path.clone()));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `plan`, calling `between` after the visit of `after`.
    struct Racing<'a, 'b> {
        plan: Plan<'a>,
        after: &'b str,
        between: &'b mut dyn FnMut(),
    }

    impl Visitor for Racing<'_, '_> {
        fn visit(&mut self, dir: &Dir, e: &Entry) -> Result<Visit, WsError> {
            let v = self.plan.visit(dir, e)?;
            if e.path.as_str() == self.after {
                (self.between)();
            }
            Ok(v)
        }

        fn leave(&mut self, parent: &Dir, e: &Entry) -> Result<(), WsError> {
            self.plan.leave(parent, e)
        }
    }

    #[test]
    fn a_name_swapped_after_the_listing_is_not_deleted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        std::fs::create_dir(tmp.path().join("t")).expect("mkdir");
        std::fs::write(tmp.path().join("t/a"), "a").expect("write");
        std::fs::write(tmp.path().join("t/b"), "b").expect("write");
        std::fs::write(tmp.path().join("user.txt"), "keep").expect("write");
        let t = RelPath::parse_rooted("t").expect("path");
        let inspected = ws.inspect_tree(&t).expect("inspect");
        // t's entries are listed; while `a` goes, the user's file is moved over `b`.
        let (from, to) = (tmp.path().join("user.txt"), tmp.path().join("t/b"));
        let mut swap = || std::fs::rename(&from, &to).expect("mv");
        let mut racing = Racing {
            plan: Plan {
                seen: inspected
                    .iter()
                    .map(|e| (&e.path, (e.kind, e.id)))
                    .collect(),
            },
            after: "t/a",
            between: &mut swap,
        };
        let dir = ws.root.open_dir_nofollow("t").expect("open");
        let got = walk_dir(dir, &t, MAX_DEPTH, Mode::Strict, &mut racing);
        assert!(matches!(got, Err(WsError::Unseen(_))), "{got:?}");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("t/b")).expect("kept"),
            "keep"
        );
    }
}
