//! The MCP door (see [`crate::door`]): a tool call decodes into one operation (the
//! workspace tools `ls`, `glob`, `grep`, `stat`), a task that composes several (the
//! reference server's tools: an edit reads, then writes; a write answers in its own
//! words), or a message answered here once recorded (arguments that do not fit, roots
//! that did not arrive, the allowed directories). Blocking: runs on the connection's
//! batch thread or tokio's blocking pool.

use fsgate_gateway::ops;
use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::args::{
    EditArgs, GlobArgs, GrepArgs, ListArgs, ListSizesArgs, MkdirArgs, MoveArgs, MultiReadArgs,
    PathArgs, ReadTextArgs, RenameArgs, RmArgs, SearchFilesArgs, TreeArgs, WriteArgs,
};
use super::compat;
use super::render::{self, Answer, ToolError, shown, text};
use super::roots;
use super::tool_id::ToolId;
use crate::door::{Decoded, Door, Ops, Outcome, Ran};
use fsgate_base::error::{GatewayError, code};
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Op, OpId, Output, RequestCtx};

/// The MCP door's tool calls.
pub(super) struct Tools;

/// A tool call as the input pump read it (see `call`).
pub(super) struct ToolRequest {
    /// The tool.
    pub tool: ToolId,
    /// Its arguments.
    pub args: JsonObject,
    /// The context it runs in (its scope: the client's roots).
    pub ctx: Arc<RequestCtx>,
    /// Set when the call waited for the client's roots and they did not come: it is
    /// refused with this instead of served with roots that may be about to narrow.
    pub unsettled: Option<fsgate_base::error::GatewayError>,
}

/// A tool that composes operations, or answers in words of its own, with its arguments.
pub(super) enum Task {
    ReadText(ReadTextArgs),
    /// `write_text_file` and `write_file` (the tag tells which words answer it).
    Write(WriteArgs),
    Edit(EditArgs),
    Mkdir(MkdirArgs),
    CreateDirectory(PathArgs),
    Rm(RmArgs),
    Rename(RenameArgs),
    ReadMedia(PathArgs),
    ReadMultiple(MultiReadArgs),
    ListDirectory(ListArgs),
    ListWithSizes(ListSizesArgs),
    Tree(TreeArgs),
    Move(MoveArgs),
    SearchFiles(SearchFilesArgs),
    FileInfo(PathArgs),
}

impl Door for Tools {
    type Wire = ToolRequest;
    type Tag = ToolId;
    type Answer = Answer;
    type Task = Task;

    fn decode(&self, gw: &Gateway, wire: ToolRequest) -> Decoded<Tools> {
        let ToolRequest {
            tool,
            args,
            ctx,
            unsettled,
        } = wire;
        // The pump held the call until its roots came (see `park`); it waits for nothing here.
        if let Some(e) = unsettled {
            let outcome = Err((e.code(), e.message()));
            return refused_message(tool, outcome, &ToolError::Unsettled(e));
        }
        match plan(tool, args) {
            Ok(Plan::Op(op)) => Decoded::Op { op, tag: tool },
            Ok(Plan::Task(task)) => Decoded::Task { task, tag: tool },
            Ok(Plan::Roots) => Decoded::Message {
                name: tool.name().to_string(),
                tag: tool,
                answer: render::answer(
                    tool,
                    text(roots::allowed_directories(gw, &ctx.scope.roots())),
                ),
                outcome: Ok(()),
            },
            // Only arguments fail here; anything else is still recorded as a failure.
            Err(e) => {
                let outcome =
                    unrecorded(&e).unwrap_or_else(|| Err((code::INTERNAL, e.to_string())));
                refused_message(tool, outcome, &e)
            }
        }
    }

    fn encode(&self, gw: &Gateway, tool: &ToolId, out: Output) -> Answer {
        render::answer(*tool, render::output(gw, out))
    }

    fn panicked(&self, tool: &ToolId) -> Answer {
        tracing::error!(tool = tool.name(), "tool call panicked");
        Answer::Result(render::error(&panicked()))
    }

    fn refuse(&self, tool: &ToolId, e: &GatewayError) -> Answer {
        tracing::debug!(tool = tool.name(), error = %e.message(), "tool call failed");
        Answer::Result(render::error(&ToolError::Gateway(e.clone())))
    }

    fn run(&self, gw: &Gateway, ops: &Ops<'_>, tool: &ToolId, task: Task) -> Ran<Tools> {
        let e = match run(gw, ops, *tool, task) {
            Ok(answer) => return Ran::Answer(answer),
            Err(e) => e,
        };
        tracing::debug!(tool = tool.name(), error = %e, "tool call failed");
        let answer = Answer::Result(render::error(&e));
        match unrecorded(&e) {
            // The gateway never saw this refusal: it is recorded as the tool's message.
            Some(outcome) => Ran::Refused {
                name: tool.name().to_string(),
                outcome,
                answer,
            },
            None => Ran::Answer(answer),
        }
    }
}

/// The error a tool call that panicked (a bug) answers.
pub(super) fn panicked() -> ToolError {
    ToolError::Failed("internal error: the tool call failed".into())
}

/// What a tool call decodes into.
enum Plan {
    Op(Op),
    Task(Task),
    /// `list_allowed_directories`: answered from the client's roots.
    Roots,
}

/// The outcome recorded for a refusal that no operation recorded (arguments that do not
/// fit, a limit of this door); None for one that an operation's record holds.
fn unrecorded(e: &ToolError) -> Option<Outcome> {
    match e {
        ToolError::Args { .. } => Some(Err((code::INVALID_PARAMS, e.to_string()))),
        ToolError::Limit { .. } => Some(Err((code::LIMIT, e.to_string()))),
        ToolError::Unsettled(g) => Some(Err((g.code(), g.message()))),
        ToolError::Gateway(_) | ToolError::Failed(_) => None,
    }
}

/// A call refused before it ran, recorded as the tool's message with `outcome`.
fn refused_message(tool: ToolId, outcome: Outcome, e: &ToolError) -> Decoded<Tools> {
    tracing::debug!(tool = tool.name(), error = %e, "tool call failed");
    Decoded::Message {
        name: tool.name().to_string(),
        tag: tool,
        answer: Answer::Result(render::error(e)),
        outcome,
    }
}

fn parse<T: DeserializeOwned>(tool: ToolId, args: JsonObject) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| ToolError::Args {
        tool: tool.name(),
        reason: e.to_string(),
    })
}

/// `tool`'s arguments read into what it runs: an operation's tool by its operation,
/// any other tool by its name.
fn plan(tool: ToolId, args: JsonObject) -> Result<Plan, ToolError> {
    match tool.op() {
        Some(op) => plan_op(op, tool, args),
        None => plan_composed(tool, args),
    }
}

/// The arguments of `op`'s tool (`tool_id::tool_of`) read into what it runs.
fn plan_op(op: OpId, tool: ToolId, args: JsonObject) -> Result<Plan, ToolError> {
    let task = match op {
        OpId::Ls => {
            let ListArgs { path, cursor } = parse(tool, args)?;
            return Ok(Plan::Op(Op::Ls(ops::Ls {
                path,
                cursor,
                kinds_only: false,
            })));
        }
        OpId::Glob => {
            let GlobArgs { pattern } = parse(tool, args)?;
            return Ok(Plan::Op(Op::Glob(ops::Glob { pattern })));
        }
        OpId::Grep => return Ok(Plan::Op(grep(parse(tool, args)?))),
        OpId::Stat => {
            let PathArgs { path } = parse(tool, args)?;
            return Ok(Plan::Op(Op::Stat(ops::Stat { path, follow: true })));
        }
        OpId::ReadText => Task::ReadText(parse(tool, args)?),
        OpId::ReadFile => Task::ReadMedia(parse(tool, args)?),
        OpId::Write => Task::Write(parse(tool, args)?),
        OpId::Edit => Task::Edit(parse(tool, args)?),
        OpId::Tree => Task::Tree(parse(tool, args)?),
        OpId::Mkdir => Task::Mkdir(parse(tool, args)?),
        OpId::Rm => Task::Rm(parse(tool, args)?),
        OpId::Rename => Task::Rename(parse(tool, args)?),
        // No tool opens a file or changes its mode (see `tool_id::tool_of`): the
        // filesystem view's.
        _ => {
            return Err(ToolError::Gateway(GatewayError::InvalidParams(format!(
                "{}: no such operation for this tool",
                tool.name()
            ))));
        }
    };
    Ok(Plan::Task(task))
}

/// The arguments of a tool that is no one operation's read into what it runs.
fn plan_composed(tool: ToolId, args: JsonObject) -> Result<Plan, ToolError> {
    let task = match tool {
        ToolId::ListAllowedDirectories => return Ok(Plan::Roots),
        ToolId::ReadFile => Task::ReadText(parse(tool, args)?),
        ToolId::WriteFile => Task::Write(parse(tool, args)?),
        ToolId::CreateDirectory => Task::CreateDirectory(parse(tool, args)?),
        ToolId::ReadMultipleFiles => Task::ReadMultiple(parse(tool, args)?),
        ToolId::ListDirectory => Task::ListDirectory(parse(tool, args)?),
        ToolId::ListDirectoryWithSizes => Task::ListWithSizes(parse(tool, args)?),
        ToolId::MoveFile => Task::Move(parse(tool, args)?),
        ToolId::SearchFiles => Task::SearchFiles(parse(tool, args)?),
        ToolId::GetFileInfo => Task::FileInfo(parse(tool, args)?),
        // An operation's tool: `plan` sends it to `plan_op`, never here.
        ToolId::ReadTextFile
        | ToolId::ReadMediaFile
        | ToolId::WriteTextFile
        | ToolId::EditFile
        | ToolId::Ls
        | ToolId::DirectoryTree
        | ToolId::Stat
        | ToolId::Glob
        | ToolId::Grep
        | ToolId::Mkdir
        | ToolId::Rm
        | ToolId::Rename => {
            return Err(ToolError::Failed(format!(
                "internal error: {} is an operation's tool",
                tool.name()
            )));
        }
    };
    Ok(Plan::Task(task))
}

/// Runs a task: its operations through `ops`, its result rendered.
fn run(gw: &Gateway, ops: &Ops<'_>, tool: ToolId, task: Task) -> Result<Answer, ToolError> {
    let result = match task {
        Task::ReadText(a) => compat::read_text(gw, ops, tool.name(), a)?,
        Task::Write(a) => write(gw, ops, tool, a)?,
        Task::Edit(a) => compat::edit(gw, ops, a)?,
        Task::Mkdir(a) => mkdir(gw, ops, a)?,
        Task::CreateDirectory(a) => create_directory(gw, ops, a)?,
        Task::Rm(a) => rm(gw, ops, a)?,
        Task::Rename(a) => rename(gw, ops, a)?,
        Task::ReadMedia(a) => compat::read_media(gw, ops, a)?,
        Task::ReadMultiple(a) => compat::read_multiple(gw, ops, a)?,
        Task::ListDirectory(a) => compat::list_directory(gw, ops, a)?,
        Task::ListWithSizes(a) => compat::list_with_sizes(gw, ops, a)?,
        Task::Tree(a) => return compat::tree(gw, ops, a),
        Task::Move(a) => compat::move_file(gw, ops, a)?,
        Task::SearchFiles(a) => compat::search_files(gw, ops, a)?,
        Task::FileInfo(a) => compat::file_info(gw, ops, a)?,
    };
    Ok(render::answer(tool, result))
}

/// `write_text_file` and `write_file`: the same write, each answered in its own words.
fn write(
    gw: &Gateway,
    ctx: &Ops<'_>,
    tool: ToolId,
    WriteArgs { path, content }: WriteArgs,
) -> Result<CallToolResult, ToolError> {
    let n = content.len();
    ctx.serve_op(gw, Op::Write(ops::Write::text(path.clone(), content)))?;
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

/// `grep`: one search.
fn grep(a: GrepArgs) -> Op {
    Op::Grep(ops::Grep {
        pattern: a.pattern,
        path: a.path,
        ignore_case: a.ignore_case.unwrap_or(false),
        include_glob: a.include_glob,
        max_results: a.max_results,
    })
}

fn mkdir(
    gw: &Gateway,
    ctx: &Ops<'_>,
    MkdirArgs { path, recursive }: MkdirArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Mkdir(ops::Mkdir {
        path: path.clone(),
        recursive: recursive.unwrap_or(false),
    });
    ctx.serve_op(gw, op)?;
    Ok(text(format!("Created directory {}", shown(gw, &path))))
}

/// The reference server's `create_directory`: `mkdir -p`.
fn create_directory(
    gw: &Gateway,
    ctx: &Ops<'_>,
    PathArgs { path }: PathArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Mkdir(ops::Mkdir {
        path: path.clone(),
        recursive: true,
    });
    ctx.serve_op(gw, op)?;
    Ok(text(format!(
        "Successfully created directory {}",
        shown(gw, &path)
    )))
}

fn rm(
    gw: &Gateway,
    ctx: &Ops<'_>,
    RmArgs { path, recursive }: RmArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Rm(ops::Rm {
        path: path.clone(),
        recursive: recursive.unwrap_or(false),
    });
    ctx.serve_op(gw, op)?;
    Ok(text(format!("Deleted {}", shown(gw, &path))))
}

fn rename(
    gw: &Gateway,
    ctx: &Ops<'_>,
    RenameArgs { old_path, new_path }: RenameArgs,
) -> Result<CallToolResult, ToolError> {
    let op = Op::Rename(ops::Rename {
        from: old_path.clone(),
        to: new_path.clone(),
        replace: true,
    });
    ctx.serve_op(gw, op)?;
    Ok(text(format!(
        "Moved {} to {}",
        shown(gw, &old_path),
        shown(gw, &new_path)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::door::{Served, serve_wire};
    use fsgate_gateway::ops::PathStyle;
    use serde_json::json;

    /// A gateway on a workspace holding `a.txt` ("hi").
    fn gateway() -> (tempfile::TempDir, Gateway) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("root");
        std::fs::write(root.join("a.txt"), "hi").expect("write");
        let pol = fsgate_policy::Policy::builtin_default().expect("policy");
        let ws = fsgate_workspace::Workspace::open(&root).expect("workspace");
        (tmp, Gateway::new(pol, ws))
    }

    fn request(name: &str, args: Value) -> ToolRequest {
        let Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        let ctx = RequestCtx {
            style: PathStyle::AbsoluteOrRelative,
            session: "s".into(),
            door: &crate::mcp::DOOR,
            peer: "t".into(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        };
        ToolRequest {
            tool: ToolId::from_name(name).expect("a tool"),
            args,
            ctx: Arc::new(ctx),
            unsettled: None,
        }
    }

    fn served(gw: &Gateway, name: &str, args: Value) -> Served<Tools> {
        let wire = request(name, args);
        let ctx = Arc::clone(&wire.ctx);
        serve_wire(&Tools, gw, &ctx, None, wire)
    }

    /// The text of an answer, and whether it is an error.
    fn said(answer: Answer) -> (String, bool) {
        let r = answer.into_result();
        let text = r
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone());
        (text.unwrap_or_default(), r.is_error == Some(true))
    }

    #[test]
    fn an_operations_tool_plans_by_its_operation_every_other_tool_by_its_name() {
        for tool in ToolId::ALL {
            match plan(tool, JsonObject::new()) {
                Ok(Plan::Op(op)) => assert_eq!(Some(op.id()), tool.op(), "{tool:?}"),
                Ok(_) | Err(ToolError::Args { .. }) => {}
                Err(e) => panic!("{tool:?} has no plan: {e}"),
            }
            // Only an operation's tool is turned away by the composed tools' plan.
            let composed = plan_composed(tool, JsonObject::new());
            let turned_away = matches!(composed, Err(ToolError::Failed(_)));
            assert_eq!(turned_away, tool.op().is_some(), "{tool:?}");
        }
        // Each operation's tool reads its own arguments into that operation.
        let args = |v: Value| match v {
            Value::Object(o) => o,
            _ => JsonObject::new(),
        };
        for (op, a) in [
            (OpId::Ls, json!({"path": "."})),
            (OpId::Glob, json!({"pattern": "*"})),
            (OpId::Grep, json!({"pattern": "x"})),
            (OpId::Stat, json!({"path": "a"})),
        ] {
            let tool = super::super::tool_id::tool_of(op).expect("a tool");
            let planned = plan(tool, args(a));
            assert!(
                matches!(planned, Ok(Plan::Op(ref o)) if o.id() == op),
                "{op:?}"
            );
        }
    }

    #[test]
    fn a_workspace_tool_decodes_into_one_operation_a_reference_tool_into_a_task() {
        let (_tmp, gw) = gateway();
        let ls = Tools.decode(&gw, request("ls", json!({"path": "."})));
        assert!(
            matches!(ls, Decoded::Op { op: Op::Ls(ops::Ls { ref path, cursor: None, .. }), tag: ToolId::Ls } if path == ".")
        );
        let grep = Tools.decode(&gw, request("grep", json!({"pattern": "x"})));
        assert!(matches!(
            grep,
            Decoded::Op {
                op: Op::Grep(ops::Grep { .. }),
                ..
            }
        ));
        let edit = json!({"path": "a.txt", "edits": [{"oldText": "hi", "newText": "ho"}]});
        let edit = Tools.decode(&gw, request("edit_file", edit));
        assert!(matches!(
            edit,
            Decoded::Task {
                task: Task::Edit(_),
                tag: ToolId::EditFile
            }
        ));
        let write = Tools.decode(
            &gw,
            request("write_file", json!({"path": "b", "content": ""})),
        );
        assert!(matches!(
            write,
            Decoded::Task {
                task: Task::Write(_),
                ..
            }
        ));
    }

    #[test]
    fn arguments_that_do_not_fit_decode_into_a_recorded_refusal() {
        let (_tmp, gw) = gateway();
        match Tools.decode(&gw, request("write_file", json!({"path": "b"}))) {
            Decoded::Message {
                name,
                answer,
                outcome: Err((code, message)),
                ..
            } => {
                assert_eq!(name, "write_file");
                assert_eq!(code, code::INVALID_PARAMS);
                assert!(message.contains("missing field `content`"), "{message}");
                let (text, error) = said(answer);
                assert!(
                    error && text.contains("invalid arguments for write_file"),
                    "{text}"
                );
            }
            _ => panic!("not a refusal"),
        }
        let dirs = Tools.decode(&gw, request("list_allowed_directories", json!({})));
        assert!(matches!(
            dirs,
            Decoded::Message {
                outcome: Ok(()),
                ..
            }
        ));
    }

    #[test]
    fn a_task_runs_its_operations_through_the_gateway_and_answers_in_its_words() {
        let (tmp, gw) = gateway();
        let root = tmp.path().canonicalize().expect("root");
        let edit = json!({"path": "a.txt", "edits": [{"oldText": "hi", "newText": "ho"}]});
        let (text, error) = said(served(&gw, "edit_file", edit).answer);
        assert!(
            !error && text.contains("-hi") && text.contains("+ho"),
            "{text}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).expect("read"),
            "ho"
        );
        let (text, error) = said(served(&gw, "mkdir", json!({"path": "d"})).answer);
        assert!(!error, "{text}");
        assert_eq!(
            text,
            format!("Created directory {}", root.join("d").display())
        );
        // A refused operation inside a task answers as the tool's error.
        let (text, error) = said(served(&gw, "read_text_file", json!({"path": ".env"})).answer);
        assert!(error && text.contains("rule secrets:"), "{text}");
    }

    #[test]
    fn one_operation_is_encoded_as_its_tool_renders_it() {
        let (_tmp, gw) = gateway();
        let (text, error) = said(served(&gw, "stat", json!({"path": "a.txt"})).answer);
        let stat: Value = serde_json::from_str(&text).expect("a stat's JSON");
        assert!(!error && stat["stat"]["size"] == json!(2), "{text}");
        let (text, error) = said(Tools.panicked(&ToolId::Stat));
        assert!(
            error && text == "internal error: the tool call failed",
            "{text}"
        );
        let refused = Tools.refuse(&ToolId::Stat, &GatewayError::Internal("disk".into()));
        let (text, error) = said(refused);
        assert!(error && text.contains("disk"), "{text}");
    }
}
