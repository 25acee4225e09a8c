//! Entry points for the fuzz targets (feature `fuzzing` only, never in `fsgate`): the
//! MCP door's input guard, its pump's classification of a line, and one tool call,
//! which are private to the door.

use serde_json::{Map, Value};
use tokio::io::AsyncReadExt;

use super::catalog::ToolId;
use super::guard::LineGuard;
use super::pump::{Line, classify};
use super::tools;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::RequestCtx;

/// What the SDK would read after the guard, for `input` and a line limit of `max`.
pub fn guard(input: &[u8], max: usize) -> std::io::Result<Vec<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    rt.block_on(async {
        let mut out = Vec::new();
        LineGuard::new(input, max).read_to_end(&mut out).await?;
        Ok(out)
    })
}

/// How the pump classifies one line, as a short description; a request's `(key,
/// method)` is returned too.
pub fn classify_line(line: &[u8]) -> (String, Option<(String, String)>) {
    match classify(line) {
        Line::Skip => ("skip".into(), None),
        Line::Refuse(name, id, (code, _)) => (format!("refuse {name} {id} {code}"), None),
        Line::Request { key, method, .. } => ("request".into(), Some((key, method))),
        Line::Pass(name) => (format!("pass {name}"), None),
        Line::Cancel(key) => (format!("cancel {key:?}"), None),
    }
}

/// Runs the tool `name` with `args` as a `tools/call` would; `None` for an unknown tool.
/// The result is the `CallToolResult` as JSON.
pub fn call_tool(
    gw: &Gateway,
    ctx: &RequestCtx,
    name: &str,
    args: Map<String, Value>,
) -> Option<Value> {
    let tool = ToolId::from_name(name)?;
    let (result, leases) = tools::call(gw, ctx, tool, args);
    drop(leases);
    serde_json::to_value(result).ok()
}
