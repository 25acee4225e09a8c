//! Emptying a directory through descriptors, within a deadline: how a scratch dir is
//! emptied at the end of a run and how the trees killed gateways left are removed at the
//! next start, a bounded share at a time. Each directory is opened beneath its parent
//! without following a link, so nothing outside the tree is reached whatever it holds.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Names read from a directory before they are removed; the directory is read again for
/// the next ones (removing entries while a listing is read may skip some).
const BATCH: usize = 1024;

/// Directories deeper than this are left: one descriptor is held open per level.
const MAX_DEPTH: usize = 256;

/// Whether a pass removed everything or stopped at its deadline.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Emptied {
    All,
    Stopped,
}

/// Removes everything inside the directory open at `dir`, stopping once `deadline` has
/// passed (None: no deadline). A directory its owner made read-only (Go's module cache
/// is) or unreadable is made its owner's to change first; what cannot be removed ends
/// the pass with its error.
pub(super) fn empty_dir(
    dir: BorrowedFd<'_>,
    deadline: Option<Instant>,
) -> std::io::Result<Emptied> {
    empty_at(dir, deadline, 0).map_err(std::io::Error::from)
}

fn empty_at(
    dir: BorrowedFd<'_>,
    deadline: Option<Instant>,
    depth: usize,
) -> Result<Emptied, Errno> {
    loop {
        let names = names_in(dir)?;
        if names.is_empty() {
            return Ok(Emptied::All);
        }
        for (name, kind) in names {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Emptied::Stopped);
            }
            if remove_entry(dir, &name, kind, deadline, depth)? == Emptied::Stopped {
                return Ok(Emptied::Stopped);
            }
        }
    }
}

/// Up to [`BATCH`] names of `dir` (not `.` or `..`) with their types as the listing
/// gives them.
fn names_in(dir: BorrowedFd<'_>) -> Result<Vec<(CString, FileType)>, Errno> {
    let mut listing = Dir::read_from(dir)?;
    let mut names = Vec::new();
    while names.len() < BATCH {
        let Some(entry) = listing.read() else { break };
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push((name.to_owned(), entry.file_type()));
        }
    }
    Ok(names)
}

fn remove_entry(
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
        return Err(Errno::LOOP);
    }
    let child = open_beneath(parent, name)?;
    if empty_at(child.as_fd(), deadline, depth + 1)? == Emptied::Stopped {
        return Ok(Emptied::Stopped);
    }
    unlink_in(parent, name, AtFlags::REMOVEDIR)?;
    Ok(Emptied::All)
}

/// The directory `name` in `parent`, never through a link. One its owner cannot read
/// (mode 000) is made its owner's to read first.
fn open_beneath(parent: BorrowedFd<'_>, name: &CString) -> Result<OwnedFd, Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(parent, name.as_c_str(), flags, Mode::empty()) {
        Err(Errno::ACCESS) => {
            // Reached without following a link (a path descriptor needs no access),
            // changed through its descriptor's /proc entry, which leads to it alone.
            let path_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let at = rustix::fs::openat(parent, name.as_c_str(), path_flags, Mode::empty())?;
            let proc_path = format!("/proc/self/fd/{}", at.as_raw_fd());
            rustix::fs::chmod(proc_path.as_str(), Mode::RWXU)?;
            rustix::fs::openat(parent, name.as_c_str(), flags, Mode::empty())
        }
        opened => opened,
    }
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
mod tests {
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
        use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
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
        let emptied = std::thread::scope(|s| {
            s.spawn(|| {
                let mut caps = capabilities(None).expect("capget");
                let overrides = CapabilitySet::DAC_OVERRIDE
                    | CapabilitySet::DAC_READ_SEARCH
                    | CapabilitySet::FOWNER;
                caps.effective.remove(overrides);
                set_capabilities(None, caps).expect("capset");
                empty_dir(dir.as_fd(), None)
            })
            .join()
            .expect("thread")
        });
        assert_eq!(emptied.expect("empty"), Emptied::All);
        assert_eq!(std::fs::read_dir(&tree).expect("list").count(), 0);
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
