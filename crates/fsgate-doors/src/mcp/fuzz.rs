//! Entry points for the fuzz targets (feature `fuzzing` only, never in `fsgate`): the
//! MCP door's input guard, its pump's classification of a line, a `tools/call` line as
//! the door reads and runs it, and the client's answers to fsgate's questions
//! (elicitation, and the retry of a multi round-trip request), which are private to the
//! door.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientResult, JsonObject};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::call::{Calls, Unrun};
use super::mrtr;
use fsgate_gateway::ask::{Answer, Asker, Question};

use super::classify::{Line, classify, classify_guarded};
use super::guard::LineGuard;
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

/// How the stdio pump classifies one line read through the guard (its marks
/// included), as a short description; a request's `(key, method)` is returned too.
pub fn classify_line(line: &[u8]) -> (String, Option<(String, String)>) {
    match classify_guarded(line) {
        Line::Skip => ("skip".into(), None),
        Line::Refuse(name, id, (code, _)) => (format!("refuse {name} {id} {code}"), None),
        Line::Request { key, method, .. } => ("request".into(), Some((key, method))),
        Line::Pass(name) => (format!("pass {name}"), None),
        Line::Cancel(key) => (format!("cancel {key:?}"), None),
    }
}

/// A `tools/call` line as the door takes it: read as the input pump reads it (its era
/// as the pump classifies it), then, if the door would run it, run under `ctx` (a
/// stateless call under a stateless context, or its round's): `None` if the line is no
/// `tools/call` request; else the result as JSON, or the JSON-RPC error (code, message)
/// the door answers instead.
pub fn call_line(
    gw: &Gateway,
    ctx: &RequestCtx,
    line: &[u8],
) -> Option<Result<Value, (i64, String)>> {
    let Line::Request {
        method, stateless, ..
    } = classify(line)
    else {
        return None;
    };
    if method != "tools/call" {
        return None;
    }
    let calls = Calls {
        ctx: std::sync::Arc::new(ctx.clone()),
        stateless: std::sync::Arc::new(ctx.clone()),
        states: mrtr::States::new().ok().map(std::sync::Arc::new),
        session_version: std::sync::OnceLock::new(),
        roots: Default::default(),
    };
    let call = match calls.read(line, stateless) {
        Ok(call) => call,
        Err(Unrun::Unreadable) => return Some(Err(super::era::unreadable(&method))),
        Err(Unrun::Refused(e)) => return Some(Err((i64::from(e.code.0), e.message.into_owned()))),
    };
    let wire = tools::ToolRequest {
        tool: call.tool,
        args: call.args,
        ctx: std::sync::Arc::clone(&call.ctx),
        unsettled: None,
    };
    let served = crate::door::serve_wire(&tools::Tools, gw, &call.ctx, None, wire);
    Some(serde_json::to_value(served.answer.into_result()).map_err(|e| (0, e.to_string())))
}

/// The answer the client's result to fsgate's `elicitation/create` gives, the result
/// read as the SDK reads a client's result (None: not one it would read).
pub fn elicitation_answer(result: &Value) -> Option<Answer> {
    let r: ClientResult = serde_json::from_value(result.clone()).ok()?;
    Some(super::elicit::answer_of(Ok(r)))
}

/// The tool and arguments of the call whose first round [`mrtr_retry`] asks about.
pub const MRTR_TOOL: &str = "write_text_file";

/// The arguments of that call.
pub fn mrtr_args() -> JsonObject {
    let mut args = JsonObject::new();
    args.insert("path".into(), "notes/a.txt".into());
    args.insert("content".into(), "x".into());
    args
}

/// A multi round-trip retry and what became of it.
#[derive(Debug)]
pub struct MrtrRetry {
    /// The `requestState` the first round issued.
    pub issued: String,
    /// The retry's `tools/call` params as the SDK read them (each `@STATE` of the text
    /// replaced by the issued state).
    pub params: CallToolRequestParams,
    /// Refused (why), or the answer the retry's round gave `q` and whether it asks
    /// again (an `InputRequiredResult`).
    pub outcome: Result<(Answer, bool), String>,
    /// Whether sending the same retry once more was refused.
    pub replay_refused: bool,
}

/// A first round of [`MRTR_TOOL`] with [`mrtr_args`] by principal `p` meets `q` and
/// issues a state; `retry` is then decided as the stateless door decides a retry's
/// `tools/call`. None if `retry` is no `tools/call` params the SDK would read.
pub fn mrtr_retry(q: &Question, retry: &str) -> Option<MrtrRetry> {
    let states = mrtr::States::new().ok()?;
    let first = mrtr::Round::begin(&states, "p", (MRTR_TOOL, &mrtr_args()), (None, None)).ok()?;
    let _ = first.ask(q, Duration::ZERO);
    let issued = first
        .input_required(&states, Duration::from_secs(60))?
        .request_state?;
    let params: CallToolRequestParams =
        serde_json::from_str(&retry.replace("@STATE", &issued)).ok()?;
    let args = params.arguments.clone().unwrap_or_default();
    let responses = params
        .input_responses
        .as_ref()
        .and_then(|r| serde_json::to_value(r).ok());
    let begin = || {
        mrtr::Round::begin(
            &states,
            "p",
            (&params.name, &args),
            (params.request_state.as_deref(), responses.as_ref()),
        )
    };
    let outcome = begin().map(|round| {
        let answer = round.ask(q, Duration::ZERO);
        let again = round
            .input_required(&states, Duration::from_secs(60))
            .is_some();
        (answer, again)
    });
    let replay_refused = begin().is_err();
    Some(MrtrRetry {
        issued,
        params,
        outcome,
        replay_refused,
    })
}
