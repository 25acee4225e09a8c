//! Resolving a lexical workspace path to where it really leads, beneath the root.
//!
//! Component by component: each prefix is `lstat`ed beneath the root handle (never
//! opened, so a FIFO cannot block), and a symlink's target is read and spliced in. A
//! target that is absolute, or whose `..` climbs above the root, leads outside and is
//! refused, as are loops. The caller re-checks the policy on the real path, so a link
//! named `notes` that points at `.git` cannot smuggle a read past it.
//!
//! (cap-std's `canonicalize` is not used: under Landlock it cannot read `/proc`, and its
//! fallback opens the final component, which blocks on a FIFO.)

use std::collections::VecDeque;
use std::io;
use std::path::{Component, Path};

use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// Most symlinks followed while resolving one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Whether the last component is followed if it is a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow every symlink (reads, writes, listings).
    All,
    /// Not the last component (rm and rename act on the link itself).
    NotFinal,
}

/// A path resolved beneath the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The real workspace-relative path (no symlinks left in it, except a final one
    /// with [`Follow::NotFinal`]).
    pub real: RelPath,
    /// True if the final entry exists.
    pub exists: bool,
    /// How many trailing components do not exist yet (0 if `exists`).
    pub missing: usize,
}

impl Workspace {
    /// Resolves `rel` beneath the root.
    pub fn resolve(&self, rel: &RelPath, follow: Follow) -> Result<Resolved, WsError> {
        match self.plain(rel, false) {
            Ok(()) => {
                return Ok(Resolved {
                    real: rel.clone(),
                    exists: true,
                    missing: 0,
                });
            }
            // Only the last name is missing, beneath a directory reached without a
            // symlink (a new file): what the walk would find, in two opens, not one
            // `lstat` per component.
            Err(rustix::io::Errno::NOENT)
                if rel
                    .parent()
                    .is_some_and(|parent| self.plain(&parent, true).is_ok()) =>
            {
                return Ok(Resolved {
                    real: rel.clone(),
                    exists: false,
                    missing: 1,
                });
            }
            Err(_) => {}
        }
        self.resolve_each(rel, follow)
    }

    /// Ok if `rel` exists (a directory, with `dir`) and no component of it is a symlink:
    /// then it is its own real path, whatever `follow` says. One `openat2(O_PATH,
    /// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` instead of an `lstat` per component;
    /// `ENOENT` then means a name is missing (a symlink is `ELOOP`). Any failure leaves
    /// the answer to [`Self::resolve_each`].
    #[cfg(target_os = "linux")]
    fn plain(&self, rel: &RelPath, dir: bool) -> rustix::io::Result<()> {
        use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut flags = OFlags::CLOEXEC | OFlags::PATH;
        if dir {
            flags |= OFlags::DIRECTORY;
        }
        openat2(&self.root, rel.as_fs_path(), flags, Mode::empty(), resolve).map(drop)
    }

    #[cfg(not(target_os = "linux"))]
    fn plain(&self, _rel: &RelPath, _dir: bool) -> rustix::io::Result<()> {
        Err(rustix::io::Errno::NOSYS)
    }

    /// Resolves `rel` component by component (see the module's documentation).
    fn resolve_each(&self, rel: &RelPath, follow: Follow) -> Result<Resolved, WsError> {
        let mut done = RelPath::root();
        let mut todo: VecDeque<String> = rel.components().map(str::to_string).collect();
        let mut links = 0usize;
        while let Some(comp) = todo.pop_front() {
            match comp.as_str() {
                "" | "." => continue,
                ".." => {
                    done = done.parent().ok_or(WsError::SymlinkEscape)?;
                    continue;
                }
                _ => {}
            }
            let candidate = done.join(&comp);
            let is_final = todo.is_empty();
            match self.root.symlink_metadata(candidate.as_fs_path()) {
                Ok(m)
                    if m.file_type().is_symlink() && !(is_final && follow == Follow::NotFinal) =>
                {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(WsError::SymlinkEscape);
                    }
                    let target = self
                        .root
                        .read_link_contents(candidate.as_fs_path())
                        .map_err(WsError::from_io)?;
                    for p in link_parts(&target)?.into_iter().rev() {
                        todo.push_front(p);
                    }
                }
                Ok(m) => {
                    if !is_final && !m.is_dir() {
                        return Err(WsError::NotDir);
                    }
                    done = candidate;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The rest does not exist yet: resolve it lexically.
                    let (real, missing) = lexically(candidate, todo)?;
                    if missing == 0 {
                        // `missing/..` leads back to an existing directory.
                        return self.resolve_each(&real, follow);
                    }
                    return Ok(Resolved {
                        real,
                        exists: false,
                        missing,
                    });
                }
                Err(e) => return Err(WsError::from_io(e)),
            }
        }
        Ok(Resolved {
            real: done,
            exists: true,
            missing: 0,
        })
    }
}

/// A symlink's target as components to resolve in its place (`..` kept); an absolute
/// target leads outside the root handle and is refused.
fn link_parts(target: &Path) -> Result<Vec<String>, WsError> {
    let mut parts = Vec::new();
    for c in target.components() {
        match c {
            Component::Normal(n) => {
                parts.push(n.to_str().ok_or(WsError::NotUtf8)?.to_string());
            }
            Component::ParentDir => parts.push("..".into()),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(WsError::SymlinkEscape);
            }
        }
    }
    Ok(parts)
}

/// `missing` (which does not exist) and the components after it, resolved lexically:
/// the path, and how many of its trailing components do not exist.
fn lexically(missing: RelPath, rest: VecDeque<String>) -> Result<(RelPath, usize), WsError> {
    let mut real = missing;
    let mut missing = 1usize;
    for c in rest {
        match c.as_str() {
            "" | "." => {}
            ".." => {
                real = real.parent().ok_or(WsError::SymlinkEscape)?;
                missing = missing.saturating_sub(1);
            }
            c => {
                real = real.join(c);
                missing += 1;
            }
        }
    }
    Ok((real, missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    /// A tree with a plain path, symlinks inside and out, a missing name, a FIFO.
    fn fixture() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("a/b/f.rs"), "x").unwrap();
        std::os::unix::fs::symlink("a/b", p.join("lb")).unwrap();
        std::os::unix::fs::symlink("b/f.rs", p.join("a/lf")).unwrap();
        std::os::unix::fs::symlink("/etc", p.join("out")).unwrap();
        std::os::unix::fs::symlink("../..", p.join("a/up")).unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, p.join("fifo"), rustix::fs::Mode::RUSR).unwrap();
        let ws = Workspace::open(p).unwrap();
        (dir, ws)
    }

    #[test]
    fn the_shortcut_resolves_as_each_component_would() {
        let (_dir, ws) = fixture();
        let paths = [
            "/",
            "a",
            "a/b",
            "a/b/f.rs",
            "lb",
            "lb/f.rs",
            "a/lf",
            "out",
            "out/passwd",
            "a/up",
            "a/up/x",
            "fifo",
            "nope",
            "a/nope/deeper",
            "a/b/f.rs/x",
            "fifo/x",
            "a/b/new.rs",
            "lb/new.rs",
            "a/lf/x",
            "out/x",
            "a/up/x/y",
        ];
        for p in paths {
            for follow in [Follow::All, Follow::NotFinal] {
                let fast = ws.resolve(&rel(p), follow);
                let each = ws.resolve_each(&rel(p), follow);
                assert_eq!(format!("{fast:?}"), format!("{each:?}"), "{p} {follow:?}");
            }
        }
    }

    #[test]
    fn symlinks_are_followed_beneath_the_root_only() {
        let (_dir, ws) = fixture();
        let real = |p: &str, f: Follow| ws.resolve(&rel(p), f).map(|r| r.real);
        assert_eq!(real("a/b/f.rs", Follow::All).unwrap(), rel("a/b/f.rs"));
        assert_eq!(real("lb/f.rs", Follow::All).unwrap(), rel("a/b/f.rs"));
        assert_eq!(real("a/lf", Follow::All).unwrap(), rel("a/b/f.rs"));
        assert_eq!(real("a/lf", Follow::NotFinal).unwrap(), rel("a/lf"));
        assert!(matches!(
            real("out", Follow::All),
            Err(WsError::SymlinkEscape)
        ));
        assert!(matches!(
            real("a/up", Follow::All),
            Err(WsError::SymlinkEscape)
        ));
        let missing = ws.resolve(&rel("a/nope/deeper"), Follow::All).unwrap();
        assert_eq!((missing.exists, missing.missing), (false, 2));
    }
}
