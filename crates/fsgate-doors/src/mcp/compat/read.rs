//! Reads in the reference server's shapes: head/tail windows, media files as base64
//! content, several files in one call.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use super::shared::{args_error, handle, read_whole, unexpected};
use crate::door::Ops;
use crate::mcp::args::{MultiReadArgs, PathArgs, ReadTextArgs};
use crate::mcp::render::{ToolError, shown, text};
use crate::mcp::tool_id::MAX_MULTI_PATHS;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Encoding, Op, Output};
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
    let op = |line, limit| Op::ReadText {
        path: a.path.clone(),
        line,
        limit,
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
        Op::ReadFile {
            path: a.path.clone(),
        },
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
/// policy's read limit of content in total.
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
    let budget = gw.policy().limits().max_read_bytes;
    let mut used: u64 = 0;
    let mut failed = 0;
    let mut parts = Vec::with_capacity(a.paths.len());
    for p in &a.paths {
        let abs = shown(gw, p);
        match read_whole(gw, ctx, p) {
            Ok(t) if used + t.len() as u64 <= budget => {
                used += t.len() as u64;
                parts.push(format!("{abs}:\n{t}\n"));
            }
            Ok(_) => {
                failed += 1;
                parts.push(format!(
                    "{abs}: Error - limit exceeded: skipped, the files together would exceed {budget} bytes \
                     (rule limits.max_read_bytes)"
                ));
            }
            Err(e) => {
                failed += 1;
                parts.push(format!("{abs}: Error - {e}"));
            }
        }
    }
    let body = parts.join("\n---\n");
    if failed == a.paths.len() {
        return Ok(CallToolResult::error(vec![ContentBlock::text(body)]));
    }
    Ok(text(body))
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
