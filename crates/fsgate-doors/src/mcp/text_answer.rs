//! A text answer's bytes, built without serde: the text escaped once and copied (or
//! written twice from where it is), and its exact length known beforehand.

use std::io::{self, Write};

use fsgate_gateway::{escape_json_bytes_into, escape_json_into, json_text_len};

/// The parts of a text answer around its two copies of the text (as serde_json writes
/// a `CallToolResult` of one text block and `structuredContent: {content}`).
pub(super) const TEXT_HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
pub(super) const TEXT_OPEN: &[u8] = b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":";
pub(super) const TEXT_MID: &[u8] = b"}],\"structuredContent\":{\"content\":";
pub(super) const TEXT_TAIL: &[u8] = b"},\"isError\":false}}\n";

/// The exact length of [`encode_text`]'s answer.
pub(super) fn text_answer_len(key: &str, text: &str) -> usize {
    let escaped = usize::try_from(json_text_len(text)).unwrap_or(usize::MAX);
    answer_len(key, escaped)
}

/// The exact length of [`encode_escaped`]'s answer.
pub(super) fn escaped_answer_len(key: &str, escaped: &str) -> usize {
    answer_len(key, escaped.len().saturating_add(2))
}

/// The length of a text answer for id `key` whose text is `quoted` bytes as a JSON
/// string.
pub(super) fn answer_len(key: &str, quoted: usize) -> usize {
    [TEXT_HEAD, TEXT_OPEN, TEXT_MID, TEXT_TAIL]
        .iter()
        .map(|p| p.len())
        .sum::<usize>()
        .saturating_add(key.len())
        .saturating_add(quoted.saturating_mul(2))
}

/// Appends the answer for id `key` carrying `text` twice, escaped once: the second copy
/// is the first's escaped bytes.
pub(super) fn encode_text(out: &mut Vec<u8>, key: &str, text: &str) {
    out.extend_from_slice(TEXT_HEAD);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(TEXT_OPEN);
    let start = out.len();
    escape_json_into(out, text);
    let end = out.len();
    out.extend_from_slice(TEXT_MID);
    out.extend_from_within(start..end);
    out.extend_from_slice(TEXT_TAIL);
}

/// [`encode_text`] of the text whose escaping is `escaped`.
pub(super) fn encode_escaped(out: &mut Vec<u8>, key: &str, escaped: &str) {
    out.extend_from_slice(TEXT_HEAD);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(TEXT_OPEN);
    for between in [TEXT_MID, TEXT_TAIL] {
        out.push(b'"');
        out.extend_from_slice(escaped.as_bytes());
        out.push(b'"');
        out.extend_from_slice(between);
    }
}

/// Writes [`encode_escaped`]'s answer to `w`: the escaped text twice from where it
/// is, no copy of it.
pub(super) fn write_escaped(w: &mut dyn Write, key: &str, escaped: &str) -> io::Result<()> {
    let mut head = Vec::with_capacity(TEXT_HEAD.len() + key.len() + TEXT_OPEN.len() + 1);
    head.extend_from_slice(TEXT_HEAD);
    head.extend_from_slice(key.as_bytes());
    head.extend_from_slice(TEXT_OPEN);
    head.push(b'"');
    w.write_all(&head)?;
    w.write_all(escaped.as_bytes())?;
    w.write_all(b"\"")?;
    w.write_all(TEXT_MID)?;
    w.write_all(b"\"")?;
    w.write_all(escaped.as_bytes())?;
    w.write_all(b"\"")?;
    w.write_all(TEXT_TAIL)
}

/// Writes [`encode_text`]'s answer to `w`, escaping `piece` bytes of the text at a time
/// into a small buffer, written whenever it holds `piece` bytes.
pub(super) fn write_text(w: &mut dyn Write, key: &str, text: &str, piece: usize) -> io::Result<()> {
    let mut buf = Vec::with_capacity(piece + piece / 8);
    buf.extend_from_slice(TEXT_HEAD);
    buf.extend_from_slice(key.as_bytes());
    buf.extend_from_slice(TEXT_OPEN);
    for between in [TEXT_MID, TEXT_TAIL] {
        buf.push(b'"');
        for part in text.as_bytes().chunks(piece.max(1)) {
            escape_json_bytes_into(&mut buf, part);
            if buf.len() >= piece {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        buf.push(b'"');
        buf.extend_from_slice(between);
    }
    w.write_all(&buf)
}
