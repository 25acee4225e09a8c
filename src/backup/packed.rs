//! One file per version: the content, then its record as a trailer.
//!
//! ```text
//! [content: size bytes][record: JSON, n bytes][n: u64 LE][SHA-256 of record][MAGIC]
//! ```
//!
//! The trailer is written after the content and the file is synced once; until then
//! (and after a crash that tore it) its last bytes are not a trailer whose magic, length
//! and checksum agree with the file's length, so it reads as incomplete, never as a
//! version. One file means one inode and one file sync per backup.

use std::io;
use std::os::fd::AsFd;

use sha2::{Digest, Sha256};

use super::layout::Sidecar;

/// Last bytes of every complete version file.
const MAGIC: &[u8; 8] = b"fsgbak2\n";
/// The fixed part at the end: record length, record checksum, magic.
const FOOTER: usize = 8 + 32 + MAGIC.len();
/// Records are a few hundred bytes; a longer one is not ours.
const MAX_RECORD: u64 = 64 * 1024;

/// Writes `meta` as the trailer of `file`, whose content is its first `at` bytes.
pub(crate) fn append_record(file: impl AsFd, at: u64, meta: &Sidecar) -> io::Result<()> {
    let mut out = serde_json::to_vec(meta).map_err(io::Error::other)?;
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&(out.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(MAGIC);
    super::sparse::write_all_at(file.as_fd(), &out, at)?;
    // A clone or copy of a file that shrank may have left bytes past `at`.
    rustix::fs::ftruncate(&file, at + out.len() as u64)?;
    Ok(())
}

/// Reads the trailer of a version file: its record and the content's length. Err says
/// why it is not a complete version (being written, torn by a crash, not ours).
pub(crate) fn read_record(file: impl AsFd) -> Result<(Sidecar, u64), String> {
    let st = rustix::fs::fstat(&file).map_err(|e| format!("stat: {e}"))?;
    let len = u64::try_from(st.st_size).unwrap_or(0);
    if len < FOOTER as u64 {
        return Err("no record (shorter than its trailer)".into());
    }
    let mut footer = [0u8; FOOTER];
    read_exact_at(&file, &mut footer, len - FOOTER as u64)?;
    if &footer[40..] != MAGIC {
        return Err("no record (incomplete or torn)".into());
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&footer[..8]);
    let n = u64::from_le_bytes(n);
    if n > MAX_RECORD || n > len - FOOTER as u64 {
        return Err(format!("record length {n} does not fit the file"));
    }
    let mut record = vec![0u8; usize::try_from(n).unwrap_or(0)];
    let start = len - FOOTER as u64 - n;
    read_exact_at(&file, &mut record, start)?;
    if Sha256::digest(&record).as_slice() != &footer[8..40] {
        return Err("record checksum does not match".into());
    }
    let meta: Sidecar = serde_json::from_slice(&record).map_err(|e| format!("record: {e}"))?;
    if meta.size != start {
        return Err(format!(
            "record says {} bytes of content, the file holds {start}",
            meta.size
        ));
    }
    Ok((meta, start))
}

fn read_exact_at(fd: impl AsFd, mut buf: &mut [u8], mut pos: u64) -> Result<(), String> {
    while !buf.is_empty() {
        match rustix::io::pread(&fd, &mut *buf, pos) {
            Ok(0) => return Err("file shrank while read".into()),
            Ok(n) => {
                buf = &mut buf[n..];
                pos += n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(size: u64) -> Sidecar {
        Sidecar {
            format: 2,
            path: "a/b.txt".into(),
            ts: "2026-11-23T11:00:00.000000001Z".into(),
            sha256: "00".repeat(32),
            size,
            stored: Some(size),
            original: true,
        }
    }

    #[test]
    fn a_record_round_trips_and_every_torn_prefix_is_refused() {
        let tmp = tempfile::tempfile().expect("tempfile");
        super::super::sparse::write_all_at(tmp.as_fd(), b"hello", 0).expect("content");
        append_record(&tmp, 5, &meta(5)).expect("append");
        let (m, len) = read_record(&tmp).expect("complete");
        assert_eq!((m, len), (meta(5), 5));
        let full = rustix::fs::fstat(&tmp).expect("stat").st_size as u64;
        for cut in 0..full {
            rustix::fs::ftruncate(&tmp, cut).expect("truncate");
            assert!(
                read_record(&tmp).is_err(),
                "a file cut at {cut} reads as whole"
            );
        }
    }

    #[test]
    fn a_damaged_record_or_wrong_length_is_refused() {
        let tmp = tempfile::tempfile().expect("tempfile");
        super::super::sparse::write_all_at(tmp.as_fd(), b"hello", 0).expect("content");
        append_record(&tmp, 5, &meta(4)).expect("append");
        assert!(
            read_record(&tmp).is_err(),
            "size does not match the content"
        );
        append_record(&tmp, 5, &meta(5)).expect("append");
        // Flip one byte of the record: the checksum catches it.
        super::super::sparse::write_all_at(tmp.as_fd(), b"X", 8).expect("flip");
        let err = read_record(&tmp).expect_err("damaged");
        assert!(err.contains("checksum"), "{err}");
    }
}
