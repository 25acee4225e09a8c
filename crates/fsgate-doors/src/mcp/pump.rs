//! The input pump: every line the client sends passes here before the SDK sees it.
//!
//! Messages the SDK would drop without a word or a record (not JSON, a batch, JSON that
//! is no JSON-RPC message, an oversized line, a reused id) are recorded and answered
//! here. Notifications and the client's responses are recorded here, once each, and
//! passed on. Requests are entered in the [`Flow`] (whose answer side records them) and
//! passed on only when the connection has room, so a client that stops reading stops
//! being read.
//!
//! What the SDK gets is decoded here (see [`super::wire`]) and judged first (see
//! [`super::era`]): a request answered from itself alone (`ping`, a method its era
//! removed, a feature not declared) is answered here, and so is a 2025-era request
//! before its session's `initialize`; a message the SDK cannot read is answered under
//! its own id, or recorded and ignored if it is no request. A `tools/call` never reaches
//! the SDK: the pump reads it (see [`super::call`]) and hands it to the one path that
//! runs every call (see [`super::direct`]), or answers why not. The SDK runs without an
//! opening handshake of its own (which ended the connection on any message but a
//! request): the pump keeps the handshake's order instead, reading nothing after an
//! `initialize` until the SDK has handled it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ServerCapabilities};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

use super::call::{Call, Calls, Unrun};
use super::direct::Job;
use super::encoded;
use super::era::{self, Marked};
use super::flow::{Flow, id_key};
use super::guard::{LineGuard, OVERSIZED_METHOD};
use super::outgoing::Outgoing;
use super::submit::Door;
use fsgate_base::error::{GatewayError, code};
use fsgate_gateway::ops::RequestCtx;
use fsgate_gateway::{Gateway, Request};
use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;

/// What the pump needs: where records go, the flow, where its own answers go.
pub(super) struct Pump {
    pub gw: Arc<Gateway>,
    /// The connection's 2025-era session.
    pub ctx: Arc<RequestCtx>,
    /// Stateless requests': nothing an earlier message did applies (see `McpServer`).
    pub stateless: Arc<RequestCtx>,
    pub flow: Arc<Flow>,
    /// Answers the pump gives itself, to the output copier (bounded: a full queue stops
    /// the pump).
    pub answers: mpsc::Sender<Outgoing>,
    /// Reads each tool call (see [`super::call`]).
    pub calls: Arc<Calls>,
    /// Where every tool call goes (see [`super::direct`]); shared with the calls that
    /// wait for the client's roots.
    pub door: Arc<Door>,
    /// Set once the input ended: calls still waiting for roots are refused at once.
    pub ended: watch::Sender<bool>,
    /// What the server declares: requests of other features are refused here.
    pub caps: ServerCapabilities,
    /// The client's `initialize` went to the SDK: its 2025-era session is open.
    pub session: AtomicBool,
}

/// A message for the SDK; with a wait, nothing more is read until the SDK has handled
/// it (an `initialize`, as in a handshake).
pub(super) type Handover = (ClientJsonRpcMessage, Option<oneshot::Receiver<()>>);

impl Pump {
    /// A pump for a connection whose SDK has not opened yet.
    pub(super) fn new(
        gw: Arc<Gateway>,
        (ctx, stateless): (Arc<RequestCtx>, Arc<RequestCtx>),
        calls: Arc<Calls>,
        flow: Arc<Flow>,
        (answers, door): (mpsc::Sender<Outgoing>, Door),
        caps: ServerCapabilities,
    ) -> Pump {
        Pump {
            gw,
            ctx,
            stateless,
            calls,
            flow,
            answers,
            door: Arc::new(door),
            ended: watch::Sender::new(false),
            caps,
            session: AtomicBool::new(false),
        }
    }
}

/// The members of a message the pump looks at; the rest is skipped unread.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Marked,
}

/// A line as the pump sees it.
pub(crate) enum Line {
    /// Whitespace, or what is left of a cut oversized line (its stand-in follows).
    Skip,
    /// A message the pump answers itself: its record name, id and error.
    Refuse(String, Value, (i64, String)),
    /// A request, stateless (2026-07-28 `_meta`) or not.
    Request {
        key: String,
        method: String,
        stateless: bool,
    },
    /// A notification or a response from the client: recorded under this name, passed on.
    Pass(String),
    /// A cancellation of the request with this key: recorded, passed on.
    Cancel(Option<String>),
}

/// Reads `input` line by line (lines are at most the message limit: see the guard) and
/// hands what the SDK must see to `sdk`, until `input` ends or the SDK is gone.
pub(super) async fn run<R>(
    pump: Pump,
    input: LineGuard<R>,
    sdk: mpsc::Sender<ClientJsonRpcMessage>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
        line.clear();
        if input.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        // Nothing more read yet: a request may be the only one (see `take_in`).
        let more = !input.buffer().is_empty() || input.get_ref().holds_input();
        let Some((msg, handled)) = pump.take_in(&line, more).await else {
            continue;
        };
        if sdk.send(msg).await.is_err() {
            break;
        }
        if let Some(handled) = handled {
            // Err: answered, or the SDK is gone; either way, read on.
            let _ = handled.await;
        }
    }
    pump.ended.send_replace(true);
    Ok(())
}

/// The message the SDK would decode from `line`, if it can.
fn decode(line: &[u8]) -> Option<ClientJsonRpcMessage> {
    serde_json::from_slice(line.trim_ascii()).ok()
}

impl Pump {
    /// Records, answers or admits one line; Some: the message for the SDK. `more`: lines
    /// after it are already read.
    async fn take_in(&self, line: &[u8], more: bool) -> Option<Handover> {
        match classify(line) {
            Line::Skip => None,
            Line::Refuse(name, id, err) => {
                self.reply(&self.ctx, name, id, Err(err)).await;
                None
            }
            Line::Request {
                key,
                method,
                stateless,
            } => self.request(line, key, method, stateless, more).await,
            Line::Pass(name) => self.other(line, name).await.map(|m| (m, None)),
            Line::Cancel(key) => {
                if let Some(p) = key.and_then(|k| self.flow.take(&k))
                    && !p.claimed
                {
                    let err = (code::INVALID_REQUEST, "cancelled by the client".to_string());
                    let ctx = self.ctx_of(p.stateless);
                    let _ = record(&self.gw, ctx, p.method.clone(), Err(err)).await;
                }
                let cancel = self.other(line, "notifications/cancelled".into()).await;
                cancel.map(|m| (m, None))
            }
        }
    }

    /// The context of a request of the 2025 session, or of a stateless one.
    fn ctx_of(&self, stateless: bool) -> &Arc<RequestCtx> {
        if stateless {
            &self.stateless
        } else {
            &self.ctx
        }
    }

    /// Answers a request here, or admits it for the direct path or the SDK.
    async fn request(
        &self,
        line: &[u8],
        key: String,
        method: String,
        stateless: bool,
        more: bool,
    ) -> Option<Handover> {
        let ctx = self.ctx_of(stateless);
        let id = || serde_json::from_str(&key).unwrap_or(Value::Null);
        if self.flow.is_pending(&key) {
            let err = (
                code::INVALID_REQUEST,
                format!("request id {key} is already in use by a request in flight"),
            );
            self.reply(ctx, method, id(), Err(err)).await;
            return None;
        }
        if let Some(err) = era::refusal(&method, stateless, &self.caps) {
            self.reply(ctx, method, id(), Err(err)).await;
            return None;
        }
        if method == "ping" {
            // A 2025-era ping, in a session or before one: the SDK's answer would
            // depend on what came before.
            self.reply(ctx, method, id(), Ok(json!({}))).await;
            return None;
        }
        if !stateless
            && !self.session.load(Ordering::Relaxed)
            && let Some(err) = era::sessionless(&method)
        {
            self.reply(ctx, method, id(), Err(err)).await;
            return None;
        }
        if method == "tools/call" {
            self.call(line, key, stateless, more).await;
            return None;
        }
        // A line read as a request must reach the SDK as one, or its id is never answered.
        let Some(msg) = decode(line).filter(|m| matches!(m, JsonRpcMessage::Request(_))) else {
            let err = era::unreadable(&method);
            self.reply(ctx, method, id(), Err(err)).await;
            return None;
        };
        let opening = matches!(
            &msg,
            JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_))
        );
        let (done, handled) = oneshot::channel();
        let done = opening.then_some(done);
        self.flow
            .admit(key, method, line.len(), stateless, done)
            .await;
        if opening {
            self.session.store(true, Ordering::Relaxed);
        }
        Some((msg, opening.then_some(handled)))
    }

    /// Runs a tool call (every one takes the direct path), or answers why not.
    async fn call(&self, line: &[u8], key: String, stateless: bool, more: bool) {
        let method = "tools/call".to_string();
        let ctx = self.ctx_of(stateless);
        let id = || serde_json::from_str(&key).unwrap_or(Value::Null);
        match self.calls.read(line, stateless) {
            Ok(call) if !stateless && call.ctx.scope.waits() => {
                self.park(key, call, line.len()).await;
            }
            Ok(call) => {
                // A session's scope that refuses (shut, or an ask that ended unanswered)
                // refuses the call before it runs.
                let refusal = match stateless {
                    false => call.ctx.scope.settled(std::time::Duration::ZERO).err(),
                    true => None,
                };
                let serial = (self.flow)
                    .admit(key.clone(), method, line.len(), stateless, None)
                    .await;
                let alone = !more && self.flow.in_flight() == 1;
                let job = match refusal {
                    Some(e) => Job::new(key, call).refused(e),
                    None => Job::new(key, call),
                };
                self.door.submit(job, serial, alone).await;
            }
            Err(Unrun::Unreadable) => {
                let err = era::unreadable(&method);
                self.reply(ctx, method, id(), Err(err)).await;
            }
            Err(Unrun::Refused(e)) => self.reply_error(ctx, method, id(), e).await,
        }
    }

    /// A call of the session whose roots are on their way: it waits for them by itself,
    /// the reader goes on (and asks for the roots if nobody did yet). Past the bound of
    /// waiting calls, or without room to hold it, it is refused at once.
    async fn park(&self, key: String, call: Call, len: usize) {
        let method = "tools/call".to_string();
        let place = self.calls.roots.place();
        let serial = match &place {
            Ok(_) => (self.flow).try_admit(key.clone(), method.clone(), len, false),
            Err(_) => None,
        };
        let job = Job::new(key.clone(), call);
        let (Ok(place), Some(serial)) = (place, serial) else {
            let serial = self.flow.admit(key, method, len, false, None).await;
            let e = super::roots::too_many();
            return self.door.submit(job.refused(e), serial, false).await;
        };
        self.calls.roots.needed(&self.gw, &self.ctx);
        let (door, calls) = (Arc::clone(&self.door), Arc::clone(&self.calls));
        let ended = self.ended.subscribe();
        tokio::spawn(async move {
            let job = match calls.roots.wait(job.scope(), ended).await {
                None => job,
                Some(e) => job.refused(e),
            };
            drop(place);
            door.submit(job, serial, false).await;
        });
    }

    /// A notification or a response: recorded, and passed on if the SDK can read it;
    /// else ignored.
    async fn other(&self, line: &[u8], name: String) -> Option<ClientJsonRpcMessage> {
        let Some(msg) = decode(line) else {
            self.ignore(name, "ignored: it does not match the MCP schema")
                .await;
            return None;
        };
        if name == "notifications/roots/list_changed" {
            // Calls read after this line wait for the new roots.
            self.ctx.scope.changing();
        }
        if !self.pass(name).await {
            return None;
        }
        Some(msg)
    }

    /// Records a message passed on; if it cannot be recorded it is not passed on.
    async fn pass(&self, name: String) -> bool {
        match record(&self.gw, &self.ctx, name, Ok(())).await {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(
                    "message withheld, it could not be recorded: {}",
                    e.message()
                );
                false
            }
        }
    }

    /// Records a message that gets no answer and goes no further, and why.
    async fn ignore(&self, name: String, why: &str) {
        let outcome = Err((code::INVALID_REQUEST, why.to_string()));
        if let Err(e) = record(&self.gw, &self.ctx, name, outcome).await {
            tracing::error!("an ignored message could not be recorded: {}", e.message());
        }
    }

    /// Records a request refused with the SDK's error `e` and answers it.
    async fn reply_error(&self, ctx: &Arc<RequestCtx>, name: String, id: Value, e: McpError) {
        self.answer(ctx, name, id, Err(e)).await;
    }

    /// Records a request answered here and answers it (with a null id when it had
    /// none): `result`, or the error.
    async fn reply(
        &self,
        ctx: &Arc<RequestCtx>,
        name: String,
        id: Value,
        result: Result<Value, (i64, String)>,
    ) {
        let result = result.map_err(|(code, message)| {
            let code = ErrorCode(i32::try_from(code).unwrap_or(ErrorCode::INTERNAL_ERROR.0));
            McpError::new(code, message, None)
        });
        self.answer(ctx, name, id, result).await;
    }

    /// Records a request answered here and answers it as the SDK writes an answer, an
    /// error's message bounded (as every echo of a request is); if the record cannot be
    /// made, the answer is the error saying so.
    async fn answer(
        &self,
        ctx: &Arc<RequestCtx>,
        name: String,
        id: Value,
        result: Result<Value, McpError>,
    ) {
        let outcome = match &result {
            Ok(_) => Ok(()),
            Err(e) => Err((i64::from(e.code.0), e.message.to_string())),
        };
        let key = serde_json::to_string(&id).unwrap_or_else(|_| "null".into());
        let mut bytes = Vec::new();
        match (record(&self.gw, ctx, name, outcome).await, result) {
            (Ok(()), Ok(v)) => encoded::encode(&mut bytes, &key, ("result", &v)),
            (Ok(()), Err(mut e)) => {
                e.message = fsgate_base::error::echo(&e.message).into_owned().into();
                encoded::encode(&mut bytes, &key, ("error", &e));
            }
            (Err(e), _) => encoded::encode(&mut bytes, &key, ("error", &e.to_rpc_error())),
        }
        let _ = self.answers.send(bytes.into()).await;
    }
}

/// What a line is, judged without building it as a JSON value.
pub(crate) fn classify(line: &[u8]) -> Line {
    let body = line.trim_ascii();
    if body.is_empty() || body.ends_with(b"\0") {
        return Line::Skip;
    }
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(body) {
        return Line::Refuse(
            "invalid-message".into(),
            Value::Null,
            (code::PARSE_ERROR, format!("parse error: {e}")),
        );
    }
    if body.starts_with(b"[") {
        let err = (
            code::INVALID_REQUEST,
            "JSON-RPC batches are not supported; send one message per line".into(),
        );
        return Line::Refuse("batch".into(), Value::Null, err);
    }
    let Ok(env) = serde_json::from_slice::<Envelope>(body) else {
        let err = (
            code::INVALID_REQUEST,
            "not a JSON-RPC message: an object with a string method".into(),
        );
        return Line::Refuse("invalid-message".into(), Value::Null, err);
    };
    let id = env.id.filter(|v| !v.is_null());
    let usable = id
        .as_ref()
        .is_none_or(|v| v.is_string() || v.is_i64() || v.is_u64());
    if env.jsonrpc.as_deref() != Some("2.0") || !usable {
        let err = (code::INVALID_REQUEST, "not a JSON-RPC 2.0 message: \"jsonrpc\": \"2.0\" and a string or integer id are required".into());
        let name = env.method.unwrap_or_else(|| "invalid-message".into());
        return Line::Refuse(name, id.filter(|_| usable).unwrap_or(Value::Null), err);
    }
    match (env.method, id) {
        (Some(m), Some(id)) if m == OVERSIZED_METHOD => oversized(body, id),
        (Some(m), None) if m == OVERSIZED_METHOD => oversized(body, Value::Null),
        (Some(m), Some(id)) => Line::Request {
            key: id_key(&id),
            method: m,
            stateless: env.params.0,
        },
        (Some(m), None) if m == "notifications/cancelled" => Line::Cancel(cancelled_key(body)),
        (Some(m), None) => Line::Pass(m),
        (None, Some(_)) => Line::Pass("response".into()),
        (None, None) => {
            let err = (
                code::INVALID_REQUEST,
                "not a JSON-RPC message: no method and no id".into(),
            );
            Line::Refuse("invalid-message".into(), Value::Null, err)
        }
    }
}

/// The guard's stand-in for an oversized line (small: parsed whole).
fn oversized(body: &[u8], id: Value) -> Line {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (bytes, limit) = (&v["params"]["bytes"], &v["params"]["limit"]);
    let message = format!(
        "message of {bytes} bytes exceeds the limit of {limit} bytes (rule limits.max_message_bytes); it was discarded"
    );
    Line::Refuse(
        "oversized-message".into(),
        id,
        (code::INVALID_REQUEST, message),
    )
}

/// The key of the request a `notifications/cancelled` names.
fn cancelled_key(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "requestId")]
        request_id: Value,
    }
    #[derive(Deserialize)]
    struct Cancelled {
        params: Params,
    }
    let c: Cancelled = serde_json::from_slice(body).ok()?;
    Some(id_key(&c.params.request_id))
}

/// Records a message that is no workspace operation (on the blocking pool: the record
/// is synced). Err: it could not be recorded, and its answer must say so instead.
async fn record(
    gw: &Arc<Gateway>,
    ctx: &Arc<RequestCtx>,
    name: String,
    outcome: Result<(), (i64, String)>,
) -> Result<(), GatewayError> {
    let (gw, ctx) = (Arc::clone(gw), Arc::clone(ctx));
    tokio::task::spawn_blocking(move || gw.serve(&ctx, Request::message(name, outcome)))
        .await
        .unwrap_or_else(|e| Err(GatewayError::Internal(e.to_string())))
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> String {
        match classify(line.as_bytes()) {
            Line::Skip => "skip".into(),
            Line::Refuse(name, id, (code, _)) => format!("refuse {name} {id} {code}"),
            Line::Request {
                key,
                method,
                stateless,
            } => format!(
                "request {key} {method}{}",
                if stateless { " stateless" } else { "" }
            ),
            Line::Pass(name) => format!("pass {name}"),
            Line::Cancel(key) => format!("cancel {key:?}"),
        }
    }

    #[test]
    fn lines_are_told_apart() {
        assert_eq!(kind("  \n"), "skip");
        assert_eq!(kind("{\"a\":\0\n"), "skip");
        assert_eq!(kind("not json"), "refuse invalid-message null -32700");
        assert_eq!(
            kind("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"),
            "refuse batch null -32600"
        );
        assert_eq!(kind("{\"method\":5}"), "refuse invalid-message null -32600");
        assert_eq!(
            kind("{\"jsonrpc\":\"2.0\"}"),
            "refuse invalid-message null -32600"
        );
        let j = |body: &str| format!("{{\"jsonrpc\":\"2.0\",{body}}}");
        let cases = [
            (
                j("\"id\":\"a\",\"method\":\"ping\",\"params\":{\"x\":[1]}"),
                "request \"a\" ping",
            ),
            (
                j("\"method\":\"notifications/initialized\""),
                "pass notifications/initialized",
            ),
            (j("\"id\":3,\"result\":{}"), "pass response"),
            (
                j(
                    "\"id\":2,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}",
                ),
                "request 2 tools/list stateless",
            ),
            (
                "{\"id\":3,\"method\":\"ping\"}".into(),
                "refuse ping 3 -32600",
            ),
            (
                j("\"id\":{},\"method\":\"ping\""),
                "refuse ping null -32600",
            ),
            (
                j("\"id\":1.5,\"method\":\"ping\""),
                "refuse ping null -32600",
            ),
            (
                j("\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":4}"),
                "cancel Some(\"4\")",
            ),
            (
                j(&format!(
                    "\"id\":9,\"method\":\"{OVERSIZED_METHOD}\",\"params\":{{\"bytes\":9000,\"limit\":4096}}"
                )),
                "refuse oversized-message 9 -32600",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(kind(&line), want, "{line}");
        }
    }
}
