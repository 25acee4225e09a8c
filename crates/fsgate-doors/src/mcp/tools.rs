//! Running one tool call: parse its arguments, translate them into gateway operations,
//! render the outcome. Blocking: called on tokio's blocking pool.

use rmcp::model::{CallToolResult, JsonObject};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::args::{
    GlobArgs, GrepArgs, ListArgs, MkdirArgs, PathArgs, RenameArgs, RmArgs, WriteArgs,
};
use super::catalog::ToolId;
use super::compat;
use super::leases::ToolCall;
use super::render::{self, ToolError, shown, text};
use super::roots;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Op, RequestCtx};
use fsgate_gateway::{Batch, Lease, Request};

/// Runs `tool` with `args`, in `batch` if one is given; refusals and failures become
/// `isError` results, and a text tool's success is kept as its one text (see
/// [`Answer`]). Returns the content leases the answer holds until it is written.
pub(super) fn call_answer(
    gw: &Gateway,
    ctx: &RequestCtx,
    batch: Option<&Batch>,
    tool: ToolId,
    args: JsonObject,
) -> (Answer, Vec<Lease>) {
    let call = ToolCall::new(ctx, batch);
    let result = answer(gw, &call, tool, args);
    (result, call.into_leases())
}

/// A tool call's answer before it is encoded.
#[derive(Debug)]
pub(super) enum Answer {
    /// The result as it goes on the wire.
    Result(CallToolResult),
    /// A text tool's success: one plain text block, which goes on the wire twice (the
    /// block, and the structured content `{content}`). Held once here, so that the
    /// direct path can escape it once and copy the escaped bytes.
    Text(String),
    /// [`Answer::Text`] held as its JSON escaping (without the quotes), which a tool
    /// wrote directly (a tree's JSON): the direct path writes these bytes as they are.
    Escaped(String),
}

impl Answer {
    /// The `CallToolResult` the SDK path sends (the text copied into the structured
    /// content).
    pub(super) fn into_result(self) -> CallToolResult {
        match self {
            Answer::Result(r) => r,
            Answer::Text(s) => {
                let mut r = text(s.clone());
                r.structured_content = Some(serde_json::json!({ "content": s }));
                r
            }
            Answer::Escaped(s) => match serde_json::from_str::<String>(&format!("\"{s}\"")) {
                Ok(s) => Answer::Text(s).into_result(),
                // Unreachable: the tool escaped it; still an answer.
                Err(e) => render::error(&ToolError::Failed(format!("internal error: {e}"))),
            },
        }
    }
}

fn answer(gw: &Gateway, ctx: &ToolCall<'_>, tool: ToolId, args: JsonObject) -> Answer {
    // Roots the client is about to give narrow this call too.
    let result = match ctx.scope.settled(roots::SETTLE_WAIT) {
        Ok(_) => run(gw, ctx, tool, args),
        Err(e) => Err(ToolError::Unsettled(e)),
    };
    // Calls the gateway never saw (arguments that do not fit, a transport limit, the
    // directory list) still get their audit record; a record that cannot be written
    // withholds the answer, as everywhere.
    let unrecorded = match &result {
        Err(e @ (ToolError::Args { .. } | ToolError::Limit { .. })) => {
            let code = if matches!(e, ToolError::Args { .. }) {
                fsgate_base::error::code::INVALID_PARAMS
            } else {
                fsgate_base::error::code::LIMIT
            };
            Some(Err((code, e.to_string())))
        }
        Err(ToolError::Unsettled(e)) => Some(Err((e.code(), e.message()))),
        Ok(_) if tool == ToolId::ListAllowedDirectories => Some(Ok(())),
        _ => None,
    };
    if let Some(outcome) = unrecorded
        && let Err(e) = gw.serve(ctx, Request::message(tool.name(), outcome))
    {
        return Answer::Result(render::error(&ToolError::Gateway(e)));
    }
    match result {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(tool = tool.name(), error = %e, "tool call failed");
            Answer::Result(render::error(&e))
        }
    }
}

fn parse<T: DeserializeOwned>(tool: ToolId, args: JsonObject) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| ToolError::Args {
        tool: tool.name(),
        reason: e.to_string(),
    })
}

fn run(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    tool: ToolId,
    args: JsonObject,
) -> Result<Answer, ToolError> {
    let handle = |op: Op| ctx.serve_op(gw, op).map_err(ToolError::from);
    let result = match tool {
        ToolId::ReadTextFile | ToolId::ReadFile => {
            compat::read_text(gw, ctx, tool.name(), parse(tool, args)?)?
        }
        ToolId::WriteTextFile | ToolId::WriteFile => write(gw, ctx, tool, parse(tool, args)?)?,
        ToolId::EditFile => compat::edit(gw, ctx, parse(tool, args)?)?,
        ToolId::Ls => {
            let ListArgs { path, cursor } = parse(tool, args)?;
            render::output(gw, handle(Op::Ls { path, cursor })?)
        }
        ToolId::Glob => {
            let GlobArgs { pattern } = parse(tool, args)?;
            render::output(gw, handle(Op::Glob { pattern })?)
        }
        ToolId::Grep => grep(gw, ctx, parse(tool, args)?)?,
        ToolId::Stat => {
            let PathArgs { path } = parse(tool, args)?;
            render::output(gw, handle(Op::Stat { path })?)
        }
        ToolId::Mkdir => mkdir(gw, ctx, parse(tool, args)?)?,
        ToolId::CreateDirectory => create_directory(gw, ctx, parse(tool, args)?)?,
        ToolId::Rm => rm(gw, ctx, parse(tool, args)?)?,
        ToolId::Rename => rename(gw, ctx, parse(tool, args)?)?,
        ToolId::ReadMediaFile => compat::read_media(gw, ctx, parse(tool, args)?)?,
        ToolId::ReadMultipleFiles => compat::read_multiple(gw, ctx, parse(tool, args)?)?,
        ToolId::ListDirectory => compat::list_directory(gw, ctx, parse(tool, args)?)?,
        ToolId::ListDirectoryWithSizes => compat::list_with_sizes(gw, ctx, parse(tool, args)?)?,
        ToolId::DirectoryTree => return compat::tree(gw, ctx, parse(tool, args)?),
        ToolId::MoveFile => compat::move_file(gw, ctx, parse(tool, args)?)?,
        ToolId::SearchFiles => compat::search_files(gw, ctx, parse(tool, args)?)?,
        ToolId::GetFileInfo => compat::file_info(gw, ctx, parse(tool, args)?)?,
        ToolId::ListAllowedDirectories => text(roots::allowed_directories(gw, &ctx.scope.roots())),
    };
    Ok(render::answer(tool, result))
}

/// `write_text_file` and `write_file`: the same write, each answered in its own words.
fn write(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    tool: ToolId,
    WriteArgs { path, content }: WriteArgs,
) -> Result<CallToolResult, ToolError> {
    let n = content.len();
    ctx.serve_op(
        gw,
        Op::WriteText {
            path: path.clone(),
            content,
        },
    )?;
    if tool == ToolId::WriteFile {
        // The reference server's words; write_text_file also gives the size.
        Ok(text(format!("Successfully wrote to {}", shown(gw, &path))))
    } else {
        Ok(text(format!(
            "Successfully wrote {n} bytes to {}",
            shown(gw, &path)
        )))
    }
}

fn grep(gw: &Gateway, ctx: &ToolCall<'_>, a: GrepArgs) -> Result<CallToolResult, ToolError> {
    let op = Op::Grep {
        pattern: a.pattern,
        path: a.path,
        ignore_case: a.ignore_case.unwrap_or(false),
        include_glob: a.include_glob,
        max_results: a.max_results,
    };
    Ok(render::output(gw, ctx.serve_op(gw, op)?))
}

fn mkdir(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    MkdirArgs { path, recursive }: MkdirArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Mkdir {
        path: path.clone(),
        recursive: recursive.unwrap_or(false),
    };
    ctx.serve_op(gw, op)?;
    Ok(text(format!("Created directory {}", shown(gw, &path))))
}

/// The reference server's `create_directory`: `mkdir -p`.
fn create_directory(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    PathArgs { path }: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Mkdir {
        path: path.clone(),
        recursive: true,
    };
    ctx.serve_op(gw, op)?;
    Ok(text(format!(
        "Successfully created directory {}",
        shown(gw, &path)
    )))
}

fn rm(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    RmArgs { path, recursive }: RmArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Rm {
        path: path.clone(),
        recursive: recursive.unwrap_or(false),
    };
    ctx.serve_op(gw, op)?;
    Ok(text(format!("Deleted {}", shown(gw, &path))))
}

fn rename(
    gw: &Gateway,
    ctx: &ToolCall<'_>,
    RenameArgs { old_path, new_path }: RenameArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Rename {
        from: old_path.clone(),
        to: new_path.clone(),
    };
    ctx.serve_op(gw, op)?;
    Ok(text(format!(
        "Moved {} to {}",
        shown(gw, &old_path),
        shown(gw, &new_path)
    )))
}
