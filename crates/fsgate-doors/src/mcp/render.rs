//! Tool results: gateway outputs and failures as MCP `CallToolResult`s.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::catalog::OutputKind;
use super::tool_id::ToolId;
use fsgate_base::error::GatewayError;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Output, PathStyle};

/// Why a tool call failed; shown to the client as an `isError` result of one line.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum ToolError {
    /// The gateway refused or failed the operation (names the rule where there is one).
    #[error("{}", .0.message())]
    Gateway(#[from] GatewayError),
    /// The arguments do not fit the tool's input schema.
    #[error("invalid arguments for {tool}: {reason}")]
    Args {
        /// Tool name.
        tool: &'static str,
        /// One line.
        reason: String,
    },
    /// A limit of this transport (not of the policy) was reached.
    #[error("limit exceeded: {reason} (rule {rule}, path {path})")]
    Limit {
        /// One line.
        reason: String,
        /// The limit's name.
        rule: &'static str,
        /// Path as the request gave it.
        path: String,
    },
    /// The client's roots were asked for and did not arrive: refused before it ran.
    #[error("{}", .0.message())]
    Unsettled(GatewayError),
    /// Anything else about the request that cannot be done.
    #[error("{0}")]
    Failed(String),
}

/// One text block.
pub(super) fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

/// A failure as an `isError` result carrying its one-line reason.
pub(super) fn error(e: &ToolError) -> CallToolResult {
    let msg = e.to_string();
    let line = match msg.split_once('\n') {
        Some((first, _)) => first,
        None => &msg,
    };
    // What the call named (a path, a pattern) is the client's text: bounded.
    let line = fsgate_base::error::echo(line).into_owned();
    CallToolResult::error(vec![ContentBlock::text(line)])
}

/// Structured content with its JSON text, as the MCP spec advises for compatibility.
pub(super) fn structured(value: Value) -> CallToolResult {
    CallToolResult::structured(value)
}

/// [`with_structured`], except that a text tool's success of one plain text block (what
/// nearly every read answers) stays that text alone, not yet copied.
pub(super) fn answer(tool: ToolId, mut r: CallToolResult) -> Answer {
    let plain = tool.output() == OutputKind::Text
        && r.is_error == Some(false)
        && r.structured_content.is_none()
        && r.meta.is_none()
        && r.content.len() == 1;
    if plain && let Some(ContentBlock::Text(t)) = r.content.pop() {
        if t.meta.is_none() && t.annotations.is_none() {
            return Answer::Text(t.text);
        }
        r.content.push(ContentBlock::Text(t));
    }
    Answer::Result(with_structured(tool, r))
}

/// A successful result with the structured content its tool's output schema promises:
/// `{content}` holding the text, or the content blocks of a media read, as the
/// reference server answers. Failures carry none (the schema binds successes only).
pub(super) fn with_structured(tool: ToolId, mut r: CallToolResult) -> CallToolResult {
    if r.is_error == Some(true) || r.structured_content.is_some() {
        return r;
    }
    let content = match tool.output() {
        OutputKind::Ls | OutputKind::Stat | OutputKind::Paths | OutputKind::Matches => return r,
        OutputKind::Media => match serde_json::to_value(&r.content) {
            Ok(v) => v,
            Err(e) => return error(&ToolError::Failed(format!("internal error: {e}"))),
        },
        OutputKind::Text => {
            let mut text = String::new();
            for block in &r.content {
                if let Some(t) = block.as_text() {
                    text.push_str(&t.text);
                }
            }
            Value::String(text)
        }
    };
    r.structured_content = Some(json!({ "content": content }));
    r
}

/// A contract tool's output: text as is, listings as structured JSON shaped like the
/// ACP transport's results (the contract's one rendering).
pub(super) fn output(gw: &Gateway, out: Output) -> CallToolResult {
    match out {
        Output::Text(s) => text(s),
        Output::File { content, .. } => text(content),
        Output::Unit => text("ok"),
        other => structured(crate::results::render(
            gw,
            PathStyle::AbsoluteOrRelative,
            other,
        )),
    }
}

/// The absolute form of a request path that the gateway has already accepted (lexical
/// only), for confirmation messages; the request's own text if it does not parse.
pub(super) fn shown(gw: &Gateway, path: &str) -> String {
    match gw.members().named_path(path) {
        Some(rel) => gw.show_path(PathStyle::AbsoluteOrRelative, &rel),
        None => path.to_string(),
    }
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
                Err(e) => error(&ToolError::Failed(format!("internal error: {e}"))),
            },
        }
    }
}

/// The tool error for an answer of `size` encoded bytes, over the message limit `max`.
pub(super) fn too_big(size: usize, max: usize) -> CallToolResult {
    error(&ToolError::Failed(format!(
        "the answer would be {size} bytes once encoded, over the message limit of {max} bytes \
         (rule limits.max_message_bytes); ask for less (a line window, fewer paths, a narrower pattern)"
    )))
}
