//! Reading records back from the log's own files (the spool): from any seq onwards,
//! across rotated files, through the log directory's handle, in bounded memory.

use std::io::{Read, Seek, SeekFrom};

use cap_std::fs::{Dir, File};

use super::frame::seq_of;
use crate::series;

/// Bytes read from a file at a time.
const CHUNK: usize = 64 * 1024;
/// Longest record line the shipper handles (records are a few KiB; a longer line is a
/// damaged file, which `fsgate audit verify` will name).
pub(crate) const MAX_LINE: usize = 1024 * 1024;

/// Why records could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReadError {
    /// A file or the directory could not be read.
    #[error("cannot read {name}: {message}")]
    Io {
        /// The file (or `.` for the directory).
        name: String,
        /// The operating system's message.
        message: String,
    },
    /// A line that is not a record, or one longer than [`MAX_LINE`].
    #[error("{name}: a line that is not a record after seq {after} (run `fsgate audit verify`)")]
    NotARecord {
        /// The file.
        name: String,
        /// The last seq read before it.
        after: u64,
    },
    /// The record wanted is in no file (the files changed under the reader, or the log
    /// skips it).
    #[error("seq {0} is in none of the log's files")]
    Missing(u64),
}

fn io_err(name: &str) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |e| ReadError::Io {
        name: name.to_owned(),
        message: e.to_string(),
    }
}

/// What one [`LogReader::read`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReadOutcome {
    /// Records handed out.
    pub records: usize,
    /// Records that are gone from the log (pruned before they were shipped): first
    /// and last seq.
    pub skipped: Option<(u64, u64)>,
}

/// A cursor over one log's records.
#[derive(Debug)]
pub(crate) struct LogReader {
    /// The log's directory.
    dir: Dir,
    /// The active file's name.
    base: String,
    /// The file being read and its name.
    cur: Option<(File, String)>,
    /// Bytes read from `cur` and not yet consumed (from `start` on).
    buf: Vec<u8>,
    /// Where the unconsumed bytes start in `buf`.
    start: usize,
    /// The seq to hand out next.
    next: u64,
}

impl LogReader {
    /// A reader of the log `base` in `dir` that starts at seq `next`.
    pub(crate) fn new(dir: Dir, base: &str, next: u64) -> LogReader {
        LogReader {
            dir,
            base: base.to_owned(),
            cur: None,
            buf: Vec::new(),
            start: 0,
            next: next.max(1),
        }
    }

    /// The seq handed out next.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next
    }

    /// Starts again at `next` (after a connection was lost: what it may have lost is
    /// read again).
    pub(crate) fn rewind(&mut self, next: u64) {
        self.next = next.max(1);
        self.cur = None;
        self.buf.clear();
        self.start = 0;
    }

    /// Hands records `next..=upto` to `each` in order, until about `max_bytes` of lines
    /// were handed out. Each line is given without its newline.
    pub(crate) fn read(
        &mut self,
        upto: u64,
        max_bytes: usize,
        each: &mut dyn FnMut(u64, &[u8]),
    ) -> Result<ReadOutcome, ReadError> {
        let mut out = ReadOutcome::default();
        let mut bytes = 0;
        let mut relocated = false;
        while self.next <= upto && bytes < max_bytes {
            if self.cur.is_none() {
                if relocated {
                    return Err(ReadError::Missing(self.next));
                }
                relocated = true;
                if let Some(gone) = self.locate()? {
                    out.skipped = Some(gone);
                }
            }
            let Some(range) = self.next_line()? else {
                // The end of this file, and the record is durable: it is in a later file
                // (the writer rotated meanwhile).
                self.cur = None;
                continue;
            };
            let line = &self.buf[range];
            let name = || self.cur.as_ref().map(|c| c.1.clone()).unwrap_or_default();
            let Some(seq) = seq_of(line) else {
                return Err(ReadError::NotARecord {
                    name: name(),
                    after: self.next - 1,
                });
            };
            if seq < self.next {
                continue;
            }
            if seq > self.next {
                return Err(ReadError::Missing(self.next));
            }
            relocated = false;
            bytes += line.len();
            each(seq, line);
            self.next += 1;
            out.records += 1;
        }
        Ok(out)
    }

    /// The next complete line of the current file, or None at its end for now.
    fn next_line(&mut self) -> Result<Option<std::ops::Range<usize>>, ReadError> {
        loop {
            if let Some(nl) = memchr::memchr(b'\n', &self.buf[self.start..]) {
                let range = self.start..self.start + nl;
                self.start += nl + 1;
                return Ok(Some(range));
            }
            let Some((file, name)) = self.cur.as_mut() else {
                return Ok(None);
            };
            if self.buf.len() - self.start > MAX_LINE {
                return Err(ReadError::NotARecord {
                    name: name.clone(),
                    after: self.next - 1,
                });
            }
            self.buf.drain(..self.start);
            self.start = 0;
            let have = self.buf.len();
            self.buf.resize(have + CHUNK, 0);
            let n = file.read(&mut self.buf[have..]).map_err(io_err(name))?;
            self.buf.truncate(have + n);
            if n == 0 {
                return Ok(None);
            }
        }
    }

    /// Opens the file holding `next` (scanning starts at its beginning). Returns the
    /// records that are gone if `next` is older than every file.
    fn locate(&mut self) -> Result<Option<(u64, u64)>, ReadError> {
        self.buf.clear();
        self.start = 0;
        let files = log_files(&self.dir, &self.base)?;
        let mut chosen = None;
        for (first, name) in &files {
            if *first <= self.next {
                chosen = Some(name.clone());
            }
        }
        let mut gone = None;
        let name = match chosen {
            Some(n) => n,
            None => match files.first() {
                Some((first, name)) => {
                    gone = Some((self.next, first - 1));
                    self.next = *first;
                    name.clone()
                }
                None => return Err(ReadError::Missing(self.next)),
            },
        };
        let file = self.dir.open(&name).map_err(io_err(&name))?;
        self.cur = Some((file, name));
        Ok(gone)
    }
}

/// The log's files with the seq of their first record, in chain order. An empty
/// active file is left out.
fn log_files(dir: &Dir, base: &str) -> Result<Vec<(u64, String)>, ReadError> {
    let mut rotated = Vec::new();
    for entry in dir.entries().map_err(io_err("."))? {
        let entry = entry.map_err(io_err("."))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if series::is_sidecar(&name) {
            continue;
        }
        if let (b, Some(first)) = series::split_name(&name)
            && b == base
        {
            rotated.push((first, name));
        }
    }
    rotated.sort();
    if let Some(first) = first_seq(dir, base)? {
        rotated.push((first, base.to_owned()));
    }
    Ok(rotated)
}

/// The seq of a file's first record; None if it is missing or holds no whole line.
fn first_seq(dir: &Dir, name: &str) -> Result<Option<u64>, ReadError> {
    let mut file = match dir.open(name) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(name)(e)),
    };
    let mut head = vec![0; 64];
    let n = read_full(&mut file, &mut head).map_err(io_err(name))?;
    Ok(seq_of(&head[..n]))
}

fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The seq of the log's last complete record (0 for an empty log): the head a reader
/// without the writer's word goes by (`fsgate audit ship-status`).
pub(crate) fn head_seq(dir: &Dir, base: &str) -> Result<u64, ReadError> {
    let files = log_files(dir, base)?;
    for (_, name) in files.iter().rev() {
        let mut file = dir.open(name).map_err(io_err(name))?;
        let len = file.metadata().map_err(io_err(name))?.len();
        let from = len.saturating_sub(MAX_LINE as u64 + 1);
        file.seek(SeekFrom::Start(from)).map_err(io_err(name))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).map_err(io_err(name))?;
        // The last complete line: the bytes before the last newline, after the one
        // before it.
        let Some(end) = memchr::memrchr(b'\n', &tail) else {
            continue;
        };
        let begin = memchr::memrchr(b'\n', &tail[..end]).map_or(0, |i| i + 1);
        if let Some(seq) = seq_of(&tail[begin..end]) {
            return Ok(seq);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"ts\":\"2026-01-01T00:00:00.000000Z\",\"kind\":\"x\"}}\n")
    }

    fn write(dir: &std::path::Path, name: &str, seqs: std::ops::RangeInclusive<u64>) {
        let text: String = seqs.map(line).collect();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn open(dir: &std::path::Path) -> Dir {
        Dir::open_ambient_dir(dir, cap_std::ambient_authority()).unwrap()
    }

    fn collect(r: &mut LogReader, upto: u64) -> (Vec<u64>, ReadOutcome) {
        let mut seqs = Vec::new();
        let out = r
            .read(upto, usize::MAX, &mut |s, l| {
                assert_eq!(format!("{}\n", String::from_utf8_lossy(l)), line(s));
                seqs.push(s);
            })
            .unwrap();
        (seqs, out)
    }

    #[test]
    fn reads_across_rotated_files_from_any_seq() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "a.jsonl.000000000001", 1..=3);
        write(tmp.path(), "a.jsonl.000000000004", 4..=6);
        write(tmp.path(), "a.jsonl", 7..=9);
        std::fs::write(tmp.path().join("a.jsonl.checkpoint"), "{}").unwrap();
        write(tmp.path(), "b.jsonl", 1..=2);
        let mut r = LogReader::new(open(tmp.path()), "a.jsonl", 5);
        let (seqs, out) = collect(&mut r, 8);
        assert_eq!(seqs, [5, 6, 7, 8]);
        assert_eq!(out.skipped, None);
        assert_eq!(collect(&mut r, 9).0, [9]);
        r.rewind(2);
        assert_eq!(collect(&mut r, 9).0, (2..=9).collect::<Vec<_>>());
        assert_eq!(head_seq(&open(tmp.path()), "a.jsonl").unwrap(), 9);
    }

    #[test]
    fn follows_a_rotation_and_waits_for_a_partial_line() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "a.jsonl", 1..=2);
        let mut r = LogReader::new(open(tmp.path()), "a.jsonl", 1);
        assert_eq!(collect(&mut r, 2).0, [1, 2]);
        // The writer rotates: the active file becomes a.jsonl.000000000001, a new one
        // starts at 4; seq 3 was appended to the old file just before.
        let mut text = line(1) + &line(2) + &line(3);
        std::fs::write(tmp.path().join("a.jsonl.000000000001"), &text).unwrap();
        std::fs::remove_file(tmp.path().join("a.jsonl")).unwrap();
        let partial = line(4);
        std::fs::write(tmp.path().join("a.jsonl"), &partial[..10]).unwrap();
        assert_eq!(collect(&mut r, 3).0, [3]);
        assert_eq!(collect(&mut r, 3).0, Vec::<u64>::new());
        text = partial;
        std::fs::write(tmp.path().join("a.jsonl"), &text).unwrap();
        assert_eq!(collect(&mut r, 4).0, [4]);
    }

    #[test]
    fn pruned_records_are_reported_and_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "a.jsonl.000000000010", 10..=11);
        write(tmp.path(), "a.jsonl", 12..=12);
        let mut r = LogReader::new(open(tmp.path()), "a.jsonl", 3);
        let (seqs, out) = collect(&mut r, 12);
        assert_eq!(seqs, [10, 11, 12]);
        assert_eq!(out.skipped, Some((3, 9)));
        let mut none = LogReader::new(open(tmp.path()), "a.jsonl", 13);
        assert_eq!(
            none.read(13, 100, &mut |_, _| {}),
            Err(ReadError::Missing(13))
        );
    }

    #[test]
    fn a_line_that_is_no_record_stops_reading() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.jsonl"), line(1) + "garbage\n" + &line(2)).unwrap();
        let mut r = LogReader::new(open(tmp.path()), "a.jsonl", 1);
        let err = r.read(2, usize::MAX, &mut |_, _| {}).unwrap_err();
        assert!(
            matches!(err, ReadError::NotARecord { after: 1, .. }),
            "{err}"
        );
    }
}
