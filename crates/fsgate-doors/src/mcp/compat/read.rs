//! Reads in the reference server's shapes: head/tail windows, media files as base64
//! content, several files in one call.

use base64::Engine;
use fsgate_gateway::ops;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use super::shared::{args_error, handle, unexpected};
use crate::door::Ops;
use crate::mcp::args::{MultiReadArgs, PathArgs, ReadTextArgs};
use crate::mcp::render::{ToolError, shown, text};
use crate::mcp::tool_id::MAX_MULTI_PATHS;
use fsgate_gateway::ops::{Encoding, Op, Output};
use fsgate_gateway::{Gateway, json_text_len};
use fsgate_policy::media::{MediaKind, media_type};

/// The last `n` lines of `s`, line endings kept.
fn last_lines(s: &str, n: u64) -> &str {
    if n == 0 {
        return "";
    }
    let body = s.strip_suffix('\n').unwrap_or(s);
    let mut seen = 0;
    for (i, b) in body.bytes().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return &s[i + 1..];
            }
        }
    }
    s
}

/// `read_text_file` / `read_file`: a line window (contract) or head/tail (reference).
/// As on the reference server, `head`/`tail` of 0 mean "not given" and `head` drops the
/// newline after its last line; `tail` counts lines, not the empty string after the
/// final newline (the reference returns one line fewer there).
pub(in crate::mcp) fn read_text(
    gw: &Gateway,
    ctx: &Ops<'_>,
    tool: &'static str,
    mut a: ReadTextArgs,
) -> Result<CallToolResult, ToolError> {
    a.head = a.head.filter(|n| *n > 0);
    a.tail = a.tail.filter(|n| *n > 0);
    let window = a.line.is_some() || a.limit.is_some();
    let op = |line, limit| {
        Op::ReadText(ops::ReadText {
            path: a.path.clone(),
            line,
            limit,
        })
    };
    let out = match (a.head, a.tail) {
        (Some(_), Some(_)) => return Err(args_error(tool, "give head or tail, not both")),
        (Some(_), None) | (None, Some(_)) if window => {
            return Err(args_error(
                tool,
                "head/tail cannot be combined with line/limit",
            ));
        }
        (Some(h), None) => match handle(gw, ctx, op(None, Some(h)))? {
            Output::Text(mut s) => {
                if s.ends_with('\n') {
                    s.pop();
                }
                Output::Text(s)
            }
            _ => return Err(unexpected(tool)),
        },
        (None, Some(t)) => match handle(gw, ctx, op(None, None))? {
            Output::Text(s) => Output::Text(last_lines(&s, t).to_string()),
            _ => return Err(unexpected(tool)),
        },
        (None, None) => handle(gw, ctx, op(a.line, a.limit))?,
    };
    match out {
        Output::Text(s) => Ok(text(s)),
        _ => Err(unexpected(tool)),
    }
}

/// A `file://` URI for an absolute path, percent-encoding what a URI cannot hold.
fn file_uri(abs: &str) -> String {
    let mut uri = String::from("file://");
    for b in abs.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// `read_media_file`: the file's bytes as base64 image, audio or blob content.
pub(in crate::mcp) fn read_media(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let data = match handle(
        gw,
        ctx,
        Op::ReadFile(ops::ReadFile {
            path: a.path.clone(),
        }),
    )? {
        Output::File {
            content,
            encoding: Encoding::Base64,
        } => content,
        Output::File {
            content,
            encoding: Encoding::Utf8,
        }
        | Output::Text(content) => {
            base64::engine::general_purpose::STANDARD.encode(content.as_bytes())
        }
        _ => return Err(unexpected("read_media_file")),
    };
    let abs = shown(gw, &a.path);
    let block = match media_type(&a.path) {
        Some((MediaKind::Image, mime)) => ContentBlock::image(data, mime),
        Some((MediaKind::Audio, mime)) => ContentBlock::audio(data, mime),
        None => ContentBlock::resource(ResourceContents::BlobResourceContents {
            uri: file_uri(&abs),
            mime_type: Some("application/octet-stream".to_string()),
            blob: data,
            meta: None,
        }),
    };
    Ok(CallToolResult::success(vec![block]))
}

/// `read_multiple_files`: each file or its error, `---` between them; at most the
/// policy's read limit of content in total, and an answer within the message limit.
/// A file that would pass either is skipped, its entry saying why.
pub(in crate::mcp) fn read_multiple(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: MultiReadArgs,
) -> Result<CallToolResult, ToolError> {
    const TOOL: &str = "read_multiple_files";
    if a.paths.is_empty() {
        return Err(args_error(TOOL, "paths must name at least one file"));
    }
    if a.paths.len() > MAX_MULTI_PATHS {
        return Err(args_error(
            TOOL,
            &format!(
                "at most {MAX_MULTI_PATHS} paths per call, got {}",
                a.paths.len()
            ),
        ));
    }
    let mut room = Room::new(gw, ctx);
    let mut failed = 0;
    let mut parts = Vec::with_capacity(a.paths.len());
    for p in &a.paths {
        let abs = shown(gw, p);
        let (read, lease) = ctx.serve_op_apart(gw, whole(p));
        let part = match read.map_err(ToolError::from) {
            Ok(Output::Text(t)) => room.take(t.len(), format!("{abs}:\n{t}\n")),
            Ok(_) => Err(unexpected("read_text_file").to_string()),
            Err(e) => Err(e.to_string()),
        };
        match part {
            Ok(kept) => {
                // Its content is in the answer: its lease goes with it.
                ctx.keep(lease);
                parts.push(kept);
            }
            Err(why) => {
                failed += 1;
                parts.push(room.noted(format!("{abs}: Error - {why}")));
            }
        }
    }
    let body = parts.join(SEPARATOR);
    if failed == a.paths.len() {
        return Ok(CallToolResult::error(vec![ContentBlock::text(body)]));
    }
    Ok(text(body))
}

/// What goes between two files' entries.
const SEPARATOR: &str = "\n---\n";

/// A whole file's read.
fn whole(path: &str) -> Op {
    Op::ReadText(ops::ReadText {
        path: path.to_string(),
        line: None,
        limit: None,
    })
}

/// What is left of a `read_multiple_files` answer's bounds: the policy's read limit of
/// content, and the message limit of the answer as encoded (each copy of the text
/// the door sends, escaped, and the envelope around them).
struct Room {
    /// Content bytes left (`limits.max_read_bytes`).
    content: u64,
    /// Encoded bytes left (`limits.max_message_bytes`).
    encoded: u64,
    copies: u64,
    max_read: u64,
    max_message: u64,
}

impl Room {
    /// Bytes of an answer that are not the text: its JSON-RPC envelope, bounded.
    const ENVELOPE: u64 = 4096;

    fn new(gw: &Gateway, ctx: &Ops<'_>) -> Room {
        let policy = gw.policy();
        let limits = policy.limits();
        Room {
            content: limits.max_read_bytes,
            encoded: limits.max_message_bytes.saturating_sub(Self::ENVELOPE),
            copies: ctx.door.content_copies.max(1),
            max_read: limits.max_read_bytes,
            max_message: limits.max_message_bytes,
        }
    }

    /// Encoded bytes `part` and the separator before it add to the answer.
    fn cost(&self, part: &str) -> u64 {
        (json_text_len(part) + json_text_len(SEPARATOR)).saturating_mul(self.copies)
    }

    /// `entry` (a file's `size` bytes of content) if it fits what is left, taken from
    /// it; else why not.
    fn take(&mut self, size: usize, entry: String) -> Result<String, String> {
        let (size, cost) = (size as u64, self.cost(&entry));
        if size > self.content {
            return Err(format!(
                "limit exceeded: skipped, the files together would exceed {} bytes \
                 (rule limits.max_read_bytes)",
                self.max_read
            ));
        }
        if cost > self.encoded {
            return Err(format!(
                "limit exceeded: skipped, with it the answer would exceed the message limit \
                 of {} bytes once encoded (rule limits.max_message_bytes); ask for fewer \
                 paths, or read this file alone (read_text_file)",
                self.max_message
            ));
        }
        self.content -= size;
        self.encoded -= cost;
        Ok(entry)
    }

    /// An error entry, counted in what is left (it is in the answer too).
    fn noted(&mut self, entry: String) -> String {
        self.encoded = self.encoded.saturating_sub(self.cost(&entry));
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(last_lines("a\nb\nc\n", 10), "a\nb\nc\n");
        assert_eq!(last_lines("a\nb\n", 0), "");
        assert_eq!(last_lines("", 3), "");
    }

    #[test]
    fn file_uris() {
        assert_eq!(file_uri("/w/a b#.png"), "file:///w/a%20b%23.png");
    }
}
