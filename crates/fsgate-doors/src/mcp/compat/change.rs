//! Changes in the reference server's shapes: edit lists with a unified diff, and a
//! move that never replaces its destination.

use fsgate_gateway::ops;
use rmcp::model::CallToolResult;

use super::shared::{args_error, handle, read_whole};
use crate::door::Ops;
use crate::mcp::args::{EditArgs, EditPair, MoveArgs};
use crate::mcp::edits::{self, Matching};
use crate::mcp::render::{ToolError, shown, text};
use fsgate_base::error::GatewayError;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::Op;

/// `edit_file`: the contract's exactly-once replacement, or the reference server's
/// edit list with a diff.
pub(in crate::mcp) fn edit(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: EditArgs,
) -> Result<CallToolResult, ToolError> {
    let dry = a.dry_run.unwrap_or(false);
    match (a.edits, a.old_text, a.new_text) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(args_error(
            "edit_file",
            "give either edits or oldText/newText, not both",
        )),
        (Some(list), None, None) => {
            if list.is_empty() {
                return Err(args_error("edit_file", "edits must hold at least one edit"));
            }
            edit_with_diff(gw, ctx, &a.path, &list, Matching::FirstOrLines, dry)
        }
        (None, Some(old_text), Some(new_text)) if dry => {
            let one = [EditPair { old_text, new_text }];
            edit_with_diff(gw, ctx, &a.path, &one, Matching::ExactlyOnce, true)
        }
        (None, Some(old_text), Some(new_text)) => {
            handle(
                gw,
                ctx,
                Op::Edit(ops::Edit {
                    path: a.path.clone(),
                    old_text,
                    new_text,
                }),
            )?;
            Ok(text(format!(
                "Successfully edited {}: replaced 1 occurrence",
                shown(gw, &a.path)
            )))
        }
        (None, _, _) => Err(args_error(
            "edit_file",
            "give oldText and newText, or edits",
        )),
    }
}

/// Reads the file, applies the edits, and (unless a dry run) writes the result back as
/// one gateway edit of the whole original text, so a change made by someone else in
/// between is detected instead of overwritten.
fn edit_with_diff(
    gw: &Gateway,
    ctx: &Ops<'_>,
    path: &str,
    list: &[EditPair],
    how: Matching,
    dry: bool,
) -> Result<CallToolResult, ToolError> {
    let abs = shown(gw, path);
    let original = read_whole(gw, ctx, path)?;
    let edited = edits::apply(&original, list, how)
        .map_err(|e| ToolError::Failed(format!("{e} in {abs}")))?;
    let diff = edits::fenced_diff(&abs, &edited.old_lf, &edited.new_lf);
    if !dry && edited.new_raw != original {
        let op = if original.is_empty() {
            Op::Write(ops::Write::text(path.to_string(), edited.new_raw))
        } else {
            Op::Edit(ops::Edit {
                path: path.to_string(),
                old_text: original,
                new_text: edited.new_raw,
            })
        };
        ctx.serve_op(gw, op).map_err(|e| match e {
            GatewayError::InvalidParams(_) => ToolError::Failed(format!(
                "{abs} changed while it was being edited; nothing was written (read it again and retry)"
            )),
            other => ToolError::Gateway(other),
        })?;
    }
    Ok(text(diff))
}

/// `move_file`: one rename that never replaces its destination; the gateway refuses it
/// if anything is there, checked by the rename itself.
pub(in crate::mcp) fn move_file(
    gw: &Gateway,
    ctx: &Ops<'_>,
    a: MoveArgs,
) -> Result<CallToolResult, ToolError> {
    let dst = shown(gw, &a.destination);
    handle(
        gw,
        ctx,
        Op::Rename(ops::Rename {
            from: a.source.clone(),
            to: a.destination,
            replace: false,
        }),
    )?;
    Ok(text(format!(
        "Successfully moved {} to {dst}",
        shown(gw, &a.source)
    )))
}
