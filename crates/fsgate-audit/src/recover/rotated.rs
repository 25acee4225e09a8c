//! Reading the log's directory: a file or nothing, the rotated files in order, the
//! newest one's two ends (read from either end, not whole), and a record's hash in them.

use crate::error::AuditError;
use crate::io::Io;
use crate::line::{self, LineInfo, check_line};
use crate::series::{self};

/// A file of the log's directory, or nothing if it does not exist.
pub(crate) fn read_or_empty(io: &Io, name: &str) -> Result<Vec<u8>, AuditError> {
    match io.dir.read(name) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(AuditError::io("read", io.path_of(name), &e)),
    }
}

/// The rotated files of the log, oldest first: (first seq, name).
pub(crate) fn rotated_files(io: &Io) -> Result<Vec<(u64, String)>, AuditError> {
    let mut rotated: Vec<(u64, String)> = Vec::new();
    let entries = io
        .dir
        .entries()
        .map_err(|e| AuditError::io("list", &io.dir_path, &e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let (base, Some(seq)) = series::split_name(&name)
            && base == io.name
        {
            rotated.push((seq, name));
        }
    }
    rotated.sort();
    Ok(rotated)
}

/// The newest rotated file's last record (where the active file must continue) and the
/// log id its first record names.
pub(super) fn rotated_tail(
    io: &Io,
    rotated: &[(u64, String)],
    problems: &mut Vec<String>,
) -> Result<(Option<LineInfo>, Option<String>), AuditError> {
    let Some((_, name)) = rotated.last() else {
        return Ok((None, None));
    };
    let mut scratch = Vec::new();
    let ends = file_ends(io, name)?;
    let log_id = ends
        .first
        .and_then(|first| check_line(&first, &mut scratch).ok())
        .and_then(|i| i.log);
    let head = match ends.last {
        Some(last) => match check_line(&last, &mut scratch) {
            Ok(info) => Some(info),
            Err(f) => {
                problems.push(format!("{name}: last record does not verify: {f}"));
                None
            }
        },
        None => {
            problems.push(format!("{name}: rotated file is empty or torn"));
            None
        }
    };
    Ok((head, log_id))
}

/// A file's first and last complete lines (without their `\n`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Ends {
    first: Option<Vec<u8>>,
    /// `None` when the file is empty or does not end with `\n` (torn).
    last: Option<Vec<u8>>,
}

/// Bytes read at a time from either end of a rotated file.
pub(super) const END_WINDOW: u64 = 64 * 1024;

/// Reads a rotated file's first and last lines from its two ends: a rotated file holds up
/// to `max_file_bytes`, and start-up needs only those two records of it.
pub(super) fn file_ends(io: &Io, name: &str) -> Result<Ends, AuditError> {
    let err = |e: &std::io::Error| AuditError::io("read", io.path_of(name), e);
    match io.dir.open(name) {
        Ok(f) => ends_of(&f.into_std(), END_WINDOW).map_err(|e| err(&e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ends::default()),
        Err(e) => Err(err(&e)),
    }
}

/// [`file_ends`] on an open file, reading `window` bytes first at each end and doubling
/// while a line is longer.
pub(super) fn ends_of(file: &std::fs::File, window: u64) -> std::io::Result<Ends> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let read = |start: u64, end: u64| -> std::io::Result<Vec<u8>> {
        let size = usize::try_from(end - start).map_err(std::io::Error::other)?;
        let mut buf = vec![0u8; size];
        file.read_exact_at(&mut buf, start)?;
        Ok(buf)
    };
    let mut ends = Ends::default();
    let mut w = window.max(1);
    loop {
        let head = read(0, len.min(w))?;
        if let Some(nl) = memchr::memchr(b'\n', &head) {
            ends.first = Some(head[..nl].to_vec());
            break;
        }
        if w >= len {
            return Ok(ends);
        }
        w = w.saturating_mul(2);
    }
    w = window.max(1);
    loop {
        let start = len.saturating_sub(w);
        let tail = read(start, len)?;
        let Some((&b'\n', body)) = tail.split_last() else {
            return Ok(ends);
        };
        match memchr::memrchr(b'\n', body) {
            Some(nl) => ends.last = Some(body[nl + 1..].to_vec()),
            None if start == 0 => ends.last = Some(body.to_vec()),
            None => {
                w = w.saturating_mul(2);
                continue;
            }
        }
        return Ok(ends);
    }
}

/// The hash of record `seq` in the rotated files, if it is still there.
pub(super) fn hash_in_rotated(
    io: &Io,
    rotated: &[(u64, String)],
    seq: u64,
) -> Result<Option<[u8; 32]>, AuditError> {
    let Some((_, name)) = rotated.iter().rev().find(|(first, _)| *first <= seq) else {
        return Ok(None);
    };
    let bytes = io
        .dir
        .read(name)
        .map_err(|e| AuditError::io("read", io.path_of(name), &e))?;
    let mut scratch = Vec::new();
    for (_, line) in line::lines(&bytes) {
        if let Ok(info) = check_line(line, &mut scratch)
            && info.seq == seq
        {
            return Ok(Some(info.hash));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use proptest::prelude::*;

    /// What start-up read before: the whole file, then its first and last complete lines.
    fn ends_by_whole_read(bytes: &[u8]) -> Ends {
        let first = line::lines(bytes).next().map(|(_, l)| l.to_vec());
        let last = match line::lines(bytes).last() {
            Some((_, l)) if bytes.ends_with(b"\n") => Some(l.to_vec()),
            _ => None,
        };
        Ends { first, last }
    }

    fn ends_in_file(bytes: &[u8], window: u64) -> Ends {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        ends_of(&f, window).unwrap()
    }

    #[test]
    fn the_two_ends_of_a_file_are_its_first_and_last_lines() {
        let ends = ends_in_file(b"one\ntwo\nthree\n", 4);
        assert_eq!(ends.first.as_deref(), Some(&b"one"[..]));
        assert_eq!(ends.last.as_deref(), Some(&b"three"[..]));
        let torn = ends_in_file(b"one\ntwo\nthr", 4);
        assert_eq!(torn.first.as_deref(), Some(&b"one"[..]));
        assert_eq!(torn.last, None);
        assert_eq!(ends_in_file(b"", 4), Ends::default());
        assert_eq!(ends_in_file(b"no newline", 4), Ends::default());
    }

    proptest! {
        #[test]
        fn ends_read_from_both_sides_match_a_whole_read(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), any::<u8>()], 0..300),
            window in 1u64..40,
        ) {
            prop_assert_eq!(ends_in_file(&bytes, window), ends_by_whole_read(&bytes));
        }
    }
}
