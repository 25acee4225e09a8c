//! The temporary file behind an atomic write, without a name an agent could imitate.
//!
//! The content goes into an unnamed `O_TMPFILE` in the target's directory; it gets a
//! name only for the instant between `linkat` and the `renameat` over the target. That
//! name, and the name of the fallback (a file created with `create_new` where
//! `O_TMPFILE` or its `linkat` is unavailable), is 128 random bits: no agent can guess
//! it in advance, and no walk or listing treats it (or any other name) specially. The
//! watcher knows the gateway's own names in flight from
//! [`is_own_temp`](crate::is_own_temp), an in-memory set an agent cannot write to (the
//! names are made in `temp_name`).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::temp_name::TempName;
use crate::unnamed::{is_this_writes, link_unnamed};

/// False once linking an `O_TMPFILE` failed here (no capability, no `/proc`): later
/// writes go straight to the named fallback.
static TMPFILE_LINKS: AtomicBool = AtomicBool::new(true);

/// Where the content is being written.
pub(crate) enum Staged {
    /// An unnamed `O_TMPFILE`, made for this write or ahead of it.
    Unnamed(File, Made),
    /// A file created under its temporary name (the fallback).
    Named(File),
}

/// When an unnamed file was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Made {
    /// By this write.
    Here,
    /// Ahead of it ([`crate::spare`]): a failure to link it says nothing of files made
    /// now (the directory may have changed since, or be reached through another mount).
    Ahead,
}

impl Staged {
    pub(crate) fn file(&mut self) -> &mut File {
        match self {
            Staged::Unnamed(f, _) | Staged::Named(f) => f,
        }
    }
}

/// An unnamed file (`O_TMPFILE`) to write the new content into, mode 0600 until set,
/// where this filesystem has them and lets them be linked: nothing in the workspace
/// names it until published (else [`stage_named`]). The one made ahead for `parent`
/// ([`crate::spare`]) if there is one.
pub(crate) fn stage_unnamed(parent: &Dir) -> Option<Staged> {
    if !tmpfile_links() {
        return None;
    }
    if let Some(f) = crate::spare::take(parent) {
        return Some(Staged::Unnamed(f, Made::Ahead));
    }
    crate::spare::unnamed(parent, false).map(|f| Staged::Unnamed(f, Made::Here))
}

/// False once unnamed files proved unlinkable in the workspace.
pub(crate) fn tmpfile_links() -> bool {
    TMPFILE_LINKS.load(Ordering::Relaxed)
}

/// The fallback: a new file under the temporary name.
pub(crate) fn stage_named(parent: &Dir, name: &TempName) -> io::Result<Staged> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).mode(0o600);
    let f = parent.open_with(name.as_str(), &opts)?.into_std();
    Ok(Staged::Named(f))
}

/// Gives the staged file the name `target` in `parent`, replacing what was there.
/// With `fresh` (nothing was there when checked, so nothing was backed up), an unnamed
/// file is linked at `target` itself: it appears complete, with no temporary name and
/// no rename; if something took the name meanwhile, nothing is replaced and the error
/// is `AlreadyExists` (that file has no backup). `Ok(false)`: an unnamed file could not
/// be linked here (it is dropped; stage again with [`stage_named`]).
pub(crate) fn publish(
    parent: &Dir,
    staged: Staged,
    name: &TempName,
    target: &str,
    fresh: bool,
) -> io::Result<bool> {
    let file = match staged {
        Staged::Named(f) => f,
        Staged::Unnamed(f, made) => {
            let linked = if fresh {
                link_unnamed(&f, parent, target)
            } else {
                Err(rustix::io::Errno::EXIST)
            };
            match linked {
                Ok(()) => return Ok(true),
                Err(rustix::io::Errno::EXIST) if fresh => {
                    return Err(io::ErrorKind::AlreadyExists.into());
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return unlinkable(parent, e, made),
            }
            if let Err(e) = link_unnamed(&f, parent, name.as_str()) {
                return unlinkable(parent, e, made);
            }
            f
        }
    };
    drop(file);
    if let Err(e) = move_into_place(parent, name.as_str(), target, fresh) {
        let _ = parent.remove_file(name.as_str());
        return Err(e);
    }
    Ok(true)
}

/// Renames `from` to `to`; with `fresh`, never over a file that appeared meanwhile
/// (`RENAME_NOREPLACE`, where the filesystem has it).
pub fn move_into_place(parent: &Dir, from: &str, to: &str, fresh: bool) -> io::Result<()> {
    rename_between(parent, from, parent, to, fresh)
}

/// Renames `from` in `src` to `to` in `dst`; with `fresh`, never over an entry that
/// appeared meanwhile (`RENAME_NOREPLACE`, where the filesystem has it; elsewhere a
/// plain rename).
pub(crate) fn rename_between(
    src: &Dir,
    from: &str,
    dst: &Dir,
    to: &str,
    fresh: bool,
) -> io::Result<()> {
    if fresh {
        match rename_no_replace(src, from, dst, to) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    src.rename(from, dst, to)
}

/// Renames `from` in `src` to `to` in `dst` only if nothing is at `to`, with no
/// fallback: `EINVAL` or `ENOSYS` where the filesystem or kernel lacks the flag.
pub(crate) fn rename_no_replace(
    src: &Dir,
    from: &str,
    dst: &Dir,
    to: &str,
) -> Result<(), rustix::io::Errno> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{RenameFlags, renameat_with};
        renameat_with(src, from, dst, to, RenameFlags::NOREPLACE)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (src, from, dst, to);
        Err(rustix::io::Errno::NOSYS)
    }
}

/// An unnamed file that could not be linked: a failure of this write itself (no space,
/// no quota, a read-only or failing disk, its directory removed meanwhile) is its
/// error; anything else means unnamed files cannot be linked here (the filesystem, or
/// no `/proc` for the fallback), and later writes use a named file. Not so for a file
/// made ahead: this write alone goes on under a name.
fn unlinkable(parent: &Dir, e: rustix::io::Errno, made: Made) -> io::Result<bool> {
    let gone =
        e == rustix::io::Errno::NOENT && rustix::fs::fstat(parent).is_ok_and(|st| st.st_nlink == 0);
    if gone || is_this_writes(e) {
        return Err(e.into());
    }
    if made == Made::Ahead {
        tracing::debug!(error = %e, "a spare unnamed file could not be linked; this write uses a named one");
        return Ok(false);
    }
    Ok(no_tmpfile_links())
}

/// Notes that an `O_TMPFILE` cannot be linked here: later writes use a named file.
fn no_tmpfile_links() -> bool {
    TMPFILE_LINKS.store(false, Ordering::Relaxed);
    tracing::info!(
        "cannot link an O_TMPFILE in the workspace; atomic writes use a named temporary file"
    );
    false
}

/// Removes a staged file that will not be published.
pub(crate) fn discard(parent: &Dir, staged: Staged, name: &TempName) {
    if let Staged::Named(f) = staged {
        drop(f);
        let _ = parent.remove_file(name.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn staged_with(dir: &Dir, name: &TempName, text: &[u8]) -> Staged {
        let mut staged = match stage_unnamed(dir) {
            Some(s) => s,
            None => stage_named(dir, name).expect("stage"),
        };
        staged.file().write_all(text).expect("write");
        staged
    }

    /// A write whose directory was removed while it was staged fails as such, and does
    /// not turn unnamed staging off for the writes after it.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_directory_removed_meanwhile_fails_the_write_not_the_mechanism() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(tmp.path().join("d")).expect("mkdir");
        let dir =
            Dir::open_ambient_dir(tmp.path().join("d"), cap_std::ambient_authority()).expect("dir");
        let name = TempName::new().expect("name");
        let Some(mut staged) = stage_unnamed(&dir) else {
            panic!("this filesystem has O_TMPFILE: the test needs an unnamed file");
        };
        staged.file().write_all(b"new").expect("write");
        std::fs::remove_dir(tmp.path().join("d")).expect("rmdir");
        let err = publish(&dir, staged, &name, "a.txt", true).expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(
            TMPFILE_LINKS.load(Ordering::Relaxed),
            "unnamed staging still on"
        );
    }

    /// A file made ahead that cannot be linked here (made on another filesystem, as
    /// through another mount) sends this write to a named file, and leaves unnamed
    /// staging on for the writes after it.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_spare_that_cannot_be_linked_does_not_turn_unnamed_files_off() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        let shm = Dir::open_ambient_dir("/dev/shm", cap_std::ambient_authority())
            .expect("the test needs /dev/shm, another filesystem");
        let dev = |d: &Dir| rustix::fs::fstat(d).expect("fstat").st_dev;
        assert_ne!(dev(&dir), dev(&shm), "/dev/shm must be another filesystem");
        let elsewhere = crate::spare::unnamed(&shm, false).expect("tmpfs has O_TMPFILE");
        let name = TempName::new().expect("name");
        let published = publish(
            &dir,
            Staged::Unnamed(elsewhere, Made::Ahead),
            &name,
            "a",
            true,
        );
        assert!(
            !published.expect("not this write's failure"),
            "to be staged again"
        );
        assert!(!tmp.path().join("a").exists());
        assert!(
            TMPFILE_LINKS.load(Ordering::Relaxed),
            "unnamed staging still on"
        );
    }

    /// A new file is linked at its name directly; a name taken since the check (a file
    /// nobody backed up) is not replaced; a name known to be taken is; no temporary name
    /// is left in any case.
    #[test]
    fn fresh_files_are_linked_at_their_name_and_never_over_a_newcomer() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        let name = TempName::new().expect("name");
        let staged = staged_with(&dir, &name, b"new");
        assert!(publish(&dir, staged, &name, "a.txt", true).expect("publish"));
        assert_eq!(dir.read_to_string("a.txt").expect("read"), "new");
        dir.write("b.txt", "taken meanwhile").expect("write");
        let name = TempName::new().expect("name");
        let staged = staged_with(&dir, &name, b"mine");
        let err = publish(&dir, staged, &name, "b.txt", true).expect_err("newcomer kept");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            dir.read_to_string("b.txt").expect("read"),
            "taken meanwhile"
        );
        // The named fallback refuses it alike.
        let staged = stage_named(&dir, &name).expect("stage");
        let err = publish(&dir, staged, &name, "b.txt", true).expect_err("newcomer kept");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            dir.read_to_string("b.txt").expect("read"),
            "taken meanwhile"
        );
        let staged = staged_with(&dir, &name, b"mine");
        assert!(publish(&dir, staged, &name, "b.txt", false).expect("publish"));
        assert_eq!(dir.read_to_string("b.txt").expect("read"), "mine");
        let mut names: Vec<_> = dir
            .entries()
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "b.txt"]);
    }
}
