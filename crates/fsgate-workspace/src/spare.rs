//! Unnamed files made ahead of the writes that fill them.
//!
//! Making a new inode is the costliest step of a write before its syncs: on ext4
//! without a journal, finding a free inode skips every one freed in the last minutes
//! (profiled at 70-290 us per `O_TMPFILE` here, most of a record's sync). So once a
//! write's syncs are under way (a new file's content syncing, or its name durable), a
//! helper makes the next unnamed file for the same directory ([`want`], [`refill`]),
//! and the next write there [`take`]s it instead of making its own. A
//! spare is an `O_TMPFILE`, mode 0600, with no name: nothing in the workspace or the
//! backup store can see it, and it is filled, synced and linked exactly as a file made
//! on the spot would be (the durability order of a write does not change).
//!
//! At most [`MAX_SPARES`] are kept, one per directory, the directories last written (a
//! spare unused for [`MIN_KEPT`] gives way to another directory's, never sooner);
//! each holds its directory open, so that the directory's identity cannot be reused by
//! another while a spare is kept for it. A spare is used only while it is what a file
//! made now would be: made within [`MAX_AGE`], its directory's group and mode (a
//! set-group-ID directory's group) unchanged; a removed directory's is freed. An idle
//! gateway keeps its spares (no timer wakes it to drop them); closing the gateway frees
//! them. A crash leaves them to the
//! filesystem's orphan cleanup (ext4 without a journal: `fsck`), as it does any unnamed
//! file a write was filling.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use cap_std::fs::Dir;

/// Directories with a spare at most.
pub const MAX_SPARES: usize = 8;

/// A spare is given up for another directory's only once kept this long.
pub const MIN_KEPT: Duration = Duration::from_secs(10);

/// A spare older than this is not used: what a new file inherits from its directory
/// beyond its group (a default ACL, a security label, a project id) is as of when the
/// file was made, so that moment is kept recent.
pub const MAX_AGE: Duration = Duration::from_secs(60);

/// An unnamed file made in `dir`.
struct Spare {
    /// Held open: the identity below stays this directory's while the spare is kept.
    _dir: Dir,
    id: (u64, u64),
    /// The directory's group and mode when the spare was made: what a new file there
    /// inherits (a set-group-ID directory's group).
    inherit: (u32, u32),
    file: File,
    made: Instant,
}

/// Oldest first.
static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());
/// Directories to make a spare for, and whether a helper is making them.
static WANTED: Mutex<Vec<(Dir, (u64, u64))>> = Mutex::new(Vec::new());
static REFILLING: AtomicBool = AtomicBool::new(false);

fn spares() -> std::sync::MutexGuard<'static, Vec<Spare>> {
    SPARES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn identity(dir: &Dir) -> Option<(u64, u64)> {
    looks(dir).map(|(id, _)| id)
}

/// A directory's identity and what a file made in it inherits (group, mode).
fn looks(dir: &Dir) -> Option<((u64, u64), (u32, u32))> {
    let st = rustix::fs::fstat(dir).ok()?;
    Some(((st.st_dev, st.st_ino), (st.st_gid, st.st_mode)))
}

/// The unnamed file made ahead for `dir`, if there is one (it is no longer kept) and
/// it is as a file made now would be: the directory's group and mode unchanged since,
/// made within [`MAX_AGE`].
pub fn take(dir: &Dir) -> Option<File> {
    let (id, inherit) = looks(dir)?;
    let spare = {
        let mut kept = spares();
        let at = kept.iter().position(|s| s.id == id)?;
        kept.remove(at)
    };
    if spare.inherit == inherit && spare.made.elapsed() < MAX_AGE {
        return Some(spare.file);
    }
    // Dropped here, outside the lock (closing frees its inode).
    None
}

/// Notes that `dir` is to get an unnamed file for its next write, made at the next
/// [`refill`]; nothing if one is kept or noted for it already.
pub fn want(dir: &Dir) {
    let Some(id) = identity(dir) else { return };
    if spares().iter().any(|s| s.id == id) || no_tmpfile().contains(&id.0) {
        return;
    }
    let mut wanted = wanted();
    if wanted.len() >= MAX_SPARES || wanted.iter().any(|(_, w)| *w == id) {
        return;
    }
    if let Ok(dir) = dir.try_clone() {
        wanted.push((dir, id));
    }
}

/// Makes the unnamed files [`want`]ed on one helper thread: a free one now, else the
/// next one done with its job (a spare is worth making only off every request's path:
/// call this once a request's own syncs are done). Under load no helper may be free at
/// the moment of asking; dropped then, the spare would wait for the next write.
pub fn refill() {
    if wanted().is_empty() || REFILLING.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::sync_pool::offer_or_later(make_wanted);
}

/// Makes every spare wanted, then lets the next refill start. A want noted after the
/// last one was taken, while `REFILLING` was still held, is taken too (its refill
/// returned at once, seeing the flag).
fn make_wanted() {
    loop {
        loop {
            // The lock is not held while a spare is made.
            let next = wanted().pop();
            let Some((dir, id)) = next else { break };
            make(dir, id);
        }
        REFILLING.store(false, Ordering::Release);
        if wanted().is_empty() || REFILLING.swap(true, Ordering::AcqRel) {
            return;
        }
    }
}

fn wanted() -> std::sync::MutexGuard<'static, Vec<(Dir, (u64, u64))>> {
    WANTED.lock().unwrap_or_else(PoisonError::into_inner)
}

fn make(dir: Dir, id: (u64, u64)) {
    drop(prune_removed());
    if !room_for(id) {
        return;
    }
    // Looked at before the file is made: a change in between makes `take` refuse it.
    let Some((_, inherit)) = looks(&dir) else {
        return;
    };
    let file = match try_unnamed(&dir, true) {
        Ok(f) => f,
        Err(e) => return no_unnamed_files(id.0, e),
    };
    let evicted = {
        let mut kept = spares();
        if kept.iter().any(|s| s.id == id) {
            return;
        }
        kept.push(Spare {
            _dir: dir,
            id,
            inherit,
            file,
            made: Instant::now(),
        });
        (kept.len() > MAX_SPARES).then(|| kept.remove(0))
    };
    // Freed outside the lock: closing an unnamed file frees its inode.
    drop(evicted);
}

/// Takes out the spares of directories removed since (they would never be used), in
/// place: the list's own buffer is never given up, and nothing is allocated unless a
/// spare goes.
fn prune_removed() -> Vec<Spare> {
    let mut kept = spares();
    kept.extract_if(.., |s| {
        rustix::fs::fstat(&s._dir).map_or(true, |st| st.st_nlink == 0)
    })
    .collect()
}

/// Devices whose filesystem has no unnamed files: no spare is asked for there again.
static NO_TMPFILE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn no_tmpfile() -> std::sync::MutexGuard<'static, Vec<u64>> {
    NO_TMPFILE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Notes device `dev` if `e` says its filesystem cannot make unnamed files.
fn no_unnamed_files(dev: u64, e: rustix::io::Errno) {
    use rustix::io::Errno;
    if matches!(e, Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) {
        let mut devs = no_tmpfile();
        if devs.len() < MAX_SPARES && !devs.contains(&dev) {
            devs.push(dev);
        }
    }
}

/// Whether a spare for `id` may be made now (see [`has_room`]).
fn room_for(id: (u64, u64)) -> bool {
    let kept = spares();
    let ages: Vec<_> = kept.iter().map(|s| (s.id, s.made.elapsed())).collect();
    has_room(&ages, id)
}

/// Whether a spare for `id` may join those `kept` (directory, age; oldest first): none
/// kept for it, and a free place or one held at least [`MIN_KEPT`]. Writes spread over
/// many directories so make at most `MAX_SPARES` spares that nobody takes each
/// `MIN_KEPT`, not one per write (each freed unused is an inode made and freed for
/// nothing).
fn has_room(kept: &[((u64, u64), Duration)], id: (u64, u64)) -> bool {
    !kept.iter().any(|(k, _)| *k == id)
        && (kept.len() < MAX_SPARES || kept.first().is_some_and(|(_, age)| *age >= MIN_KEPT))
}

/// A new unnamed file (`O_TMPFILE`, mode 0600) in `dir`, write-only or with `read` too;
/// None where the filesystem has none.
pub(crate) fn unnamed(dir: &Dir, read: bool) -> Option<File> {
    try_unnamed(dir, read).ok()
}

#[cfg(target_os = "linux")]
fn try_unnamed(dir: &Dir, read: bool) -> rustix::io::Result<File> {
    use rustix::fs::{Mode, OFlags, openat};
    let access = if read { OFlags::RDWR } else { OFlags::WRONLY };
    let flags = OFlags::TMPFILE | access | OFlags::CLOEXEC;
    openat(dir, ".", flags, Mode::from_raw_mode(0o600)).map(File::from)
}

#[cfg(not(target_os = "linux"))]
fn try_unnamed(_dir: &Dir, _read: bool) -> rustix::io::Result<File> {
    Err(rustix::io::Errno::OPNOTSUPP)
}

/// Gives the unnamed file `f` (see [`take`]) the name `name` in `dir`;
/// `AlreadyExists` if the name is taken (nothing was linked).
pub fn link(f: &File, dir: &Dir, name: &str) -> io::Result<()> {
    crate::unnamed::link_unnamed(f, dir, name).map_err(io::Error::from)
}

/// Whether a failure of [`link`] will last (the filesystem's or the sandbox's way, not
/// this one write's: no space, no quota, a read-only or failing disk, a name taken).
pub fn is_lasting(e: &io::Error) -> bool {
    match e.raw_os_error() {
        Some(n) => {
            let e = rustix::io::Errno::from_raw_os_error(n);
            e != rustix::io::Errno::EXIST && !crate::unnamed::is_this_writes(e)
        }
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::time::{Duration, Instant};

    fn dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("open");
        (tmp, d)
    }

    /// The tests that need a spare made, one at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Waits for the helper to make a spare for `dir` (asked again each time: no helper
    /// may have been free). Other tests' writes fill the pool too: it is emptied first.
    fn wait_kept(dir: &Dir) {
        drop(std::mem::take(&mut *spares()));
        let id = identity(dir);
        let t = Instant::now();
        while !spares().iter().any(|s| Some(s.id) == id) {
            want(dir);
            refill();
            assert!(t.elapsed() < Duration::from_secs(30), "no spare made");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn take_made(dir: &Dir) -> File {
        wait_kept(dir);
        take(dir).expect("the spare just made")
    }

    /// A spare is made for the directory asked, taken once, and becomes a named file
    /// holding what was written into it.
    #[test]
    fn a_spare_is_taken_once_and_linked_in_its_directory() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let (tmp, d) = dir();
        assert!(take(&d).is_none(), "nothing made yet");
        let mut f = take_made(&d);
        assert!(take(&d).is_none(), "a spare is taken once");
        f.write_all(b"made ahead").expect("write");
        link(&f, &d, "named").expect("link");
        assert_eq!(
            std::fs::read(tmp.path().join("named")).expect("read"),
            b"made ahead"
        );
        f.rewind().expect("rewind");
        let mut back = String::new();
        f.read_to_string(&mut back).expect("readable too");
        assert_eq!(back, "made ahead");
        let e = link(&f, &d, "named").expect_err("the name is taken");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    }

    /// Another directory's spare is never handed out.
    #[test]
    fn a_spare_is_only_its_directorys() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let (_a, a) = dir();
        let (_b, b) = dir();
        wait_kept(&a);
        assert!(take(&b).is_none(), "b's writes never asked for one");
        assert!(take(&a).is_some());
    }

    /// A spare made before its directory's group or mode changed (a file made now
    /// would inherit otherwise) is not handed out.
    #[test]
    fn a_spare_from_before_its_directory_changed_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let (tmp, d) = dir();
        wait_kept(&d);
        let mode = std::fs::metadata(tmp.path())
            .expect("stat")
            .permissions()
            .mode();
        let setgid = std::fs::Permissions::from_mode(mode | 0o2000);
        std::fs::set_permissions(tmp.path(), setgid).expect("chmod g+s");
        assert!(
            take(&d).is_none(),
            "made before the directory became set-group-ID"
        );
        // One made since is used.
        assert!(take_made(&d).metadata().is_ok());
    }

    /// At most MAX_SPARES are kept; a full pool makes room only by a spare kept
    /// MIN_KEPT, the oldest; never a second spare for one directory.
    #[test]
    fn the_pool_is_bounded_and_gives_way_only_to_age() {
        let young = Duration::from_millis(5);
        let full: Vec<_> = (0..MAX_SPARES as u64).map(|i| ((1, i), young)).collect();
        assert!(has_room(&full[..3], (1, 99)));
        assert!(!has_room(&full[..3], (1, 2)), "one spare per directory");
        assert!(!has_room(&full, (1, 99)), "full of young spares");
        let mut aged = full.clone();
        aged[0].1 = MIN_KEPT;
        assert!(
            has_room(&aged, (1, 99)),
            "the oldest has waited long enough"
        );
        assert!(!has_room(&aged, (1, 5)));
    }
}
