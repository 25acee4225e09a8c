//! One escaping for every text a person reads (tables, CSV, stderr messages, logs).
//!
//! Names, session ids and rule text often come from an agent. Printed raw, they can drive
//! a terminal (ESC/CSI/OSC sequences: clear the screen, plant hyperlinks, retitle the
//! window), forge table lines (newlines, carriage returns) or make a name read as another
//! (bidi overrides, CVE-2021-42574; zero-width and other invisible characters).
//!
//! [`escape_for_humans`] writes each such character as `\u{202e}` (`\n`, `\r`, `\t` for
//! the three common ones) and the backslash itself as `\\`, so the result is unambiguous:
//! distinct inputs give distinct outputs, and no agent can forge an escape that reads
//! like one. Bytes that are not UTF-8 (from `OsStr` names) read as `\xff`. Printable text
//! (accents, CJK, emoji) stays as it is. Machine output (`--json`, the audit record, the
//! wire) never goes through here.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// Characters escaped: the backslash (so escapes cannot be forged); controls (C0, DEL,
/// C1); format characters (bidi controls, zero-width characters, U+FEFF, soft hyphen,
/// tag characters); line and paragraph separators; every default-ignorable code point
/// (variation selectors, Hangul fillers, ...); and unassigned code points, which a newer
/// Unicode (the terminal's) may have made any of these.
const UNSAFE_CLASS: &str = r"[\\\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cn}\p{Default_Ignorable_Code_Point}]";

/// The compiled class; `None` only if the regex crate lost its Unicode tables, and then
/// every non-ASCII character is escaped (safe, if less readable).
static UNSAFE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(UNSAFE_CLASS).ok());

/// True for a character that [`escape_for_humans`] writes as an escape.
pub(crate) fn needs_escape(c: char) -> bool {
    if let Ok(b) = u8::try_from(c)
        && b.is_ascii()
    {
        return ascii_needs_escape(b);
    }
    let mut buf = [0u8; 4];
    match UNSAFE.as_ref() {
        Some(re) => re.is_match(c.encode_utf8(&mut buf)),
        None => c == '\\' || !(c.is_ascii_graphic() || c == ' '),
    }
}

/// The ASCII part of [`UNSAFE_CLASS`]: the backslash and the controls (C0 and DEL).
fn ascii_needs_escape(b: u8) -> bool {
    b == b'\\' || b.is_ascii_control()
}

/// `s` with every character a terminal or a reader could be fooled by escaped.
pub fn escape_for_humans(s: &str) -> Cow<'_, str> {
    // ASCII text (most of it: paths, ids) is escaped without the Unicode class, whose
    // compilation cost half a millisecond of every gateway's start-up.
    if s.is_ascii() {
        return match s.bytes().any(ascii_needs_escape) {
            true => Cow::Owned(escape_each(s)),
            false => Cow::Borrowed(s),
        };
    }
    match UNSAFE.as_ref() {
        Some(re) => re.replace_all(s, |caps: &regex::Captures<'_>| {
            let mut out = String::new();
            caps[0].chars().for_each(|c| push_escape(&mut out, c));
            out
        }),
        None if s.chars().any(needs_escape) => Cow::Owned(escape_each(s)),
        None => Cow::Borrowed(s),
    }
}

fn escape_each(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if needs_escape(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

fn push_escape(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
    }
}

/// Bytes that may not be UTF-8 (a file name): valid text escaped as by
/// [`escape_for_humans`], every invalid byte as `\xNN`.
pub(crate) fn escape_bytes(b: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(b) {
        return escape_for_humans(s);
    }
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(&escape_for_humans(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    Cow::Owned(out)
}

/// An OS string (a name from the file system), escaped.
pub(crate) fn escape_os(s: &OsStr) -> Cow<'_, str> {
    escape_bytes(s.as_encoded_bytes())
}

/// A path, escaped (non-UTF-8 bytes as `\xNN`, not replaced by U+FFFD).
pub(crate) fn escape_path(p: &Path) -> Cow<'_, str> {
    escape_os(p.as_os_str())
}

/// `Display` of a string, escaped; honours width and alignment (`{:<12}`).
#[derive(Debug, Clone, Copy)]
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape_for_humans(self.0))
    }
}

/// `Display` of a path, escaped.
#[derive(Debug, Clone, Copy)]
pub struct EscPath<'a>(pub &'a Path);

impl fmt::Display for EscPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape_path(self.0))
    }
}

/// Writes `line` to stderr as one line, escaped (an error message that names a path).
pub fn eprint_line(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{}", escape_for_humans(line));
}

/// The log writer: each event the tracing formatter hands over is escaped whole, but
/// for the newline that ends it, so no field can start a line or drive the terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct EscapingStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for EscapingStderr {
    type Writer = EscapingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingStderr
    }
}

impl Write for EscapingStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One write per event, so lines of concurrent events do not interleave.
        io::stderr().lock().write_all(&escape_event(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// Longest piece of an agent's stderr line [`copy_escaped_noting`] holds before writing it.
const MAX_LINE: u64 = 64 * 1024;

/// [`copy_escaped_noting`] with nothing to note (the tests' way in).
#[cfg(test)]
fn copy_escaped(from: impl io::Read, to: impl Write, prefix: &str) {
    copy_escaped_noting(from, to, prefix, |_| {});
}

/// Copies `from` to `to` line by line, each line escaped and led by `prefix`: an agent's
/// own stderr, which would otherwise reach the person's terminal raw and could pass for
/// fsgate's own lines. Longer lines go out in pieces; a failing `to` does not stop the
/// draining, so the agent never blocks on a full pipe. Each raw line (lossily decoded)
/// is shown to `note` first.
pub fn copy_escaped_noting(
    from: impl io::Read,
    mut to: impl Write,
    prefix: &str,
    mut note: impl FnMut(&str),
) {
    let mut reader = io::BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match io::BufRead::read_until(&mut io::Read::take(&mut reader, MAX_LINE), b'\n', &mut line)
        {
            Ok(0) => return,
            Ok(_) => {
                note(&String::from_utf8_lossy(&line));
                let mut piece = prefix.as_bytes().to_vec();
                piece.extend(escape_event(&line));
                let _ = to.write_all(&piece);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// A formatted log event, escaped but for the newline that ends it.
fn escape_event(buf: &[u8]) -> Vec<u8> {
    let (body, end) = match buf.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (buf, &b""[..]),
    };
    let mut text = escape_bytes(body).into_owned().into_bytes();
    text.extend_from_slice(end);
    text
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut at its start to its last `max` bytes (on a character boundary) after `...`,
/// when longer: a path keeps its file's name in view.
pub fn tail(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    Cow::Owned(format!("...{}", &s[start..]))
}

#[cfg(test)]
mod tests;
