//! Emptying a directory through descriptors, within a deadline: how a scratch dir is
//! emptied at the end of a run and how the trees killed gateways left are removed at the
//! next start, a bounded share at a time. Each directory is opened beneath its parent
//! without following a link, so nothing outside the tree is reached whatever it holds.

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Names read from a directory before they are removed; the directory is read again for
/// the next ones (removing entries while a listing is read may skip some).
const BATCH: usize = 1024;

/// Directories at this depth are moved up to the top directory before they are
/// emptied: one descriptor is held open per level, so a deeper tree (an agent can make
/// one as deep as it likes) is flattened rather than left.
const MAX_DEPTH: usize = 64;

/// Entries of one directory that could not be removed, past which its pass gives up
/// (each is skipped when the directory is read again).
const MAX_FAILED: usize = 1024;

/// Whether a pass removed everything or stopped at its deadline.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Emptied {
    All,
    Stopped,
}

/// Removes everything inside the directory open at `dir`, stopping once `deadline` has
/// passed (None: no deadline). A directory its owner made read-only (Go's module cache
/// is) or unreadable is made its owner's to change first. What cannot be removed is
/// passed over, so that the rest still goes; the pass then ends with the first error.
pub(super) fn empty_dir(
    dir: BorrowedFd<'_>,
    deadline: Option<Instant>,
) -> std::io::Result<Emptied> {
    let mut top = Top { fd: dir, moved: 0 };
    empty_at(&mut top, dir, deadline, 0).map_err(std::io::Error::from)
}

/// The directory being emptied, where too deep a directory is moved.
struct Top<'a> {
    fd: BorrowedFd<'a>,
    moved: u64,
}

fn empty_at(
    top: &mut Top<'_>,
    dir: BorrowedFd<'_>,
    deadline: Option<Instant>,
    depth: usize,
) -> Result<Emptied, Errno> {
    let mut failed: HashSet<CString> = HashSet::new();
    let mut first_error = None;
    loop {
        let names = names_in(dir, &failed)?;
        if names.is_empty() {
            return first_error.map_or(Ok(Emptied::All), Err);
        }
        for (name, kind) in names {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Emptied::Stopped);
            }
            match remove_entry(top, dir, &name, kind, deadline, depth) {
                Ok(Emptied::All) => {}
                Ok(Emptied::Stopped) => return Ok(Emptied::Stopped),
                Err(e) => {
                    let first = *first_error.get_or_insert(e);
                    failed.insert(name);
                    if failed.len() >= MAX_FAILED {
                        return Err(first);
                    }
                }
            }
        }
    }
}

/// Up to [`BATCH`] names of `dir` (not `.` or `..`, nor those `skip` holds) with their
/// types as the listing gives them.
fn names_in(
    dir: BorrowedFd<'_>,
    skip: &HashSet<CString>,
) -> Result<Vec<(CString, FileType)>, Errno> {
    let mut listing = Dir::read_from(dir)?;
    let mut names = Vec::new();
    while names.len() < BATCH {
        let Some(entry) = listing.read() else { break };
        let entry = entry?;
        let name = entry.file_name();
        let dots = name.to_bytes() == b"." || name.to_bytes() == b"..";
        if !dots && !skip.contains(name) {
            names.push((name.to_owned(), entry.file_type()));
        }
    }
    Ok(names)
}

fn remove_entry(
    top: &mut Top<'_>,
    parent: BorrowedFd<'_>,
    name: &CString,
    kind: FileType,
    deadline: Option<Instant>,
    depth: usize,
) -> Result<Emptied, Errno> {
    let is_dir = match kind {
        FileType::Directory => true,
        FileType::Unknown => {
            let stat = rustix::fs::statat(parent, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)?;
            FileType::from_raw_mode(stat.st_mode) == FileType::Directory
        }
        _ => false,
    };
    if !is_dir {
        unlink_in(parent, name, AtFlags::empty())?;
        return Ok(Emptied::All);
    }
    if depth >= MAX_DEPTH {
        // Emptied from the top later, when its listing is read again.
        move_to_top(top, parent, name)?;
        return Ok(Emptied::All);
    }
    let child = open_beneath(parent, name)?;
    if empty_at(top, child.as_fd(), deadline, depth + 1)? == Emptied::Stopped {
        return Ok(Emptied::Stopped);
    }
    unlink_in(parent, name, AtFlags::REMOVEDIR)?;
    Ok(Emptied::All)
}

/// Moves the directory `name` of `parent` to the top directory under a name of its own
/// (a directory is moved with what is in it: no link inside is followed).
fn move_to_top(top: &mut Top<'_>, parent: BorrowedFd<'_>, name: &CString) -> Result<(), Errno> {
    use rustix::fs::{RenameFlags, renameat_with};
    loop {
        top.moved += 1;
        let to = format!(".fsgate-deep-{}-{}", std::process::id(), top.moved);
        match renameat_with(
            parent,
            name.as_c_str(),
            top.fd,
            to.as_str(),
            RenameFlags::NOREPLACE,
        ) {
            Err(Errno::EXIST) => {}
            Err(Errno::ACCESS) => {
                // Moving a directory rewrites its `..`: the owner needs write access to
                // it, to its parent and to the top.
                rustix::fs::fchmod(parent, Mode::RWXU)?;
                rustix::fs::fchmod(top.fd, Mode::RWXU)?;
                chmod_beneath(parent, name)?;
                return renameat_with(
                    parent,
                    name.as_c_str(),
                    top.fd,
                    to.as_str(),
                    RenameFlags::NOREPLACE,
                );
            }
            done => return done,
        }
    }
}

/// The directory `name` in `parent`, never through a link. One its owner cannot read
/// (mode 000) is made its owner's to read first.
fn open_beneath(parent: BorrowedFd<'_>, name: &CString) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(parent, name.as_c_str(), flags, Mode::empty()) {
        Err(Errno::ACCESS) => {
            chmod_beneath(parent, name)?;
            rustix::fs::openat(parent, name.as_c_str(), flags, Mode::empty())
        }
        opened => opened,
    }
}

/// Makes the directory `name` in `parent` its owner's to read and change, never
/// through a link: reached by a path descriptor (which needs no access), changed
/// through its descriptor's /proc entry, which leads to it alone.
fn chmod_beneath(parent: BorrowedFd<'_>, name: &CString) -> Result<(), Errno> {
    let path_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let at = rustix::fs::openat(parent, name.as_c_str(), path_flags, Mode::empty())?;
    let proc_path = format!("/proc/self/fd/{}", at.as_raw_fd());
    rustix::fs::chmod(proc_path.as_str(), Mode::RWXU)
}

/// Unlinks `name` in `parent`; refused for want of write access, makes `parent` its
/// owner's to change and tries once more.
fn unlink_in(parent: BorrowedFd<'_>, name: &CString, flags: AtFlags) -> Result<(), Errno> {
    match rustix::fs::unlinkat(parent, name.as_c_str(), flags) {
        Err(Errno::ACCESS) => {
            rustix::fs::fchmod(parent, Mode::RWXU)?;
            rustix::fs::unlinkat(parent, name.as_c_str(), flags)
        }
        done => done,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    use super::*;

    fn open(path: &std::path::Path) -> std::fs::File {
        std::fs::File::open(path).expect("open dir")
    }

    #[test]
    fn a_tree_is_emptied_read_only_dirs_included_and_no_link_is_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (tree, outside) = (tmp.path().join("tree"), tmp.path().join("outside"));
        std::fs::create_dir_all(tree.join("a/b/c")).expect("mkdir");
        std::fs::create_dir_all(outside.join("sub")).expect("mkdir");
        std::fs::write(outside.join("sub/precious"), "x").expect("write");
        std::fs::write(tree.join("a/b/c/f"), "x").expect("write");
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("sub"), tree.join("a/b/dirlink")).expect("symlink");
        // As Go leaves its module cache: files in a directory of mode 0555 (what the
        // fchmod is for; run as root, the mode does not stop the unlink).
        std::fs::create_dir(tree.join("ro")).expect("mkdir");
        std::fs::write(tree.join("ro/mod.go"), "x").expect("write");
        std::fs::set_permissions(tree.join("ro"), std::fs::Permissions::from_mode(0o555))
            .expect("chmod");
        let emptied = empty_dir(open(&tree).as_fd(), None).expect("empty");
        assert_eq!(emptied, Emptied::All);
        assert_eq!(std::fs::read_dir(&tree).expect("list").count(), 0);
        assert!(outside.join("sub/precious").exists(), "a link was followed");
    }

    /// As its owner without root's overrides (dropped on this thread alone): a
    /// directory of mode 000 and one of 0500 deep in the tree are emptied too.
    #[test]
    fn unreadable_and_read_only_dirs_are_emptied_by_their_owner() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("a/locked/inner")).expect("mkdir");
        std::fs::write(tree.join("a/locked/inner/f"), "x").expect("write");
        std::fs::create_dir(tree.join("a/ro")).expect("mkdir");
        std::fs::write(tree.join("a/ro/g"), "x").expect("write");
        let mode = |p: &str, m: u32| {
            std::fs::set_permissions(tree.join(p), std::fs::Permissions::from_mode(m))
                .expect("chmod");
        };
        mode("a/ro", 0o500);
        mode("a/locked", 0o000);
        let dir = open(&tree);
        let emptied = as_owner_only(|| empty_dir(dir.as_fd(), None));
        assert_eq!(emptied.expect("empty"), Emptied::All);
        assert_eq!(std::fs::read_dir(&tree).expect("list").count(), 0);
    }

    /// An agent can make a tree deeper than descriptors allow, and a file it cannot
    /// remove: neither stops the rest from going.
    #[test]
    fn a_tree_deeper_than_the_descriptors_and_an_unremovable_file_leave_the_rest_gone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().join("tree");
        std::fs::create_dir(&tree).expect("mkdir");
        // 300 levels, each a directory of mode 0500 below the top's first level (as
        // an agent may leave them: the move to the top needs the owner's write access).
        let mut at = open(&tree);
        for level in 0..300 {
            rustix::fs::mkdirat(&at, "d", Mode::RWXU).expect("mkdirat");
            rustix::fs::openat(
                &at,
                format!("f{level}"),
                OFlags::CREATE | OFlags::WRONLY,
                Mode::RUSR,
            )
            .expect("create");
            let next =
                rustix::fs::openat(&at, "d", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                    .expect("open level");
            if level > 0 {
                rustix::fs::fchmod(&at, Mode::RUSR | Mode::XUSR).expect("fchmod");
            }
            at = std::fs::File::from(next);
        }
        drop(at);
        let stuck = tree.join("0-stuck");
        std::fs::write(&stuck, "x").expect("write");
        let immutable = std::process::Command::new("chattr")
            .arg("+i")
            .arg(&stuck)
            .status();
        assert!(immutable.expect("chattr").success(), "chattr +i");
        for f in 0..50 {
            std::fs::write(tree.join(format!("z{f}")), "x").expect("write");
        }
        let emptied = as_owner_only(|| empty_dir(open(&tree).as_fd(), None));
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&stuck)
            .status();
        let err = emptied.expect_err("the immutable file is an error");
        assert_eq!(err.raw_os_error(), Some(libc_eperm()), "{err}");
        let left: Vec<_> = std::fs::read_dir(&tree)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("0-stuck")]);
        assert_eq!(
            empty_dir(open(&tree).as_fd(), None).expect("empty"),
            Emptied::All
        );
    }

    /// `f` on a thread without root's overrides of file modes.
    pub(in crate::cli::wall) fn as_owner_only<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut caps = capabilities(None).expect("capget");
                let overrides = CapabilitySet::DAC_OVERRIDE
                    | CapabilitySet::DAC_READ_SEARCH
                    | CapabilitySet::FOWNER;
                caps.effective.remove(overrides);
                set_capabilities(None, caps).expect("capset");
                f()
            })
            .join()
            .expect("thread")
        })
    }

    fn libc_eperm() -> i32 {
        Errno::PERM.raw_os_error()
    }

    #[test]
    fn a_pass_stops_at_its_deadline_and_the_next_goes_on() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tree = tmp.path().join("tree");
        for d in 0..4 {
            let dir = tree.join(format!("d{d}"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for f in 0..1500 {
                std::fs::write(dir.join(format!("f{f}")), "").expect("write");
            }
        }
        let count = |p: &std::path::Path| walk_count(p);
        let before = count(&tree);
        let passed = Instant::now();
        let first = empty_dir(open(&tree).as_fd(), Some(Instant::now())).expect("empty");
        assert_eq!(first, Emptied::Stopped);
        assert!(passed.elapsed() < Duration::from_secs(1));
        assert_eq!(
            count(&tree),
            before,
            "a pass past its deadline removed something"
        );
        let mut passes = 0;
        loop {
            passes += 1;
            let deadline = Instant::now() + Duration::from_millis(2);
            match empty_dir(open(&tree).as_fd(), Some(deadline)).expect("empty") {
                Emptied::All => break,
                Emptied::Stopped => assert!(count(&tree) > 0),
            }
            assert!(passes < 100_000, "no progress");
        }
        assert!(passes > 1, "6,000 files went in one 2 ms pass");
        assert_eq!(count(&tree), 0);
    }

    fn walk_count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).expect("list").fold(0, |n, e| {
            let e = e.expect("entry");
            let below = if e.file_type().expect("type").is_dir() {
                walk_count(&e.path())
            } else {
                0
            };
            n + 1 + below
        })
    }
}
