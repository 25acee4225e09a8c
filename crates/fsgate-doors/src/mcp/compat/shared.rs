//! What the reference server's tools share: running one operation, reading a file
//! whole, and the wording of their errors and long lists.

use crate::door::Ops;
use crate::mcp::render::ToolError;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops;
use fsgate_gateway::ops::Entry;
use fsgate_gateway::ops::{Op, Output};

pub(super) fn handle(gw: &Gateway, ctx: &Ops<'_>, op: Op) -> Result<Output, ToolError> {
    ctx.serve_op(gw, op).map_err(ToolError::from)
}

pub(super) fn unexpected(tool: &str) -> ToolError {
    ToolError::Failed(format!(
        "internal error: unexpected gateway output for {tool}"
    ))
}

pub(super) fn args_error(tool: &'static str, reason: &str) -> ToolError {
    ToolError::Args {
        tool,
        reason: reason.to_string(),
    }
}

pub(super) fn read_whole(gw: &Gateway, ctx: &Ops<'_>, path: &str) -> Result<String, ToolError> {
    match handle(
        gw,
        ctx,
        Op::ReadText(ops::ReadText {
            path: path.to_string(),
            line: None,
            limit: None,
        }),
    )? {
        Output::Text(t) => Ok(t),
        _ => Err(unexpected("read_text_file")),
    }
}

/// The line the reference server's text tools end with when the gateway cut the list
/// at the message limit: the text says so, as the `truncated` flag does elsewhere.
pub(super) const TRUNCATED_LINE: &str = "[TRUNCATED] the list stopped at the message limit (limits.max_message_bytes); narrow the request";

/// The line a paged listing ends with when more entries follow: how to ask for them.
pub(super) fn more_line(tool: &str, cursor: &str) -> String {
    let quoted = serde_json::to_string(cursor).unwrap_or_default();
    format!(
        "[MORE] more entries follow; call {tool} again with \"cursor\": {quoted} for the next page"
    )
}

/// Names and kinds beneath `path` (no metadata), `depth` levels down, depth-first in
/// name order, whether the list was cut (at `max_entries`, a page's end or the message
/// limit), and where the next page starts (one directory, `depth` 1, only).
pub(super) fn names(
    gw: &Gateway,
    ctx: &Ops<'_>,
    path: &str,
    (depth, cursor): (usize, Option<String>),
    exclude: Vec<String>,
    max_entries: usize,
) -> Result<Listed, ToolError> {
    let op = Op::Tree(ops::Tree {
        path: path.to_string(),
        depth,
        exclude,
        max_entries,
        cursor,
    });
    match handle(gw, ctx, op)? {
        Output::Entries {
            entries,
            truncated,
            next,
        } => Ok((entries, truncated, next)),
        _ => Err(unexpected("tree")),
    }
}

/// Entries, whether the list was cut, and where its next page starts.
type Listed = (Vec<Entry>, bool, Option<String>);

/// A page of a directory's entries, whether it was cut, and where the next page starts.
pub(super) fn list(
    gw: &Gateway,
    ctx: &Ops<'_>,
    path: &str,
    cursor: Option<String>,
) -> Result<Listed, ToolError> {
    let op = Op::Ls(ops::Ls {
        path: path.to_string(),
        cursor,
        kinds_only: false,
    });
    match handle(gw, ctx, op)? {
        Output::Entries {
            entries,
            truncated,
            next,
        } => Ok((entries, truncated, next)),
        _ => Err(unexpected("ls")),
    }
}
