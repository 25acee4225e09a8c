//! Names, kinds and inode numbers of large directories that have not changed since
//! they were read, so that listing one again costs a `statx` instead of a full read
//! (on ext4 a 1,000-entry directory's read rebuilds its hashed index: about 270 us of
//! kernel time).
//!
//! # Why a snapshot cannot go stale
//!
//! Adding, removing or renaming an entry sets the directory's ctime and mtime to the
//! kernel's current time, which is never more than one clock tick (at most 10 ms on
//! Linux) behind the fine clock. A snapshot is taken as: fine clock `t0`, `statx` of the
//! open directory (stamp), then the read; it is kept only if both times in the stamp
//! are older than `t0 - MARGIN`. Any change after `t0` then gets a ctime later than the
//! stamp's, so a lookup (a fresh `statx` compared field for field) sees the difference
//! and reads the directory again. A change between the `statx` and the read is caught
//! the same way at the next lookup. ctime cannot be set from user space.
//!
//! A filesystem that keeps whole seconds only (ext4 with 128-byte inodes, as `mkfs`
//! makes on a small device) gives a change made later in the same second the same
//! time: where both times have no fraction, they must be older by a second more.
//!
//! Only local filesystems whose directory times are the kernel's own are trusted (ext4,
//! XFS, btrfs, tmpfs): a network or FUSE filesystem may report times from elsewhere or
//! cached. Only names, kinds and the inode numbers the directory gives are kept (never
//! sizes or times, which change without the directory changing; a name holds another
//! inode only after a change of the directory's entries), and only the walks and
//! listings that read nothing more use it; walks before a change always read the
//! directory.
//!
//! The cache is bounded in bytes ([`BUDGET`]); past it, older snapshots are dropped.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Statx, StatxFlags, makedev, statx};

use super::kind::FileKind;

/// How much older than the read both directory times must be: well over a clock tick.
const MARGIN: Duration = Duration::from_millis(100);
/// The same where the filesystem keeps whole seconds: a second more.
const COARSE_MARGIN: Duration = Duration::from_millis(1_100);
/// Directories with fewer entries are cheap to read again: not kept.
const MIN_ENTRIES: usize = 64;
/// Bytes all snapshots may hold together (names plus a fixed cost per entry).
const BUDGET: usize = 8 * 1024 * 1024;
/// What one entry costs beyond its name's bytes (the boxed name, kind and inode number).
const ENTRY_OVERHEAD: usize = 40;

/// Filesystem magic numbers whose directory times are kept by the local kernel.
const TRUSTED_FS: [i64; 4] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // XFS
    0x9123_683E, // btrfs
    0x0102_1994, // tmpfs
];

/// One directory's names, kinds and inode numbers (`d_ino`), in name order.
pub(crate) type Names = Arc<[(Box<str>, FileKind, Option<u64>)]>;

/// What identifies a directory and its state: any change of entries changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    ctime: (i64, u32),
    mtime: (i64, u32),
    size: u64,
}

impl Stamp {
    fn of(st: &Statx) -> Option<Stamp> {
        let need = (StatxFlags::CTIME | StatxFlags::MTIME | StatxFlags::INO).bits();
        (st.stx_mask & need == need).then(|| Stamp {
            dev: makedev(st.stx_dev_major, st.stx_dev_minor),
            ino: st.stx_ino,
            ctime: (st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec),
            mtime: (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
            size: st.stx_size,
        })
    }

    /// How much older than the read both times must be: more where they look like
    /// whole seconds (no fraction in either; on a fine clock one in a billion).
    fn margin(&self) -> Duration {
        match (self.ctime.1, self.mtime.1) {
            (0, 0) => COARSE_MARGIN,
            _ => MARGIN,
        }
    }

    /// Both times at or before `limit`.
    fn settled_before(&self, limit: SystemTime) -> bool {
        let Ok(limit) = limit.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let at_or_before = |(sec, nsec): (i64, u32)| {
            u64::try_from(sec).is_ok_and(|s| Duration::new(s, nsec) <= limit)
        };
        at_or_before(self.ctime) && at_or_before(self.mtime)
    }
}

struct Snapshot {
    stamp: Stamp,
    names: Names,
    bytes: usize,
    /// When it was last used, to drop the oldest first.
    used: u64,
}

#[derive(Default)]
struct Cache {
    snapshots: HashMap<(u64, u64), Snapshot>,
    /// Per device: whether its filesystem is trusted (asked once).
    trusted: HashMap<u64, bool>,
    bytes: usize,
    clock: u64,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

fn cache() -> MutexGuard<'static, Option<Cache>> {
    CACHE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A look at one open directory before it is read.
#[derive(Debug)]
pub(crate) struct Probe {
    /// The fine clock just before the `statx`.
    t0: SystemTime,
    stamp: Option<Stamp>,
}

/// Looks `dir` up: its snapshot if it has not changed since, else a probe to hand to
/// [`keep`] once it has been read.
pub(crate) fn lookup(dir: &impl AsFd) -> Result<Names, Probe> {
    let t0 = SystemTime::now();
    let stamp = statx(dir, c"", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS)
        .ok()
        .and_then(|st| Stamp::of(&st));
    let mut guard = cache();
    if let (Some(stamp), Some(c)) = (stamp, guard.as_mut()) {
        c.clock += 1;
        let now = c.clock;
        match c.snapshots.get_mut(&(stamp.dev, stamp.ino)) {
            Some(s) if s.stamp == stamp => {
                s.used = now;
                return Ok(Arc::clone(&s.names));
            }
            Some(_) => {
                if let Some(old) = c.snapshots.remove(&(stamp.dev, stamp.ino)) {
                    c.bytes -= old.bytes;
                }
            }
            None => {}
        }
    }
    Err(Probe { t0, stamp })
}

/// Keeps what was read after `probe` (names, kinds and inode numbers, in name order) if
/// the directory
/// qualifies: large enough, settled before the read began, on a trusted filesystem.
pub(crate) fn keep<'a>(
    probe: Probe,
    dir: &impl AsFd,
    entries: impl ExactSizeIterator<Item = (&'a str, FileKind, Option<u64>)>,
) {
    let Some(stamp) = probe.stamp else { return };
    if entries.len() < MIN_ENTRIES {
        return;
    }
    let Some(limit) = probe.t0.checked_sub(stamp.margin()) else {
        return;
    };
    if !stamp.settled_before(limit) {
        return;
    }
    let names: Names = entries.map(|(n, k, i)| (Box::from(n), k, i)).collect();
    let bytes = names.iter().map(|(n, ..)| n.len() + ENTRY_OVERHEAD).sum();
    if bytes > BUDGET / 4 {
        return;
    }
    let mut guard = cache();
    let c = guard.get_or_insert_with(Cache::default);
    let trusted = *c
        .trusted
        .entry(stamp.dev)
        .or_insert_with(|| trusted_fs(dir));
    if !trusted {
        return;
    }
    c.clock += 1;
    let snap = Snapshot {
        stamp,
        names,
        bytes,
        used: c.clock,
    };
    if let Some(old) = c.snapshots.insert((stamp.dev, stamp.ino), snap) {
        c.bytes -= old.bytes;
    }
    c.bytes += bytes;
    evict_to_budget(c);
}

/// Drops the least recently used snapshots until the cache fits its budget.
fn evict_to_budget(c: &mut Cache) {
    while c.bytes > BUDGET {
        let Some(key) = c
            .snapshots
            .iter()
            .min_by_key(|(_, s)| s.used)
            .map(|(k, _)| *k)
        else {
            c.bytes = 0;
            return;
        };
        if let Some(old) = c.snapshots.remove(&key) {
            c.bytes -= old.bytes;
        }
    }
}

// `f_type`'s integer type differs between architectures.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn trusted_fs(dir: &impl AsFd) -> bool {
    rustix::fs::fstatfs(dir).is_ok_and(|s| TRUSTED_FS.contains(&(s.f_type as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<(String, FileKind)> {
        (0..n)
            .map(|i| (format!("f{i:04}"), FileKind::File))
            .collect()
    }

    fn keep_names(probe: Probe, dir: &impl AsFd, list: &[(String, FileKind)]) {
        keep(probe, dir, list.iter().map(|(n, k)| (n.as_str(), *k, None)));
    }

    /// A directory settled long ago is kept and found again; any change of its entries
    /// (an added file) misses; a small or freshly changed directory is never kept.
    #[test]
    fn snapshots_are_found_until_the_directory_changes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = std::fs::File::open(tmp.path()).expect("open");
        let list = names(100);
        // Just created: not settled, so not kept.
        let probe = lookup(&dir).expect_err("empty cache");
        keep_names(probe, &dir, &list);
        assert!(lookup(&dir).is_err(), "a fresh directory is not kept");
        // As if read well after its last change.
        let mut probe = lookup(&dir).expect_err("miss");
        probe.t0 += Duration::from_secs(5);
        if !trusted_fs(&dir) {
            return; // The temporary directory's filesystem is not one that is kept.
        }
        keep_names(probe, &dir, &list);
        let hit = lookup(&dir).expect("kept");
        assert_eq!(hit.len(), 100);
        assert_eq!(&*hit[7].0, "f0007");
        std::fs::write(tmp.path().join("new"), "x").expect("write");
        assert!(lookup(&dir).is_err(), "a changed directory is read again");
        let mut probe = lookup(&dir).expect_err("miss");
        probe.t0 += Duration::from_secs(5);
        keep_names(probe, &dir, &list[..10]);
        assert!(lookup(&dir).is_err(), "a small directory is not kept");
    }

    /// Times after the limit, or before the epoch, never count as settled.
    #[test]
    fn settled_needs_both_times_before_the_limit() {
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let stamp = |c: i64, m: i64| Stamp {
            dev: 1,
            ino: 2,
            ctime: (c, 0),
            mtime: (m, 0),
            size: 0,
        };
        assert!(stamp(999, 999).settled_before(base));
        assert!(stamp(1_000, 1_000).settled_before(base));
        assert!(!stamp(1_001, 999).settled_before(base));
        assert!(!stamp(999, 1_001).settled_before(base));
        assert!(!stamp(-1, 5).settled_before(base));
    }

    /// Times of whole seconds (a filesystem that keeps no fraction) need a second
    /// more: a change later in the same second would show the same time.
    #[test]
    fn whole_second_times_need_a_second_more() {
        let stamp = |nsec: u32| Stamp {
            dev: 1,
            ino: 2,
            ctime: (1_000, nsec),
            mtime: (1_000, nsec),
            size: 0,
        };
        assert_eq!(stamp(0).margin(), COARSE_MARGIN);
        assert_eq!(stamp(5).margin(), MARGIN);
        assert!(COARSE_MARGIN >= Duration::from_secs(1) + MARGIN);
        // Read half a second after a whole-second time: not settled.
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_500);
        let limit = |s: &Stamp| t0.checked_sub(s.margin()).expect("limit");
        assert!(!stamp(0).settled_before(limit(&stamp(0))));
        assert!(stamp(5).settled_before(limit(&stamp(5))));
    }
}
