//! Opening a path beneath the root handle without following any symlink.
//!
//! Paths reaching this module are already canonical (symlinks resolved beneath the root
//! by cap-std and re-checked by the policy), so any symlink met here was swapped in
//! during the request: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` refuses it, and
//! the type check afterwards is on what was opened, not on the name.

use std::fs::File;
use std::io;

use cap_std::fs::Dir;

use fsgate_base::path::RelPath;

/// How to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenKind {
    /// A file for reading; `O_NONBLOCK` so a FIFO cannot block the open.
    ReadFile,
    /// A directory handle.
    Directory,
    /// An `O_PATH` handle, for `fstat` only: opens anything without side effects.
    Path,
}

/// Opens `rel` beneath `root`, refusing symlinks in every component.
#[cfg(target_os = "linux")]
pub(crate) fn open_beneath(root: &Dir, rel: &RelPath, kind: OpenKind) -> io::Result<File> {
    open_beneath_path(root, rel.as_fs_path(), kind)
}

#[cfg(target_os = "linux")]
fn open_beneath_path(root: &Dir, rel: &std::path::Path, kind: OpenKind) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
    let flags = match kind {
        OpenKind::ReadFile => OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::RDONLY | OFlags::NONBLOCK,
        OpenKind::Directory => OFlags::CLOEXEC | OFlags::RDONLY | OFlags::DIRECTORY,
        // O_PATH admits no other flags but these.
        OpenKind::Path => OFlags::CLOEXEC | OFlags::PATH,
    };
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match openat2(root, rel, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(File::from(fd)),
        // Kernels before 5.6 have no openat2: fall back to cap-std, which still
        // resolves beneath the root (last component not followed).
        Err(rustix::io::Errno::NOSYS) => open_with_cap_std(root, rel, kind),
        Err(e) => Err(e.into()),
    }
}

/// Opens the file `name` (one component) of the directory `dir` for reading, refusing a
/// symlink: a walk's files, opened where the walk holds their directory (a handle it
/// reached without following any symlink) instead of from the root, component by
/// component, each time.
pub(crate) fn open_file_in(dir: &Dir, name: &str) -> io::Result<File> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    open_beneath_path(dir, std::path::Path::new(name), OpenKind::ReadFile)
}

/// Opens `rel` beneath `root` (non-Linux: cap-std's own beneath-resolution).
#[cfg(not(target_os = "linux"))]
pub(crate) fn open_beneath(root: &Dir, rel: &RelPath, kind: OpenKind) -> io::Result<File> {
    open_with_cap_std(root, rel.as_fs_path(), kind)
}

#[cfg(not(target_os = "linux"))]
fn open_beneath_path(root: &Dir, rel: &std::path::Path, kind: OpenKind) -> io::Result<File> {
    open_with_cap_std(root, rel, kind)
}

fn open_with_cap_std(root: &Dir, rel: &std::path::Path, kind: OpenKind) -> io::Result<File> {
    use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
    match kind {
        OpenKind::Directory => Ok(root.open_dir_nofollow(rel)?.into_std_file()),
        OpenKind::ReadFile | OpenKind::Path => {
            let mut opts = cap_std::fs::OpenOptions::new();
            opts.read(true).follow(FollowSymlinks::No);
            Ok(root.open_with(rel, &opts)?.into_std())
        }
    }
}

/// Opens a directory beneath the root as a cap-std handle.
pub(crate) fn open_dir(root: &Dir, rel: &RelPath) -> io::Result<Dir> {
    if rel.is_root() {
        return root.try_clone();
    }
    Ok(Dir::from_std_file(open_beneath(
        root,
        rel,
        OpenKind::Directory,
    )?))
}

/// Opens the directory `rel` beneath `root` without following any symbolic link on the
/// way (`ELOOP` if one is met), for a command that acts on the workspace outside the
/// gateway (`fsgate backup restore`): it goes exactly where the path says.
pub fn open_dir_no_links(root: &Dir, rel: &RelPath) -> io::Result<Dir> {
    open_dir(root, rel)
}
