//! Listing and walking directories beneath the root, never following symlinks.
//!
//! One walker for every walk (rm, rename, backups, hidden-entry checks, glob, grep, the
//! watcher), with one rule: it descends at most [`MAX_DEPTH`] levels and says where it
//! stopped ([`Walked::cut`]), so a caller that changes a tree can refuse what it did not
//! inspect. Every name is treated alike: no name is skipped for what it looks like.
//! Open descriptors are bounded by the depth (one per level being walked), not by the
//! width of a directory.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::CStr;
use std::os::fd::AsFd;
use std::time::{Duration, SystemTime};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use rustix::fs::{AtFlags, OFlags, RawDir, Statx, StatxFlags, makedev, statx};

use super::dir_cache;
use super::kind::FileKind;
use super::open::open_dir;
use super::read::format_time;
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// Deepest nesting the gateway inspects, and creates: entries at most this many levels
/// below a walk's start are visited; a workspace path has at most this many components.
pub const MAX_DEPTH: usize = 256;

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name, held inline when it fits in 24 bytes (most do): a walk of a
    /// large tree no longer allocates twice an entry (its name and its path).
    pub name: compact_str::CompactString,
    /// Its workspace-relative path.
    pub path: RelPath,
    /// What it is (symlinks not followed).
    pub kind: FileKind,
    /// Size in bytes.
    pub size: Option<u64>,
    /// Modification time, RFC 3339.
    pub modified: Option<String>,
    /// Permission bits (of the entry itself, symlinks not followed), where read.
    pub mode: Option<u32>,
    /// (device, inode) as listed, to tell later whether a name still holds this entry.
    pub id: Option<(u64, u64)>,
    /// Its inode number as its directory gave it (`d_ino`), read with the name: known
    /// without a `statx` (the view's listings need nothing more).
    pub ino: Option<u64>,
}

/// What a walk does after visiting an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Continue, descending into this entry if it is a directory.
    Descend,
    /// Continue, but do not descend into it.
    Skip,
    /// End the walk.
    Stop,
}

/// How a walk ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Walked {
    /// The first directory the walk was asked to enter but did not, because it lies at
    /// the depth limit and is not empty: what is beneath it was not seen.
    pub cut: Option<RelPath>,
}

impl Walked {
    /// True if something beneath the start was not seen because of the depth limit.
    pub fn truncated(&self) -> bool {
        self.cut.is_some()
    }
}

/// How strictly a walk treats what it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Read-only walks: a directory that cannot be opened, or a name that is not UTF-8
    /// (inexpressible on the wire), is passed over as before.
    Lenient,
    /// [`Mode::Lenient`], reading no metadata (names, kinds and inode numbers only).
    LenientNames,
    /// Walks before a change: anything that cannot be inspected is an error.
    Strict,
    /// Name listings: no metadata is read (names, kinds and inode numbers only); a
    /// directory that cannot be opened is an error, a name that is not UTF-8 is passed
    /// over.
    Names,
}

/// What a walk calls on each entry, with the handle of the directory holding it.
pub(crate) trait Visitor {
    /// Called on every entry, in name order, before its contents.
    fn visit(&mut self, dir: &Dir, e: &Entry) -> Result<Visit, WsError>;
    /// Called instead of `visit` on an entry that is not a directory, which the walk
    /// no longer needs afterwards: the visitor may keep it without a copy.
    fn visit_owned(&mut self, dir: &Dir, e: Entry) -> Result<Visit, WsError> {
        self.visit(dir, &e)
    }
    /// Called after every entry beneath the directory `e` was visited, with the handle
    /// of the directory holding `e`.
    fn leave(&mut self, _parent: &Dir, _e: &Entry) -> Result<(), WsError> {
        Ok(())
    }
}

/// A closure as a visitor that never fails and ignores handles.
pub(crate) struct Plain<'a>(pub(crate) &'a mut dyn FnMut(&Entry) -> Visit);

impl Visitor for Plain<'_> {
    fn visit(&mut self, _dir: &Dir, e: &Entry) -> Result<Visit, WsError> {
        Ok((self.0)(e))
    }
}

/// A closure given what is not a directory to keep (owned), directories borrowed.
pub(crate) struct Keeping<'a>(pub(crate) &'a mut dyn FnMut(Cow<'_, Entry>) -> Visit);

impl Visitor for Keeping<'_> {
    fn visit(&mut self, _dir: &Dir, e: &Entry) -> Result<Visit, WsError> {
        Ok((self.0)(Cow::Borrowed(e)))
    }

    fn visit_owned(&mut self, _dir: &Dir, e: Entry) -> Result<Visit, WsError> {
        Ok((self.0)(Cow::Owned(e)))
    }
}

/// Bytes of `linux_dirent64` records one `getdents64` may fill: a 1,000-entry
/// directory of short names (about 40 KiB) in one call, where a growing buffer took eight.
pub(super) const DIRENT_BUF: usize = 64 * 1024;

thread_local! {
    /// The buffer a thread reads directories into, kept between listings (no fresh
    /// pages, no growth per call). A listing never starts another on its own thread.
    pub(super) static DIRENTS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn read_entries(dir: &Dir, base: &RelPath, mode: Mode) -> Result<Vec<Entry>, WsError> {
    read_listing(dir, base, mode, false)
}

/// [`read_entries`] of a directory [`open_readable`] opened for this walk alone (read
/// through that descriptor, as [`walk_from`] reads a fresh start).
pub(crate) fn read_opened(dir: &Dir, base: &RelPath, mode: Mode) -> Result<Vec<Entry>, WsError> {
    read_listing(dir, base, mode, true)
}

/// [`read_entries`]; `fresh`: `dir` was just opened by this walk and is read by it
/// alone, so it is read directly, not through a descriptor of its own.
fn read_listing(dir: &Dir, base: &RelPath, mode: Mode, fresh: bool) -> Result<Vec<Entry>, WsError> {
    // Names, kinds and inode numbers only: an unchanged large directory need not be
    // read again.
    // (Not for grep's walks, `LenientNames`: they read every file anyway, and the
    // `statx` of each directory would only add to them.) Looked up on `dir` itself:
    // a hit needs no descriptor of its own.
    let probe = match mode {
        Mode::Names => match dir_cache::lookup(dir) {
            Ok(names) => {
                let entry = |(name, kind, ino): &(Box<str>, FileKind, Option<u64>)| {
                    entry_from(base, (name, *kind, *ino), None)
                };
                return Ok(names.iter().map(entry).collect());
            }
            Err(probe) => Some(probe),
        },
        Mode::Lenient | Mode::LenientNames | Mode::Strict => None,
    };
    // Else a descriptor of its own, at the start of the directory: `dir` may share its
    // offset with another (the root's clones do).
    let own = match fresh {
        true => None,
        false => Some(
            rustix::fs::openat(
                dir,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                rustix::fs::Mode::empty(),
            )
            .map_err(|e| WsError::from_io(e.into()))?,
        ),
    };
    let fd = own.as_ref().map_or_else(|| dir.as_fd(), |own| own.as_fd());
    // Room for a directory of a few dozen entries at once (each growth is a copy).
    let mut out = Vec::with_capacity(32);
    let mut read = |buf: &mut Vec<u8>| {
        if buf.capacity() < DIRENT_BUF {
            buf.reserve_exact(DIRENT_BUF);
        }
        let mut raw = RawDir::new(fd, buf.spare_capacity_mut());
        while let Some(entry) = raw.next() {
            let entry = entry.map_err(|e| WsError::from_io(e.into()))?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(bytes) else {
                if mode == Mode::Strict {
                    return Err(WsError::NotUtf8);
                }
                continue; // Not expressible on the wire.
            };
            let kind = kind_of(entry.file_type());
            let meta = match mode {
                // No metadata for names only: that stat was most of a name listing's time.
                Mode::Names | Mode::LenientNames => None,
                _ => entry_meta(dir, entry.file_name(), mode)?,
            };
            out.push(entry_from(base, (name, kind, Some(entry.ino())), meta));
        }
        Ok(())
    };
    DIRENTS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => read(&mut buf),
        Err(_) => read(&mut Vec::new()),
    })?;
    sort_by_name(&mut out);
    if let Some(probe) = probe {
        dir_cache::keep(
            probe,
            &fd,
            out.iter().map(|e| (e.name.as_str(), e.kind, e.ino)),
        );
    }
    Ok(out)
}

/// What a directory entry's type says it is (symlinks not followed; a type the file
/// system does not give is `Other`, as before).
pub(super) fn kind_of(ft: rustix::fs::FileType) -> FileKind {
    use rustix::fs::FileType as T;
    FileKind::from_predicates(ft == T::RegularFile, ft == T::Directory, ft == T::Symlink)
}

/// The metadata an entry carries: one `statx` on the directory's descriptor, not
/// following symlinks. None if it cannot be read (an error when `Strict`).
pub(super) fn entry_meta(dir: &Dir, name: &CStr, mode: Mode) -> Result<Option<Statx>, WsError> {
    match statx(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS,
    ) {
        Ok(m) => Ok(Some(m)),
        Err(e) if mode == Mode::Strict => Err(WsError::from_io(e.into())),
        Err(_) => Ok(None),
    }
}

pub(super) fn entry_from(
    base: &RelPath,
    (name, kind, ino): (&str, FileKind, Option<u64>),
    meta: Option<Statx>,
) -> Entry {
    let has_mtime = |m: &&Statx| m.stx_mask & StatxFlags::MTIME.bits() != 0;
    Entry {
        ino: ino.or(meta.as_ref().map(|m| m.stx_ino)),
        path: base.join(name),
        name: name.into(),
        kind,
        size: meta.as_ref().map(|m| m.stx_size),
        modified: meta
            .as_ref()
            .filter(has_mtime)
            .and_then(|m| system_time(m.stx_mtime.tv_sec, m.stx_mtime.tv_nsec))
            .map(format_time),
        mode: meta.as_ref().map(|m| u32::from(m.stx_mode) & 0o7777),
        id: meta
            .as_ref()
            .map(|m| (makedev(m.stx_dev_major, m.stx_dev_minor), m.stx_ino)),
    }
}

/// A statx time as std (and cap-std) gives it: before the epoch, whole seconds back
/// and then the fraction forward.
fn system_time(sec: i64, nsec: u32) -> Option<SystemTime> {
    let epoch = SystemTime::UNIX_EPOCH;
    match u64::try_from(sec) {
        Ok(s) => epoch.checked_add(Duration::new(s, nsec)),
        Err(_) => epoch
            .checked_sub(Duration::from_secs(sec.unsigned_abs()))
            .and_then(|t| t.checked_add(Duration::new(0, nsec))),
    }
}

/// Sorts entries by name (bytewise, as `str::cmp`). Entries are large and names often
/// share long prefixes (`entry-00001.txt`), so the sort moves small keys: each name's
/// first 16 bytes as a big-endian number (zero-padded: names hold no NUL byte, so a
/// shorter name still sorts first), the whole names compared only on a tie.
pub(super) fn sort_by_name(entries: &mut [Entry]) {
    let prefix = |name: &str| {
        let mut b = [0u8; 16];
        let n = name.len().min(16);
        b[..n].copy_from_slice(&name.as_bytes()[..n]);
        u128::from_be_bytes(b)
    };
    let mut keys: Vec<(u128, u32)> = entries
        .iter()
        .zip(0u32..)
        .map(|(e, i)| (prefix(&e.name), i))
        .collect();
    // Names in one directory are unique: an unstable sort gives the same order, faster.
    // Names sharing their first 16 bytes then sort among themselves by the whole name.
    keys.sort_unstable();
    let name = |k: &(u128, u32)| entries.get(k.1 as usize).map(|e| e.name.as_str());
    for run in keys.chunk_by_mut(|a, b| a.0 == b.0).filter(|r| r.len() > 1) {
        run.sort_unstable_by(|a, b| name(a).cmp(&name(b)));
    }
    // Entry `order[i]` goes to place `i`: follow each cycle of the permutation,
    // swapping in place (each visited place is marked done by `order[i] = i`).
    let mut order: Vec<usize> = keys.iter().map(|k| k.1 as usize).collect();
    for start in 0..order.len() {
        let mut i = start;
        while order[i] != start && order[i] != i {
            let j = order[i];
            entries.swap(i, j);
            order[i] = i;
            i = j;
        }
        order[i] = i;
    }
}

/// A directory being walked: its handle, its depth, and the entries not yet visited.
struct Frame {
    dir: Dir,
    /// The entry that named it (None for the start).
    entry: Option<Entry>,
    depth: usize,
    pending: std::vec::IntoIter<Entry>,
}

/// Whether the directory `name` in `dir` holds anything (it is at the depth limit).
fn has_entries(dir: &Dir, name: &str, mode: Mode) -> Result<bool, WsError> {
    match dir.open_dir_nofollow(name) {
        Ok(sub) => Ok(sub.entries()?.next().is_some()),
        Err(e) if mode == Mode::Strict => Err(WsError::from_io(e)),
        Err(_) => Ok(false),
    }
}

/// Walks beneath `start` (an open directory at `base`) depth-first in name order, at
/// most `max_depth` levels down.
pub(crate) fn walk_dir(
    start: Dir,
    base: &RelPath,
    max_depth: usize,
    mode: Mode,
    visitor: &mut dyn Visitor,
) -> Result<Walked, WsError> {
    walk_from((start, false), base, max_depth, mode, visitor)
}

/// [`walk_dir`]; `fresh`: `start` was opened by [`open_readable`] for this walk alone,
/// and its listing is read through it (no second open, which a directory that is
/// readable but not searchable would refuse), as the walk reads every directory below
/// its start.
pub(crate) fn walk_from(
    (start, fresh): (Dir, bool),
    base: &RelPath,
    max_depth: usize,
    mode: Mode,
    visitor: &mut dyn Visitor,
) -> Result<Walked, WsError> {
    let mut walked = Walked::default();
    let pending = read_listing(&start, base, mode, fresh)?.into_iter();
    let mut stack = vec![Frame {
        dir: start,
        entry: None,
        depth: 0,
        pending,
    }];
    while let Some(top) = stack.last_mut() {
        let Some(e) = top.pending.next() else {
            let done = stack.pop();
            if let (Some(parent), Some(Frame { entry: Some(e), .. })) = (stack.last(), done) {
                visitor.leave(&parent.dir, &e)?;
            }
            continue;
        };
        let depth = top.depth + 1;
        if e.kind != FileKind::Directory {
            // Nothing to descend into or leave: the visitor may keep the entry.
            if visitor.visit_owned(&top.dir, e)? == Visit::Stop {
                return Ok(walked);
            }
            continue;
        }
        match visitor.visit(&top.dir, &e)? {
            Visit::Stop => return Ok(walked),
            Visit::Skip => continue,
            Visit::Descend if e.kind != FileKind::Directory => continue,
            Visit::Descend => {}
        }
        if depth >= max_depth {
            if has_entries(&top.dir, &e.name, mode)? {
                walked.cut.get_or_insert_with(|| e.path.clone());
            } else {
                // Empty: seen whole without entering it.
                visitor.leave(&top.dir, &e)?;
            }
            continue;
        }
        // A directory swapped for a symlink since listing fails here. A walk without
        // metadata (a tree's, a glob's, a grep's) opens it readable and reads it through
        // that descriptor (one open, not two); the others keep cap-std's handle and open
        // one of their own to read.
        let fresh = matches!(mode, Mode::Names | Mode::LenientNames);
        let opened = match fresh {
            true => open_readable(&top.dir, &e.name),
            false => top.dir.open_dir_nofollow(&e.name),
        };
        let sub = match opened {
            Ok(sub) => sub,
            Err(err) if !matches!(mode, Mode::Lenient | Mode::LenientNames) => {
                return Err(WsError::from_io(err));
            }
            Err(_) => continue,
        };
        let pending = read_listing(&sub, &e.path, mode, fresh)?.into_iter();
        stack.push(Frame {
            dir: sub,
            entry: Some(e),
            depth,
            pending,
        });
    }
    Ok(walked)
}

/// Opens the directory `name`, an entry of `dir` as listed (one component, neither `.`
/// nor `..`), not following a symlink: the `openat` that cap-std's `open_dir_nofollow`
/// makes for one component, except that the descriptor is readable (not `O_PATH`), so
/// that the walk reads the directory through it, not through a second one of its own.
pub(crate) fn open_readable(dir: &Dir, name: &str) -> std::io::Result<Dir> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let fd = rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty())?;
    Ok(Dir::from(fd))
}

impl Workspace {
    /// The entries of the directory at `real` (canonical), sorted by name.
    #[cfg(test)]
    pub(crate) fn list_dir(&self, real: &RelPath) -> Result<Vec<Entry>, WsError> {
        let dir = open_dir(&self.root, real).map_err(WsError::from_io)?;
        read_entries(&dir, real, Mode::Lenient)
    }

    /// Walks the tree under `start` (canonical) depth-first in name order, calling
    /// `visit` on every entry. Symlinks are reported, never followed. A directory that
    /// cannot be opened is passed over; one at the depth limit is reported in
    /// [`Walked::cut`].
    pub fn walk(
        &self,
        start: &RelPath,
        visit: &mut dyn FnMut(&Entry) -> Visit,
    ) -> Result<Walked, WsError> {
        let dir = open_dir(&self.root, start).map_err(WsError::from_io)?;
        walk_dir(dir, start, MAX_DEPTH, Mode::Lenient, &mut Plain(visit))
    }

    /// The entries of the directory at `real` (canonical), sorted by name, without their
    /// metadata (names, kinds and inode numbers only).
    pub fn list_names(&self, real: &RelPath) -> Result<Vec<Entry>, WsError> {
        let dir = open_dir(&self.root, real).map_err(WsError::from_io)?;
        read_entries(&dir, real, Mode::Names)
    }

    /// Like [`Workspace::walk`], but reads no metadata (entries carry names, kinds and
    /// inode numbers only), and a directory that cannot be opened is an error, not passed over.
    /// Entries that are not directories are handed over owned, to keep without a copy.
    pub fn walk_names(
        &self,
        start: &RelPath,
        visit: &mut dyn FnMut(Cow<'_, Entry>) -> Visit,
    ) -> Result<Walked, WsError> {
        let dir = open_dir(&self.root, start).map_err(WsError::from_io)?;
        walk_dir(dir, start, MAX_DEPTH, Mode::Names, &mut Keeping(visit))
    }

    /// Everything beneath the directory `start`, for the checks and backups before a
    /// change of the whole tree. Err if any of it cannot be inspected: a directory
    /// deeper than [`MAX_DEPTH`] ([`WsError::TooDeep`]), one that cannot be opened, a
    /// name that is not UTF-8.
    pub fn inspect_tree(&self, start: &RelPath) -> Result<Vec<Entry>, WsError> {
        let dir = open_dir(&self.root, start).map_err(WsError::from_io)?;
        let mut all = Vec::new();
        let mut collect = |e: &Entry| {
            all.push(e.clone());
            Visit::Descend
        };
        let walked = walk_dir(
            dir,
            start,
            MAX_DEPTH,
            Mode::Strict,
            &mut Plain(&mut collect),
        )?;
        match walked.cut {
            Some(at) => Err(WsError::TooDeep {
                at,
                limit: MAX_DEPTH,
            }),
            None => Ok(all),
        }
    }
}

/// How many levels `entries` (from a walk of `start`) reach below it.
pub fn height(start: &RelPath, entries: &[Entry]) -> usize {
    let base = start.components().count();
    entries
        .iter()
        .map(|e| e.path.components().count().saturating_sub(base))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Removal;
    use std::os::unix::ffi::OsStrExt;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        (tmp, ws)
    }

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).expect("path")
    }

    fn walk_limited(ws: &Workspace, max: usize) -> (Vec<String>, Walked) {
        let mut seen = Vec::new();
        let mut visit = |e: &Entry| {
            seen.push(e.path.as_str().to_string());
            Visit::Descend
        };
        let dir = ws.root.try_clone().expect("clone");
        let walked = walk_dir(
            dir,
            &RelPath::root(),
            max,
            Mode::Lenient,
            &mut Plain(&mut visit),
        )
        .expect("walk");
        (seen, walked)
    }

    #[test]
    fn a_walk_says_where_the_depth_limit_cut_it() {
        let (tmp, ws) = ws();
        std::fs::create_dir_all(tmp.path().join("a/b/c/d")).expect("mkdir");
        std::fs::write(tmp.path().join("a/b/c/d/f"), "x").expect("write");
        std::fs::create_dir_all(tmp.path().join("e/f/empty")).expect("mkdir");
        let (seen, walked) = walk_limited(&ws, 3);
        assert!(seen.contains(&"a/b/c".to_string()), "{seen:?}");
        assert!(!seen.iter().any(|p| p.starts_with("a/b/c/")), "{seen:?}");
        assert_eq!(walked.cut, Some(rel("a/b/c")));
        // An empty directory at the limit hides nothing: no cut.
        std::fs::remove_dir_all(tmp.path().join("a")).expect("rm");
        let (seen, walked) = walk_limited(&ws, 3);
        assert!(seen.contains(&"e/f/empty".to_string()), "{seen:?}");
        assert_eq!(walked.cut, None);
    }

    #[test]
    fn entries_sort_by_name_bytewise() {
        let names = [
            "entry-00010.txt",
            "entry-00002.txt",
            "b",
            "",
            "a",
            "ab",
            "entry-00001.txt",
            "entry-00001.txt2",
            "entry-00001.tx",
            "\u{e9}t\u{e9}",
            "Z",
            "aaaaaaaaaaaaaaaa",
            "aaaaaaaaaaaaaaaab",
            "aaaaaaaaaaaaaaaaa",
            "aaaaaaaaaaaaaaab",
        ];
        // And many names in a scrambled order (a permutation of several cycles).
        let many: Vec<String> = (0..300).map(|i| format!("n{}", (i * 7919) % 300)).collect();
        let names: Vec<&str> = names
            .into_iter()
            .chain(many.iter().map(String::as_str))
            .collect();
        let mut entries: Vec<Entry> = names
            .iter()
            .map(|n| Entry {
                name: (*n).into(),
                path: RelPath::root(),
                kind: FileKind::File,
                size: None,
                modified: None,
                mode: None,
                id: None,
                ino: None,
            })
            .collect();
        sort_by_name(&mut entries);
        let mut want = names.clone();
        want.sort_unstable();
        let got: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_names_walk_hands_over_files_and_sees_what_a_walk_sees() {
        let (tmp, ws) = ws();
        std::fs::create_dir_all(tmp.path().join("a/b")).expect("mkdir");
        std::fs::write(tmp.path().join("a/b/f"), "x").expect("write");
        std::fs::write(tmp.path().join("a/g"), "x").expect("write");
        std::fs::write(tmp.path().join("z"), "x").expect("write");
        let mut seen = Vec::new();
        ws.walk_names(&RelPath::root(), &mut |e| {
            let owned = matches!(e, Cow::Owned(_));
            assert_eq!(owned, e.kind != FileKind::Directory, "{}", e.path);
            seen.push(e.path.as_str().to_string());
            Visit::Descend
        })
        .expect("walk");
        let mut walked = Vec::new();
        ws.walk(&RelPath::root(), &mut |e| {
            walked.push(e.path.as_str().to_string());
            Visit::Descend
        })
        .expect("walk");
        assert_eq!(seen, ["a", "a/b", "a/b/f", "a/g", "z"]);
        assert_eq!(seen, walked);
        // Stop from a file ends the walk.
        let mut n = 0;
        ws.walk_names(&RelPath::root(), &mut |e| {
            n += 1;
            if e.path.as_str() == "a/b/f" {
                Visit::Stop
            } else {
                Visit::Descend
            }
        })
        .expect("walk");
        assert_eq!(n, 3);
    }

    /// A tree of `fanout`-ary directories `levels` deep, each holding two files.
    fn bushy(root: &std::path::Path, fanout: usize, levels: usize) {
        let mut dirs = vec![root.to_path_buf()];
        for _ in 0..levels {
            let mut next = Vec::new();
            for d in &dirs {
                for i in 0..fanout {
                    let sub = d.join(format!("d{i}"));
                    std::fs::create_dir(&sub).expect("mkdir");
                    std::fs::write(sub.join("f.txt"), "x").expect("write");
                    std::fs::write(sub.join("s.rs"), "x").expect("write");
                    next.push(sub);
                }
            }
            dirs = next;
        }
    }

    /// A names walk of many directories (each read through the descriptor that opened
    /// it) sees what a walk with metadata sees, in the same order, with the same skips
    /// and stop.
    #[test]
    fn a_names_walk_of_many_directories_sees_what_a_walk_sees() {
        let (tmp, ws) = ws();
        bushy(tmp.path(), 4, 4); // 340 directories
        let decide = |p: &str| match p {
            _ if p.ends_with("d1/d2") || p == "d3" => Visit::Skip,
            "d2/d2/d1/s.rs" => Visit::Stop,
            _ => Visit::Descend,
        };
        for stop in [false, true] {
            let decide = |p: &str| match decide(p) {
                Visit::Stop if !stop => Visit::Descend,
                v => v,
            };
            let mut ahead = Vec::new();
            ws.walk_names(&RelPath::root(), &mut |e| {
                ahead.push(e.path.as_str().to_string());
                decide(e.path.as_str())
            })
            .expect("walk");
            let mut alone = Vec::new();
            ws.walk(&RelPath::root(), &mut |e| {
                alone.push(e.path.as_str().to_string());
                decide(e.path.as_str())
            })
            .expect("walk");
            assert_eq!(ahead, alone, "stop {stop}");
            assert!(ahead.len() > 200, "{}", ahead.len());
            assert!(
                !ahead
                    .iter()
                    .any(|p| p.starts_with("d3/") || p.contains("d1/d2/"))
            );
        }
    }

    /// A listing with metadata carries what `lstat` says of each entry (as cap-std's
    /// did); a names listing the same names and kinds without it; a name that is not
    /// UTF-8 is passed over by both and refused by an inspection.
    #[test]
    fn listings_carry_what_lstat_says() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let (tmp, ws) = ws();
        let d = tmp.path().join("d");
        std::fs::create_dir_all(d.join("sub")).expect("mkdir");
        std::fs::write(d.join("f.txt"), "12345").expect("write");
        std::fs::set_permissions(d.join("f.txt"), std::fs::Permissions::from_mode(0o640))
            .expect("chmod");
        std::os::unix::fs::symlink("f.txt", d.join("link")).expect("symlink");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.join("fifo").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let listed = ws.list_dir(&rel("d")).expect("list");
        let names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["f.txt", "fifo", "link", "sub"]);
        for e in &listed {
            let m = std::fs::symlink_metadata(d.join(&e.name)).expect("lstat");
            assert_eq!(e.path, rel(&format!("d/{}", e.name)));
            assert_eq!(e.size, Some(m.len()), "{}", e.name);
            assert_eq!(e.mode, Some(m.mode() & 0o7777), "{}", e.name);
            assert_eq!(e.id, Some((m.dev(), m.ino())), "{}", e.name);
            let modified = m.modified().map(format_time).ok();
            assert_eq!(e.modified, modified, "{}", e.name);
        }
        let kinds: Vec<FileKind> = listed.iter().map(|e| e.kind).collect();
        use FileKind::*;
        assert_eq!(kinds, [File, Other, Symlink, Directory]);
        assert_eq!(listed[0].mode, Some(0o640));
        let bare = ws.list_names(&rel("d")).expect("names");
        let bare: Vec<_> = bare
            .iter()
            .map(|e| (e.name.as_str(), e.kind, e.size))
            .collect();
        let want: Vec<_> = listed
            .iter()
            .map(|e| (e.name.as_str(), e.kind, None))
            .collect();
        assert_eq!(bare, want);
        // A name that is not UTF-8.
        let odd = std::ffi::OsStr::from_bytes(b"bad\xff");
        std::fs::write(d.join(odd), "x").expect("write");
        assert_eq!(ws.list_dir(&rel("d")).expect("list").len(), 4);
        assert_eq!(ws.list_names(&rel("d")).expect("names").len(), 4);
        assert!(matches!(ws.inspect_tree(&rel("d")), Err(WsError::NotUtf8)));
    }

    /// A directory larger than one read's buffer is listed whole, in name order.
    #[test]
    fn a_directory_larger_than_the_read_buffer_is_listed_whole() {
        let (tmp, ws) = ws();
        let long = "n".repeat(200);
        let mut want: Vec<String> = (0..(3 * DIRENT_BUF / 200))
            .map(|i| format!("{long}-{}", (i * 7919) % 100_000))
            .collect();
        for n in &want {
            std::fs::write(tmp.path().join(n), "").expect("write");
        }
        want.sort_unstable();
        for listed in [
            ws.list_names(&RelPath::root()),
            ws.list_dir(&RelPath::root()),
        ] {
            let got: Vec<String> = listed
                .expect("list")
                .into_iter()
                .map(|e| e.name.to_string())
                .collect();
            assert_eq!(got, want);
        }
        // Twice on one thread: the kept buffer starts each listing afresh.
        assert_eq!(
            ws.list_names(&RelPath::root()).expect("list").len(),
            want.len()
        );
    }

    #[test]
    fn every_name_is_walked_alike() {
        let (tmp, ws) = ws();
        std::fs::create_dir(tmp.path().join("d")).expect("mkdir");
        std::fs::write(tmp.path().join("d/.fsgate-tmp-1-2-x"), "x").expect("write");
        let (seen, _) = walk_limited(&ws, MAX_DEPTH);
        assert_eq!(seen, ["d", "d/.fsgate-tmp-1-2-x"]);
    }

    #[test]
    fn inspecting_a_tree_deeper_than_the_limit_is_an_error() {
        let (tmp, ws) = ws();
        let deep: std::path::PathBuf = std::iter::repeat_n("d", MAX_DEPTH + 1).collect();
        std::fs::create_dir_all(tmp.path().join(&deep)).expect("mkdir");
        std::fs::write(tmp.path().join(&deep).join("f"), "x").expect("write");
        match ws.inspect_tree(&rel("d")) {
            Err(WsError::TooDeep { limit, .. }) => assert_eq!(limit, MAX_DEPTH),
            other => panic!("{other:?}"),
        }
        // From one level down, everything is within reach.
        let entries = ws.inspect_tree(&rel("d/d")).expect("inspect");
        assert_eq!(height(&rel("d/d"), &entries), MAX_DEPTH);
    }

    #[test]
    fn open_descriptors_are_bounded_by_depth_not_width() {
        let (tmp, ws) = ws();
        for i in 0..2000 {
            std::fs::create_dir(tmp.path().join(format!("w{i:04}"))).expect("mkdir");
        }
        let fds = || std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
        let before = fds();
        let mut most = 0;
        ws.walk(&RelPath::root(), &mut |_| {
            most = most.max(fds());
            Visit::Descend
        })
        .expect("walk");
        // Other tests run in parallel and open files too: a wide margin, far below 2000.
        assert!(most < before + 200, "{before} fds before, {most} during");
    }

    #[test]
    fn removal_takes_exactly_what_was_inspected() {
        let (tmp, ws) = ws();
        std::fs::create_dir_all(tmp.path().join("t/sub")).expect("mkdir");
        std::fs::write(tmp.path().join("t/sub/a"), "a").expect("write");
        let inspected = ws.inspect_tree(&rel("t")).expect("inspect");
        // Something appears after the inspection: it is not deleted.
        std::fs::write(tmp.path().join("t/sub/late"), "late").expect("write");
        match ws.remove(&rel("t"), Removal::Tree(&inspected)) {
            Err(WsError::Unseen(p)) => assert_eq!(p, rel("t/sub/late")),
            other => panic!("{other:?}"),
        }
        assert!(tmp.path().join("t/sub/late").exists());
        // (`a`, inspected, was removed before the stop.)
        assert!(!tmp.path().join("t/sub/a").exists());
        // A file replaced by another under the same name is not the inspected one.
        std::fs::rename(tmp.path().join("t/sub/late"), tmp.path().join("t/sub/a")).expect("mv");
        let inspected = ws.inspect_tree(&rel("t")).expect("inspect");
        // Made while `a` still exists, so it cannot reuse `a`'s inode number.
        std::fs::write(tmp.path().join("t/sub/other"), "keep").expect("write");
        std::fs::remove_file(tmp.path().join("t/sub/a")).expect("rm");
        std::fs::rename(tmp.path().join("t/sub/other"), tmp.path().join("t/sub/a")).expect("mv");
        assert!(matches!(
            ws.remove(&rel("t"), Removal::Tree(&inspected)),
            Err(WsError::Unseen(_))
        ));
        assert!(tmp.path().join("t/sub/a").exists());
        // As inspected: removed whole.
        let inspected = ws.inspect_tree(&rel("t")).expect("inspect");
        ws.remove(&rel("t"), Removal::Tree(&inspected))
            .expect("remove");
        assert!(!tmp.path().join("t").exists());
    }

    #[test]
    fn a_tree_exactly_as_deep_as_the_limit_is_removed_whole() {
        let (tmp, ws) = ws();
        let deep: std::path::PathBuf = std::iter::repeat_n("d", MAX_DEPTH + 1).collect();
        std::fs::create_dir_all(tmp.path().join(&deep)).expect("mkdir");
        let inspected = ws.inspect_tree(&rel("d")).expect("inspect");
        assert_eq!(height(&rel("d"), &inspected), MAX_DEPTH);
        ws.remove(&rel("d"), Removal::Tree(&inspected))
            .expect("remove");
        assert!(!tmp.path().join("d").exists());
    }

    #[test]
    fn a_file_that_took_an_inspected_directorys_name_is_not_removed() {
        let (tmp, ws) = ws();
        std::fs::create_dir(tmp.path().join("t")).expect("mkdir");
        std::fs::write(tmp.path().join("t/a"), "a").expect("write");
        let inspected = ws.inspect_tree(&rel("t")).expect("inspect");
        // After the checks (and backups) of the tree, a user's file takes its name.
        std::fs::rename(tmp.path().join("t"), tmp.path().join("t.old")).expect("mv");
        std::fs::write(tmp.path().join("t"), "user").expect("write");
        assert!(matches!(
            ws.remove(&rel("t"), Removal::Tree(&inspected)),
            Err(WsError::Unseen(_))
        ));
        // Checked as an empty directory: the same.
        assert!(matches!(
            ws.remove(&rel("t"), Removal::Dir),
            Err(WsError::Unseen(_))
        ));
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("t")).expect("kept"),
            "user"
        );
    }
}
