//! The open files and directories of the processes using the view.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LockResult, Mutex, MutexGuard, Weak};

use crate::standing::Standing;

/// A directory's entries, read whole at `opendir`: (node id, is a directory, name).
pub(crate) type Listing = Vec<(u64, fuser::FileType, String)>;

/// A file opened for writing: its private copy, applied through the gateway's write
/// at flush, fsync or release, never before. One copy per node, shared by every handle
/// open for writing on it, as processes writing one file share its pages: two
/// appenders, or two SQLite connections, each see and keep what the other wrote.
#[derive(Debug)]
pub(crate) struct Private {
    /// The copy (an unnamed file in memory), never replaced: [`Shared`] reads its size
    /// through the same file.
    pub(crate) copy: Arc<File>,
    /// The node it was opened on (its path is looked up when it is applied: a rename
    /// in between is followed).
    pub(crate) ino: u64,
    /// Changed since it was opened or last applied.
    pub(crate) dirty: bool,
    /// The processes that opened it or wrote through it, as (thread, thread group):
    /// only these see its size before it is applied.
    pub(crate) writers: Vec<(u32, u32)>,
    /// A write or truncation past the write limit was refused: the size it would have
    /// made. The copy is then never applied: each close after a change is a recorded
    /// refusal, and the file keeps what it had.
    pub(crate) oversized: Option<u64>,
    /// The node's version count ([`Handles::version_of`]) when the copy last held
    /// what the file holds (filled from it, or applied to it); None: not since.
    pub(crate) current_at: Option<u64>,
    /// Being applied: what was taken from it is on its way to the file.
    pub(crate) applying: bool,
    /// The questions allowed at the open of each handle open for writing on it
    /// (crate::standing); a released handle's is gone.
    open: Vec<Weak<Standing>>,
    /// An apply of it was refused, and it has not been emptied or filled again since:
    /// it may hold what was refused, so no open's answer stands for its next apply.
    pub(crate) refused: bool,
    /// The bytes it is counted for in the view's total of private copies.
    counted: u64,
    /// That total, shared by every copy of the view.
    held: Arc<AtomicU64>,
}

/// The private copies of a view hold at most this many times `max_process_file_bytes`
/// together (they are memory): past it a write fails with ENOSPC, as on a full disk.
pub(crate) const COPIES_PER_FILE_LIMIT: u64 = 4;

impl Drop for Private {
    fn drop(&mut self) {
        self.held.fetch_sub(self.counted, Ordering::AcqRel);
    }
}

/// Writing processes remembered per open file at most.
const MAX_WRITERS: usize = 16;

impl Private {
    /// A copy opened by thread `tid`, not changed yet, counted in `held`.
    pub(crate) fn new(copy: File, ino: u64, tid: u32, held: Arc<AtomicU64>) -> Private {
        Private {
            copy: Arc::new(copy),
            ino,
            dirty: false,
            writers: vec![(tid, crate::peer::process_of(tid))],
            oversized: None,
            current_at: None,
            applying: false,
            open: Vec::new(),
            refused: false,
            counted: 0,
            held,
        }
    }

    /// Counts the copy as at least `len` bytes (see [`Private::count`]).
    pub(crate) fn grow_to(&mut self, len: u64, total: u64) -> std::io::Result<()> {
        match len > self.counted {
            true => self.count(len, total),
            false => Ok(()),
        }
    }

    /// Counts the copy as `len` bytes from now on, before it grows (or once it shrank)
    /// to that: Err (ENOSPC) if growing would take the view's copies past `total`.
    pub(crate) fn count(&mut self, len: u64, total: u64) -> std::io::Result<()> {
        if len <= self.counted {
            self.held.fetch_sub(self.counted - len, Ordering::AcqRel);
            self.counted = len;
            return Ok(());
        }
        let more = len - self.counted;
        let before = self.held.fetch_add(more, Ordering::AcqRel);
        if before.saturating_add(more) > total {
            self.held.fetch_sub(more, Ordering::AcqRel);
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.counted = len;
        Ok(())
    }

    /// A handle open for writing on it, with the answers of its open.
    pub(crate) fn opened_by(&mut self, standing: &Arc<Standing>) {
        self.open.retain(|w| w.strong_count() > 0);
        self.open.push(Arc::downgrade(standing));
    }

    /// The answers of every handle open for writing on it now; none after a refused
    /// apply (see `refused`).
    pub(crate) fn open_standings(&self) -> Vec<Arc<Standing>> {
        match self.refused {
            true => Vec::new(),
            false => self.open.iter().filter_map(Weak::upgrade).collect(),
        }
    }

    /// Thread `tid` writes through it (its process is named once per thread).
    pub(crate) fn written_by(&mut self, tid: u32) {
        if self.writers.iter().any(|(t, _)| *t == tid) {
            return;
        }
        if self.writers.len() >= MAX_WRITERS {
            self.writers.remove(1);
        }
        self.writers.push((tid, crate::peer::process_of(tid)));
    }
}

/// One open file or directory.
#[derive(Debug)]
pub(crate) enum Handle {
    /// Opened for reading: the workspace's file itself, read at offsets; the node.
    Read(Arc<File>, u64),
    /// Opened for writing.
    Write(Writer),
    /// An open directory.
    Dir(Listing),
}

/// A node's private copy (what `lock` reaches) and its turn.
#[derive(Debug)]
pub(crate) struct Shared {
    copy: Mutex<Private>,
    /// The same copy, to read its size while its lock is held (by a long apply, or a
    /// write): the size every process is told at least (see [`Handles::copy_size_on`]).
    size_probe: Arc<File>,
    /// Held while the copy is applied, filled or made empty by an open: one at a time,
    /// so versions reach the file in the order they were taken. The copy's own lock is
    /// held only while it is read or written: writes to it go on while it is applied,
    /// among them the kernel's writeback of a shared mapping's pages, which the
    /// invalidation after an apply waits for.
    turn: Mutex<()>,
}

impl Shared {
    fn new(copy: Private) -> Shared {
        let size_probe = Arc::clone(&copy.copy);
        Shared {
            copy: Mutex::new(copy),
            size_probe,
            turn: Mutex::new(()),
        }
    }

    /// The copy's turn to be applied or filled.
    pub(crate) fn turn(&self) -> LockResult<MutexGuard<'_, ()>> {
        self.turn.lock()
    }
}

impl std::ops::Deref for Shared {
    type Target = Mutex<Private>;

    fn deref(&self) -> &Mutex<Private> {
        &self.copy
    }
}

/// One open for writing: its node's shared private copy.
#[derive(Debug)]
pub(crate) struct Writer {
    shared: Arc<Shared>,
    /// Opened with `O_APPEND`: each write goes at the copy's end (the kernel's offset
    /// follows its size of the file, which another process's `stat` sets back).
    pub(crate) append: AtomicBool,
    /// The questions a person allowed at its open (held for as long as it is open).
    _standing: Arc<Standing>,
}

impl Writer {
    /// A handle on `shared`, whose open's answers are `standing` (registered with the
    /// copy by the caller, under its lock).
    pub(crate) fn new(shared: Arc<Shared>, append: bool, standing: Arc<Standing>) -> Writer {
        Writer {
            shared,
            append: AtomicBool::new(append),
            _standing: standing,
        }
    }
}

impl std::ops::Deref for Writer {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// Version counters kept for the nodes, each shared by the nodes equal modulo this.
const VERSION_STRIPES: usize = 1024;

/// Every open handle, by the number the kernel gives back.
#[derive(Debug)]
pub(crate) struct Handles {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Handle>>>,
    /// Each node's private copy while a handle holds it open for writing.
    copies: Mutex<HashMap<u64, Weak<Shared>>>,
    /// How many versions were written, by node.
    versions: Versions,
    /// The bytes every private copy holds together (see [`Private::count`]).
    held: Arc<AtomicU64>,
    /// The bytes the directory listings open now hold together (see [`LISTED_AT_MOST`]).
    listed: AtomicU64,
}

/// The most the listings of open directories may hold together: a process opening a
/// large directory again and again, keeping each open, is refused (ENOMEM) past it.
const LISTED_AT_MOST: u64 = 256 << 20;

/// What a listing holds, about: each entry's name and its place in the list.
fn listing_bytes(listing: &Listing) -> u64 {
    listing
        .iter()
        .map(|(_, _, name)| name.len() as u64 + 48)
        .sum()
}

/// How many versions of each node were written, through the view or another door
/// (striped: a node that shares its counter with another costs at most a needless
/// second look, or a copy filled again).
#[derive(Debug, Clone)]
pub(crate) struct Versions(Arc<[AtomicU64]>);

impl Default for Versions {
    fn default() -> Versions {
        Versions((0..VERSION_STRIPES).map(|_| AtomicU64::new(0)).collect())
    }
}

impl Versions {
    /// A new version of node `ino` was written.
    pub(crate) fn wrote(&self, ino: u64) {
        self.0[stripe(ino)].fetch_add(1, Ordering::AcqRel);
    }
}

impl Default for Handles {
    fn default() -> Handles {
        Handles {
            next: AtomicU64::new(0),
            open: Mutex::default(),
            copies: Mutex::default(),
            versions: Versions::default(),
            held: Arc::default(),
            listed: AtomicU64::new(0),
        }
    }
}

impl Handles {
    /// The count of versions the view wrote of node `ino` (or of one sharing its
    /// counter): a file opened before it moved was opened on an older version.
    pub(crate) fn version_of(&self, ino: u64) -> u64 {
        self.versions.0[stripe(ino)].load(Ordering::Acquire)
    }

    /// The view wrote a new version of node `ino`.
    pub(crate) fn wrote(&self, ino: u64) {
        self.versions.wrote(ino);
    }

    /// The counters, for what tells of other doors' writes.
    pub(crate) fn versions(&self) -> Versions {
        self.versions.clone()
    }

    /// Keeps `h`; its number.
    pub(crate) fn add(&self, h: Handle) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        if let Ok(mut open) = self.open.lock() {
            open.insert(fh, Arc::new(h));
        }
        fh
    }

    /// Whether another file may be opened: not once the handles open hold half the
    /// gateway's descriptors, so that a command opening files until it can open no
    /// more cannot leave the gateway none for its own work (its log, its backups,
    /// `/proc`), which every other process's request needs.
    pub(crate) fn room(&self) -> bool {
        static AT_MOST: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let at_most = *AT_MOST.get_or_init(|| {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            let soft = limit.current.unwrap_or(1 << 20);
            usize::try_from(soft / 2).unwrap_or(usize::MAX).max(64)
        });
        self.open.lock().is_ok_and(|o| o.len() < at_most)
    }

    /// The handle numbered `fh`.
    pub(crate) fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.open.lock().ok()?.get(&fh).cloned()
    }

    /// Whether handle `fh` writes through a private copy.
    pub(crate) fn is_write(&self, fh: u64) -> bool {
        self.get(fh)
            .is_some_and(|h| matches!(h.as_ref(), Handle::Write(_)))
    }

    /// A file open for reading on node `ino`, if any.
    pub(crate) fn read_of(&self, ino: u64) -> Option<Arc<File>> {
        let open = self.open.lock().ok()?;
        open.values().find_map(|h| match h.as_ref() {
            Handle::Read(file, of) if *of == ino => Some(Arc::clone(file)),
            _ => None,
        })
    }

    /// The size of a private copy open on node `ino` with changes not applied yet that
    /// process `tgid` opened or wrote, if any: `fstat` names no open file, and a writer
    /// asks it before it closes (git's index records what it answers). Another process
    /// sees the file as the workspace has it: the write is not decided yet.
    pub(crate) fn pending_size_of(&self, ino: u64, tgid: u32) -> Option<u64> {
        let open = self.open.lock().ok()?;
        open.values().find_map(|h| match h.as_ref() {
            // A copy being applied is skipped, not waited for (its write may be long).
            Handle::Write(p) => {
                let p = p.try_lock().ok()?;
                (p.ino == ino && p.dirty && p.writers.iter().any(|(_, g)| *g == tgid))
                    .then(|| p.copy.metadata().ok().map(|m| m.len()))
                    .flatten()
            }
            _ => None,
        })
    }

    /// The size of node `ino`'s private copy while a handle holds it open for writing,
    /// read without its lock. The kernel keeps one size per file for every process, and
    /// one smaller than the copy's would cut off the pages a writer has mapped there
    /// (SQLite's shared index, grown by one process while another asks its size).
    pub(crate) fn copy_size_on(&self, ino: u64) -> Option<u64> {
        self.copy_meta_on(ino).map(|m| m.len())
    }

    /// The metadata of the private copy open on node `ino`, if one is.
    pub(crate) fn copy_meta_on(&self, ino: u64) -> Option<std::fs::Metadata> {
        let copies = self.copies.lock().ok()?;
        let shared = copies.get(&ino).and_then(Weak::upgrade)?;
        drop(copies);
        shared.size_probe.metadata().ok()
    }

    /// The private copies open on node `ino` with changes not applied yet that process
    /// `tgid` opened or wrote (a copy being applied is skipped).
    pub(crate) fn pending_of(&self, ino: u64, tgid: u32) -> Vec<u64> {
        let Ok(open) = self.open.lock() else {
            return Vec::new();
        };
        let pending = |h: &Handle| match h {
            Handle::Write(p) => p.try_lock().is_ok_and(|p| {
                p.ino == ino && p.dirty && p.writers.iter().any(|(_, g)| *g == tgid)
            }),
            _ => false,
        };
        (open.iter())
            .filter(|(_, h)| pending(h))
            .map(|(fh, _)| *fh)
            .collect()
    }

    /// Whether node `ino` has a private copy open with changes not applied yet (or
    /// being applied): its size differs between processes.
    pub(crate) fn pending_on(&self, ino: u64) -> bool {
        let Ok(open) = self.open.lock() else {
            return true;
        };
        open.values().any(|h| match h.as_ref() {
            Handle::Write(p) => p
                .try_lock()
                .map_or(true, |p| p.ino == ino && (p.dirty || p.applying)),
            _ => false,
        })
    }

    /// The private copy open as `fh` is written at its end (`O_APPEND`).
    pub(crate) fn appending(&self, fh: u64) {
        if let Some(h) = self.get(fh)
            && let Handle::Write(w) = h.as_ref()
        {
            w.append.store(true, Ordering::Relaxed);
        }
    }

    /// Node `ino`'s private copy: the one open for writing on it, else a new empty one
    /// (first opened by thread `tid`).
    pub(crate) fn copy_on(&self, ino: u64, tid: u32) -> std::io::Result<Arc<Shared>> {
        let mut copies = (self.copies.lock()).map_err(|_| std::io::Error::other("poisoned"))?;
        if let Some(shared) = copies.get(&ino).and_then(Weak::upgrade) {
            return Ok(shared);
        }
        // The nodes whose every handle was released.
        copies.retain(|_, w| w.strong_count() > 0);
        let held = Arc::clone(&self.held);
        let shared = Arc::new(Shared::new(Private::new(private_copy()?, ino, tid, held)));
        copies.insert(ino, Arc::downgrade(&shared));
        Ok(shared)
    }

    /// Lets go of `fh`.
    pub(crate) fn remove(&self, fh: u64) -> Option<Arc<Handle>> {
        let removed = self.open.lock().ok()?.remove(&fh);
        if let Some(Handle::Dir(listing)) = removed.as_deref() {
            self.listed
                .fetch_sub(listing_bytes(listing), Ordering::AcqRel);
        }
        removed
    }

    /// Keeps an open directory's `listing`; its number. ENOMEM past [`LISTED_AT_MOST`].
    pub(crate) fn add_listing(&self, listing: Listing) -> Result<u64, fuser::Errno> {
        let bytes = listing_bytes(&listing);
        let before = self.listed.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > LISTED_AT_MOST {
            self.listed.fetch_sub(bytes, Ordering::AcqRel);
            return Err(fuser::Errno::ENOMEM);
        }
        Ok(self.add(Handle::Dir(listing)))
    }
}

fn stripe(ino: u64) -> usize {
    (ino % VERSION_STRIPES as u64) as usize
}

/// Reads up to `size` bytes of `file` at `offset`.
pub(crate) fn read_at(file: &File, offset: u64, size: u32) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size as usize];
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// A new private copy: an unnamed file in memory.
pub(crate) fn private_copy() -> std::io::Result<File> {
    use rustix::fs::{MemfdFlags, memfd_create};
    Ok(File::from(memfd_create(
        "fsgate-view",
        MemfdFlags::CLOEXEC,
    )?))
}

/// The whole of `file`, up to `limit` bytes (Err: its size, over it).
pub(crate) fn whole(file: &File, limit: u64) -> std::io::Result<Result<Vec<u8>, u64>> {
    let len = file.metadata()?.len();
    // One read holds at most 4 GiB: a larger copy is refused as oversized, never cut.
    let Ok(whole) = u32::try_from(len) else {
        return Ok(Err(len));
    };
    if len > limit {
        return Ok(Err(len));
    }
    let bytes = read_at(file, 0, whole)?;
    Ok(Ok(bytes))
}

/// Copies `from` whole into `to` (at its start).
pub(crate) fn copy_into(from: &File, to: &File) -> std::io::Result<()> {
    let mut offset = 0u64;
    loop {
        let chunk = read_at(from, offset, 1 << 20)?;
        if chunk.is_empty() {
            return Ok(());
        }
        to.write_all_at(&chunk, offset)?;
        offset += chunk.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the open listings hold is counted while they are open, and given back at
    /// their release; a listing past the bound is refused and counts nothing.
    #[test]
    fn open_listings_are_counted_and_bounded() {
        let handles = Handles::default();
        let listing = |n: usize| -> Listing {
            (0..n)
                .map(|i| {
                    (
                        i as u64 + 2,
                        fuser::FileType::RegularFile,
                        format!("f{i:06}"),
                    )
                })
                .collect()
        };
        let a = handles.add_listing(listing(1000)).expect("a");
        let b = handles.add_listing(listing(10)).expect("b");
        let held = handles.listed.load(Ordering::Acquire);
        assert_eq!(
            held,
            listing_bytes(&listing(1000)) + listing_bytes(&listing(10))
        );
        handles.remove(a);
        handles.remove(b);
        assert_eq!(handles.listed.load(Ordering::Acquire), 0);
        handles.listed.store(LISTED_AT_MOST - 10, Ordering::Release);
        assert_eq!(
            handles.add_listing(listing(1)).err(),
            Some(fuser::Errno::ENOMEM)
        );
        assert_eq!(handles.listed.load(Ordering::Acquire), LISTED_AT_MOST - 10);
    }
}
