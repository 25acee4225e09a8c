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

use rustix::fs::SeekFrom;
use sha2::{Digest, Sha256};

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

/// Data bytes of an opened file as the filesystem reports them: its allocated blocks,
/// never more than its apparent size (a small file's last block is not all data).
pub(crate) fn data_bytes(fd: impl AsFd) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd)?;
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let blocks = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
    Ok((size, blocks.min(size)))
}

/// Makes `dst` (empty, writable) a copy of `src`: a clone where the filesystem can,
/// else a sparse copy. Returns what was stored and its hash.
pub(crate) fn clone_or_copy(
    src: impl AsFd,
    dst: impl AsFd,
    caps: Caps,
) -> Result<Copied, CopyError> {
    let (size, data) = data_bytes(&src)?;
    check(size, data, caps)?;
    if rustix::fs::ioctl_ficlone(&dst, &src).is_ok() {
        // The clone is a snapshot: its own size and extents are what was stored.
        let (size, data) = data_bytes(&dst)?;
        check(size, data, caps)?;
        return walk(&dst, None, caps);
    }
    let copied = walk(&src, Some(dst.as_fd()), caps)?;
    rustix::fs::ftruncate(&dst, copied.size)?;
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
    let (mut len, _) = data_bytes(&src)?;
    if len > caps.len {
        return Err(CopyError::Limit {
            data: false,
            seen: len,
        });
    }
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let (mut pos, mut stored) = (0u64, 0u64);
    while pos < len {
        let data = next_edge(&src, SeekFrom::Data(pos), len)?;
        hash_zeros(&mut hasher, data - pos);
        pos = data;
        let hole = match next_edge(&src, SeekFrom::Hole(pos), len)? {
            h if h > pos => h,
            _ => (pos + CHUNK as u64).min(len), // changed under us: read on, never spin
        };
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
            }
            hasher.update(&buf[..n]);
            stored += n as u64;
            pos += n as u64;
        }
    }
    Ok(Copied {
        size: len,
        stored,
        sha256: hex::encode(hasher.finalize()),
    })
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
