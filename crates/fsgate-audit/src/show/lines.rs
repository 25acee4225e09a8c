//! Reading a log file line by line with bounded memory, and following the active file
//! as the gateway appends to it and rotates it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Longest line kept; longer ones are skipped whole (no record is this long).
pub(super) const MAX_LINE: usize = 4 << 20;
/// How often `--follow` looks for new records.
const POLL: Duration = Duration::from_millis(250);

/// Takes each new line (`None`: nothing more for now, a moment to flush).
pub(super) type OnLine<'a> = dyn FnMut(Option<&[u8]>) -> Result<(), String> + 'a;

/// What [`LineReader::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// A whole line, in [`LineReader::line`].
    Line,
    /// A line longer than [`MAX_LINE`], skipped.
    Overlong,
    /// No whole line yet (a partial one is kept for next time).
    Eof,
}

/// Lines of one file; a partial last line waits for its end.
pub(super) struct LineReader {
    path: std::path::PathBuf,
    file: BufReader<File>,
    ino: u64,
    pos: u64,
    buf: Vec<u8>,
    had_line: bool,
    discarding: bool,
}

impl LineReader {
    /// Opens `path` at its start.
    pub(super) fn open(path: &Path) -> io::Result<LineReader> {
        let file = File::open(path)?;
        let ino = file.metadata()?.ino();
        Ok(LineReader {
            path: path.to_path_buf(),
            file: BufReader::new(file),
            ino,
            pos: 0,
            buf: Vec::new(),
            had_line: false,
            discarding: false,
        })
    }

    /// The path it was opened by (the file may since have been renamed).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Back to the start of the same file.
    pub(super) fn rewind(&mut self) -> io::Result<()> {
        self.file.seek(io::SeekFrom::Start(0))?;
        self.pos = 0;
        self.buf.clear();
        self.had_line = false;
        self.discarding = false;
        Ok(())
    }

    /// The line [`Next::Line`] announced, without its newline.
    pub(super) fn line(&self) -> &[u8] {
        &self.buf
    }

    /// Reads on to the end of the next line.
    pub(super) fn next(&mut self) -> io::Result<Next> {
        if std::mem::take(&mut self.had_line) {
            self.buf.clear();
        }
        loop {
            let room = (MAX_LINE + 1).saturating_sub(self.buf.len()) as u64;
            let n = (&mut self.file)
                .take(room)
                .read_until(b'\n', &mut self.buf)?;
            self.pos += n as u64;
            if self.buf.last() == Some(&b'\n') {
                self.buf.pop();
                self.had_line = true;
                if std::mem::take(&mut self.discarding) {
                    return Ok(Next::Overlong);
                }
                return Ok(Next::Line);
            }
            if n == 0 {
                return Ok(Next::Eof);
            }
            if self.buf.len() > MAX_LINE {
                self.discarding = true;
                self.buf.clear();
            }
        }
    }
}

/// Follows the active file `path` from `reader` (already at the end of what was shown,
/// whose last record was `last_seq`),
/// handing each new line to `line` while `keep_going()`. When the file is rotated (a new
/// file takes the name), the old one is read to its end, then every file rotated since
/// (several may have been between two looks), then the new active file; when it is
/// truncated below what was read, reading starts again from its start.
pub(super) fn follow(
    path: &Path,
    mut reader: LineReader,
    mut last_seq: Option<u64>,
    line: &mut OnLine<'_>,
    keep_going: &dyn Fn() -> bool,
) -> Result<(), String> {
    let err = |e: io::Error| format!("{}: {e}", fsgate_base::text::EscPath(path));
    while keep_going() {
        drain(&mut reader, &mut last_seq, line).map_err(err)?;
        line(None)?;
        std::thread::sleep(POLL);
        let Ok(meta) = std::fs::metadata(path) else {
            continue; // between a rotation's rename and the new file
        };
        if meta.ino() != reader.ino {
            drain(&mut reader, &mut last_seq, line).map_err(err)?;
            reader = catch_up(path, &mut last_seq, line).map_err(err)?;
        } else if meta.len() < reader.pos {
            reader = LineReader::open(path).map_err(err)?;
        }
    }
    Ok(())
}

/// After a rotation: the records past `last_seq` in the files rotated since, then the
/// active file's reader (at its end). Retries when yet another rotation came between
/// listing the files and opening the active one (its first record would leave a gap).
fn catch_up(
    path: &Path,
    last_seq: &mut Option<u64>,
    line: &mut OnLine<'_>,
) -> io::Result<LineReader> {
    loop {
        let rotated = rotated_files(path)?;
        for (i, (_, file)) in rotated.iter().enumerate() {
            // A rotated file ends just before the next one's first seq.
            let seen = match (rotated.get(i + 1), *last_seq) {
                (Some((next, _)), Some(last)) => next.saturating_sub(1) <= last,
                _ => false,
            };
            if !seen && let Ok(mut r) = LineReader::open(file) {
                drain(&mut r, last_seq, line)?;
            }
        }
        let mut active = LineReader::open(path)?;
        let first = match active.next()? {
            Next::Line => seq_of(active.line()),
            _ => None,
        };
        let gap = matches!((first, *last_seq), (Some(f), Some(l)) if f > l + 1);
        if !gap {
            // Hand over the first line too (drain skips what was already passed).
            let mut again = LineReader::open(path)?;
            drain(&mut again, last_seq, line)?;
            return Ok(again);
        }
    }
}

/// The rotated files of the log whose active file is `path`, by first seq.
fn rotated_files(path: &Path) -> io::Result<Vec<(u64, std::path::PathBuf)>> {
    let name = crate::series::file_name(path);
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let n = entry.file_name().to_string_lossy().into_owned();
        if let (base, Some(seq)) = crate::series::split_name(&n)
            && base == name
            && !crate::series::is_sidecar(&n)
        {
            out.push((seq, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// A record's seq, if the line is one.
fn seq_of(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    serde_json::from_slice::<Seq>(line).ok().map(|s| s.seq)
}

/// Hands every whole line available now to `line` but records at or before
/// `last_seq` (already handed over); `Some(b"")` stands for an overlong line.
fn drain(
    reader: &mut LineReader,
    last_seq: &mut Option<u64>,
    line: &mut OnLine<'_>,
) -> io::Result<()> {
    loop {
        let got = match reader.next()? {
            Next::Eof => return Ok(()),
            Next::Overlong => line(Some(b"")),
            Next::Line => match seq_of(reader.line()) {
                Some(s) if last_seq.is_some_and(|l| s <= l) => Ok(()),
                seq => {
                    *last_seq = seq.or(*last_seq);
                    line(Some(reader.line()))
                }
            },
        };
        got.map_err(io::Error::other)?;
    }
}

#[cfg(test)]
mod tests;
