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

use fsgate_base::sha256::Sha256;

use super::layout::Sidecar;

/// Last bytes of every complete version file.
const MAGIC: &[u8; 8] = b"fsgbak2\n";
/// The fixed part at the end: record length, record checksum, magic.
const FOOTER: usize = 8 + 32 + MAGIC.len();
/// Records are a few hundred bytes; a longer one is not ours.
const MAX_RECORD: u64 = 64 * 1024;

/// Writes `meta` as the trailer of `file`, whose content is its first `at` bytes, and
/// cuts off whatever was past the trailer.
#[cfg(test)]
pub(crate) fn append_record(file: impl AsFd, at: u64, meta: &Sidecar) -> io::Result<()> {
    let end = write_record(&file, at, meta)?;
    rustix::fs::ftruncate(&file, end)?;
    Ok(())
}

/// Writes `meta` as the trailer of `file`, which is exactly `at` bytes long (a new
/// version just filled: nothing past it to cut, so no truncate, which costs a metadata
/// update). Returns the file's length with its trailer.
pub(crate) fn write_record(file: impl AsFd, at: u64, meta: &Sidecar) -> io::Result<u64> {
    let mut out = serde_json::to_vec(meta).map_err(io::Error::other)?;
    let digest = Sha256::digest(&out);
    out.extend_from_slice(&(out.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest);
    out.extend_from_slice(MAGIC);
    super::sparse::write_all_at(file.as_fd(), &out, at)?;
    Ok(at + out.len() as u64)
}

/// Why a file is not a complete version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unread {
    /// No trailer at its end: being written, or a crash's leftover (safe to sweep).
    Incomplete(String),
    /// A trailer whose record does not check, or a read that failed: possibly a
    /// damaged version, so never swept as a leftover.
    Damaged(String),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::Incomplete(r) | Unread::Damaged(r) => f.write_str(r),
        }
    }
}

/// Reads the trailer of a version file: its record and the content's length. Err says
/// why it is not a complete version (being written, torn by a crash, damaged, not ours).
/// Reads at most the trailer and [`MAX_RECORD`] bytes, whatever the file says.
pub(crate) fn read_record(file: impl AsFd) -> Result<(Sidecar, u64), Unread> {
    let st = rustix::fs::fstat(&file).map_err(|e| Unread::Damaged(format!("stat: {e}")))?;
    let len = u64::try_from(st.st_size).unwrap_or(0);
    if len < FOOTER as u64 {
        return Err(Unread::Incomplete(
            "no record (shorter than its trailer)".into(),
        ));
    }
    let mut footer = [0u8; FOOTER];
    read_exact_at(&file, &mut footer, len - FOOTER as u64).map_err(Unread::Damaged)?;
    if &footer[40..] != MAGIC {
        return Err(Unread::Incomplete("no record (incomplete or torn)".into()));
    }
    check_record(&file, &footer, len).map_err(Unread::Damaged)
}

/// The record a trailer with the magic in place points at, checked against the file.
fn check_record(
    file: impl AsFd,
    footer: &[u8; FOOTER],
    len: u64,
) -> Result<(Sidecar, u64), String> {
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
            mode: Some(0o640),
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
                matches!(read_record(&tmp), Err(Unread::Incomplete(_))),
                "a file cut at {cut} reads as whole or as damaged"
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
        assert!(
            matches!(&err, Unread::Damaged(r) if r.contains("checksum")),
            "{err}"
        );
    }

    /// A trailer with the magic, around an arbitrary length field and checksum.
    fn forged(body: &[u8], n: u64, digest: &[u8; 32]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(digest);
        out.extend_from_slice(MAGIC);
        out
    }

    fn file_with(bytes: &[u8]) -> std::fs::File {
        let tmp = tempfile::tempfile().expect("tempfile");
        super::super::sparse::write_all_at(tmp.as_fd(), bytes, 0).expect("write");
        tmp
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any bytes are refused cleanly, never read as a version, never a panic; a
        /// length field of any size (up to u64::MAX) is checked before it allocates.
        #[test]
        fn any_bytes_are_refused_cleanly(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            n in proptest::prelude::any::<u64>(),
            digest in proptest::prelude::any::<[u8; 32]>(),
            magic in proptest::prelude::any::<bool>(),
        ) {
            let bytes = if magic { forged(&body, n, &digest) } else { body.clone() };
            let got = read_record(file_with(&bytes));
            proptest::prop_assert!(got.is_err(), "{got:?}");
            if !magic && !bytes.ends_with(MAGIC) {
                proptest::prop_assert!(matches!(got, Err(Unread::Incomplete(_))));
            }
        }

        /// A well-formed trailer over a record of any path and content is read back
        /// exactly; any single changed byte in the record or trailer is refused.
        #[test]
        fn records_round_trip_and_any_flip_is_caught(
            content in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            path in "[^\\u{0}]{1,40}",
            flip in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let mut m = meta(content.len() as u64);
            m.path = path;
            let f = file_with(&content);
            append_record(&f, content.len() as u64, &m).expect("append");
            let (got, len) = read_record(&f).expect("complete");
            proptest::prop_assert_eq!(&got, &m);
            proptest::prop_assert_eq!(len, content.len() as u64);
            let full = rustix::fs::fstat(&f).expect("stat").st_size as usize;
            let at = content.len() + flip.index(full - content.len());
            let mut byte = [0u8; 1];
            rustix::io::pread(&f, &mut byte, at as u64).expect("read");
            super::super::sparse::write_all_at(f.as_fd(), &[byte[0] ^ 0x01], at as u64)
                .expect("flip");
            proptest::prop_assert!(read_record(&f).is_err(), "flip at {at} not caught");
        }
    }
}
