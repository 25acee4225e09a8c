//! Reading a log file line by line with bounded memory, and following the active file
//! as the gateway appends to it and rotates it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Longest line kept; longer ones are skipped whole (no record is this long).
pub const MAX_LINE: usize = 4 << 20;
/// How often `--follow` looks for new records.
const POLL: Duration = Duration::from_millis(250);

/// Takes each new line (`None`: nothing more for now, a moment to flush).
pub type OnLine<'a> = dyn FnMut(Option<&[u8]>) -> Result<(), String> + 'a;

/// What [`LineReader::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A whole line, in [`LineReader::line`].
    Line,
    /// A line longer than [`MAX_LINE`], skipped.
    Overlong,
    /// No whole line yet (a partial one is kept for next time).
    Eof,
}

/// Lines of one file; a partial last line waits for its end.
pub struct LineReader {
    file: BufReader<File>,
    ino: u64,
    pos: u64,
    buf: Vec<u8>,
    had_line: bool,
    discarding: bool,
}

impl LineReader {
    /// Opens `path` at its start.
    pub fn open(path: &Path) -> io::Result<LineReader> {
        let file = File::open(path)?;
        let ino = file.metadata()?.ino();
        Ok(LineReader {
            file: BufReader::new(file),
            ino,
            pos: 0,
            buf: Vec::new(),
            had_line: false,
            discarding: false,
        })
    }

    /// The line [`Next::Line`] announced, without its newline.
    pub fn line(&self) -> &[u8] {
        &self.buf
    }

    /// Reads on to the end of the next line.
    pub fn next(&mut self) -> io::Result<Next> {
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

/// Follows the active file `path` from `reader` (already at the end of what was shown),
/// handing each new line to `line` while `keep_going()`. When the file is rotated (a new
/// file takes the name), the old one is read to its end first; when it is truncated,
/// reading starts again from its start.
pub fn follow(
    path: &Path,
    mut reader: LineReader,
    line: &mut OnLine<'_>,
    keep_going: &dyn Fn() -> bool,
) -> Result<(), String> {
    let err = |e: io::Error| format!("{}: {e}", crate::text::EscPath(path));
    while keep_going() {
        drain(&mut reader, line).map_err(err)?;
        line(None)?;
        std::thread::sleep(POLL);
        let Ok(meta) = std::fs::metadata(path) else {
            continue; // between a rotation's rename and the new file
        };
        if meta.ino() != reader.ino {
            drain(&mut reader, line).map_err(err)?;
            reader = LineReader::open(path).map_err(err)?;
        } else if meta.len() < reader.pos {
            reader = LineReader::open(path).map_err(err)?;
        }
    }
    Ok(())
}

/// Hands every whole line available now to `line` (`Some(b"")` stands for an overlong
/// line, which is then skipped).
fn drain(reader: &mut LineReader, line: &mut OnLine<'_>) -> io::Result<()> {
    loop {
        let got = match reader.next()? {
            Next::Eof => return Ok(()),
            Next::Line => line(Some(reader.line())),
            Next::Overlong => line(Some(b"")),
        };
        got.map_err(io::Error::other)?;
    }
}

#[cfg(test)]
mod tests;
