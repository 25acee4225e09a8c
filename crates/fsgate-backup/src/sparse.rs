//! Sparse-aware, bounded copy of a file into the backup store.
//!
//! The copy walks the source's data extents (`SEEK_DATA`/`SEEK_HOLE`) and writes only
//! them, so a hole stays a hole in the copy; holes are hashed as zeros from one small
//! buffer, never materialised. Where the filesystem can, the data is cloned
//! (`FICLONE`) instead and the clone is then only read for its hash. Every byte stored
//! counts against a cap checked before it is written, so a file that grows during the
//! copy stops at the limit instead of filling the store.

use std::io;
use std::os::fd::AsFd;
use std::sync::Mutex;

use fsgate_base::sha256::Sha256;
use rustix::fs::SeekFrom;

/// Bytes read or hashed per step.
const CHUNK: usize = 64 * 1024;
/// Zeros hashed for holes: one buffer, reused.
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// How much one copy may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    /// Data bytes (outside holes) it may store.
    pub data: u64,
    /// Apparent length (holes included) it may hash.
    pub len: u64,
}

/// What a copy (or a hash pass over a clone) saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Copied {
    /// Apparent size of the content, holes included.
    pub size: u64,
    /// Bytes of data outside holes.
    pub stored: u64,
    /// SHA-256 of the full content (holes as zeros), lowercase hex.
    pub sha256: String,
}

/// Why a copy stopped.
#[derive(Debug)]
pub(crate) enum CopyError {
    /// A system call failed.
    Io(io::Error),
    /// The data passed [`Caps::data`] (`true`) or the length [`Caps::len`] (`false`).
    Limit {
        /// Which cap.
        data: bool,
        /// How far it had got when it stopped (at least the cap plus one).
        seen: u64,
    },
}

impl From<io::Error> for CopyError {
    fn from(e: io::Error) -> Self {
        CopyError::Io(e)
    }
}

impl From<rustix::io::Errno> for CopyError {
    fn from(e: rustix::io::Errno) -> Self {
        CopyError::Io(e.into())
    }
}

/// What one fstat of an opened file says about its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    /// Apparent size, holes included.
    pub size: u64,
    /// Data bytes as the filesystem reports them: its allocated blocks, never more than
    /// its size (a small file's last block is not all data).
    pub data: u64,
    /// The device it is on.
    pub dev: u64,
}

impl Sizes {
    /// From a stat of the file.
    pub(crate) fn of(size: u64, blocks: u64, dev: u64) -> Sizes {
        Sizes {
            size,
            data: blocks.saturating_mul(512).min(size),
            dev,
        }
    }

    /// Blocks cover the whole length: no hole to look for, so the copy reads straight
    /// through. (Blocks past the end or holding metadata can hide a hole: it is then
    /// copied as zeros, still the exact content and within the data cap, which counts
    /// those blocks.)
    fn dense(self) -> bool {
        self.data >= self.size
    }
}

/// One fstat of an opened file.
pub(crate) fn sizes(fd: impl AsFd) -> io::Result<Sizes> {
    let st = rustix::fs::fstat(fd)?;
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let blocks = u64::try_from(st.st_blocks).unwrap_or(0);
    Ok(Sizes::of(size, blocks, st.st_dev))
}

/// Devices whose files the store could not clone because the filesystems cannot
/// (`FICLONE` unsupported, or two filesystems): later copies from them go straight to
/// the sparse copy instead of failing the same `ioctl` on every backup.
#[derive(Debug, Default)]
pub(crate) struct NoClone(Mutex<Vec<u64>>);

/// Devices remembered at most (a workspace is on one or a few).
const NO_CLONE_MAX: usize = 64;

impl NoClone {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u64>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether files of `dev` are known not to clone here.
    pub(crate) fn knows(&self, dev: u64) -> bool {
        self.lock().contains(&dev)
    }

    fn note(&self, dev: u64) {
        let mut devs = self.lock();
        if !devs.contains(&dev) && devs.len() < NO_CLONE_MAX {
            devs.push(dev);
        }
    }
}

/// A clone failure that says the filesystems cannot clone at all, not this file (an
/// overlay's layers may differ per file: that only costs their clones, never a backup).
fn never_clones(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    matches!(
        e,
        Errno::OPNOTSUPP | Errno::XDEV | Errno::NOTTY | Errno::NOSYS
    )
}

/// Makes `dst` (empty, writable) a copy of `src`: a clone where the filesystem can,
/// else a sparse copy. Returns what was stored and its hash.
#[cfg(test)]
pub(crate) fn clone_or_copy(
    src: impl AsFd,
    dst: impl AsFd,
    caps: Caps,
) -> Result<Copied, CopyError> {
    let st = sizes(&src)?;
    copy_sized(src, st, dst, caps, &NoClone::default())
}

/// [`clone_or_copy`] of a source whose [`Sizes`] were just read; `no_clone` remembers
/// the devices whose files cannot be cloned into `dst`'s filesystem.
pub(crate) fn copy_sized(
    src: impl AsFd,
    st: Sizes,
    dst: impl AsFd,
    caps: Caps,
    no_clone: &NoClone,
) -> Result<Copied, CopyError> {
    check(st.size, st.data, caps)?;
    if !no_clone.knows(st.dev) {
        match rustix::fs::ioctl_ficlone(&dst, &src) {
            // The clone is a snapshot: its own size and extents are what was stored.
            Ok(()) => return walk(&dst, None, caps),
            Err(e) if never_clones(e) => no_clone.note(st.dev),
            Err(_) => {}
        }
    }
    let (copied, end) = walk_sized(&src, st, Some(dst.as_fd()), caps)?;
    if end < copied.size {
        // It ends in a hole: give the copy its length.
        rustix::fs::ftruncate(&dst, copied.size)?;
    }
    Ok(copied)
}

fn check(size: u64, data: u64, caps: Caps) -> Result<(), CopyError> {
    if data > caps.data {
        return Err(CopyError::Limit {
            data: true,
            seen: data,
        });
    }
    if size > caps.len {
        return Err(CopyError::Limit {
            data: false,
            seen: size,
        });
    }
    Ok(())
}

/// Reads `src`'s content extent by extent, hashing it (holes as zeros) and writing its
/// data at the same offsets of `dst` when given. Stops at the length `src` had when it
/// started, or earlier if it shrinks.
pub(crate) fn walk(
    src: impl AsFd,
    dst: Option<std::os::fd::BorrowedFd<'_>>,
    caps: Caps,
) -> Result<Copied, CopyError> {
    let st = sizes(&src)?;
    walk_sized(src, st, dst, caps).map(|(copied, _)| copied)
}

/// [`walk`] from the [`Sizes`] just read; also returns where the data written ends
/// (nothing is written at or past the content's length).
fn walk_sized(
    src: impl AsFd,
    st: Sizes,
    dst: Option<std::os::fd::BorrowedFd<'_>>,
    caps: Caps,
) -> Result<(Copied, u64), CopyError> {
    let mut len = st.size;
    if len > caps.len {
        return Err(CopyError::Limit {
            data: false,
            seen: len,
        });
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(len).unwrap_or(CHUNK))];
    let (mut pos, mut stored, mut end) = (0u64, 0u64, 0u64);
    while pos < len {
        let (data, hole) = if st.dense() {
            (pos, len)
        } else {
            extent(&src, pos, len)?
        };
        hash_zeros(&mut hasher, data - pos);
        pos = data;
        while pos < hole {
            let want = usize::try_from(hole - pos).unwrap_or(CHUNK).min(CHUNK);
            if stored + want as u64 > caps.data {
                return Err(CopyError::Limit {
                    data: true,
                    seen: stored + want as u64,
                });
            }
            let n = read_at(&src, &mut buf[..want], pos)?;
            if n == 0 {
                len = pos; // the file shrank under us: what we have is the content
                break;
            }
            if let Some(d) = dst {
                write_all_at(d, &buf[..n], pos)?;
                end = pos + n as u64;
            }
            hasher.update(&buf[..n]);
            stored += n as u64;
            pos += n as u64;
        }
    }
    let copied = Copied {
        size: len,
        stored,
        sha256: hex::encode(hasher.finalize()),
    };
    Ok((copied, end))
}

/// The next data extent at or after `pos`: where it starts and where the hole after it
/// starts, at most `len`.
fn extent(src: impl AsFd, pos: u64, len: u64) -> io::Result<(u64, u64)> {
    let data = next_edge(&src, SeekFrom::Data(pos), len)?;
    let hole = match next_edge(&src, SeekFrom::Hole(data), len)? {
        h if h > data => h,
        _ => (data + CHUNK as u64).min(len), // changed under us: read on, never spin
    };
    Ok((data, hole))
}

/// The next data start or hole start at or after the position `at` asks for, at most
/// `len`. Past the last data (`ENXIO`) it is `len`; a filesystem without
/// `SEEK_DATA`/`SEEK_HOLE` reports all of the file as data.
fn next_edge(fd: impl AsFd, at: SeekFrom, len: u64) -> io::Result<u64> {
    let from = match at {
        SeekFrom::Data(p) | SeekFrom::Hole(p) => p,
        _ => 0,
    };
    match rustix::fs::seek(&fd, at) {
        Ok(off) => Ok(off.min(len)),
        Err(rustix::io::Errno::NXIO) => Ok(len),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => match at {
            SeekFrom::Data(_) => Ok(from),
            _ => Ok(len),
        },
        Err(e) => Err(e.into()),
    }
}

/// Feeds `n` zero bytes to the hasher from the shared buffer.
pub(crate) fn hash_zeros(hasher: &mut Sha256, mut n: u64) {
    while n > 0 {
        let step = usize::try_from(n).unwrap_or(CHUNK).min(CHUNK);
        hasher.update(&ZEROS[..step]);
        n -= step as u64;
    }
}

fn read_at(fd: impl AsFd, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    loop {
        match rustix::io::pread(&fd, &mut *buf, pos) {
            Ok(n) => return Ok(n),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

pub(crate) fn write_all_at(fd: impl AsFd, mut buf: &[u8], mut pos: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match rustix::io::pwrite(&fd, buf, pos) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                pos += n as u64;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
