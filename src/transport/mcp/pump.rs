//! The input pump: every line the client sends passes here before the SDK sees it.
//!
//! Messages the SDK would drop without a word or a record (not JSON, a batch, JSON that
//! is no JSON-RPC message, an oversized line, a reused id) are recorded and answered
//! here. Notifications and the client's responses are recorded here, once each, and
//! passed on. Requests are entered in the [`Flow`] (whose answer side records them) and
//! passed on only when the connection has room, so a client that stops reading stops
//! being read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::direct::{self, Door, Outgoing};
use super::flow::{Flow, id_key};
use super::guard::{LineGuard, OVERSIZED_METHOD};
use crate::error::code;
use crate::gateway::Gateway;
use crate::ops::RequestCtx;

/// What the pump needs: where records go, the flow, where its own answers go.
pub(super) struct Pump {
    pub gw: Arc<Gateway>,
    pub ctx: Arc<RequestCtx>,
    pub flow: Arc<Flow>,
    /// Answers the pump gives itself, to the output copier (bounded: a full queue stops
    /// the pump).
    pub answers: mpsc::Sender<Outgoing>,
    /// Where plain tool calls go once the session is initialized (see [`super::direct`]).
    pub door: Door,
    /// The client said `notifications/initialized`.
    pub initialized: AtomicBool,
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
}

/// A line as the pump sees it.
pub(crate) enum Line {
    /// Whitespace, or what is left of a cut oversized line (its stand-in follows).
    Skip,
    /// A message the pump answers itself: its record name, id and error.
    Refuse(String, Value, (i64, String)),
    /// A request for the SDK.
    Request { key: String, method: String },
    /// A notification or a response from the client: recorded under this name, passed on.
    Pass(String),
    /// A cancellation of the request with this key: recorded, passed on.
    Cancel(Option<String>),
}

/// Reads `input` line by line (lines are at most the message limit: see the guard) and
/// writes what the SDK must see to `sdk`, until `input` ends.
pub(super) async fn run<R, W>(pump: Pump, input: LineGuard<R>, mut sdk: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
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
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        // Nothing more read yet: a request may be the only one (see `take_in`).
        let more = !input.buffer().is_empty() || input.get_ref().holds_input();
        if pump.take_in(&line, more).await {
            sdk.write_all(&line).await?;
            sdk.flush().await?;
        }
    }
    sdk.shutdown().await
}

impl Pump {
    /// Records, answers or admits one line; true: pass it to the SDK. `more`: lines
    /// after it are already read.
    async fn take_in(&self, line: &[u8], more: bool) -> bool {
        match classify(line) {
            Line::Skip => false,
            Line::Refuse(name, id, err) => {
                self.refuse(name, id, err).await;
                false
            }
            Line::Request { key, method } if self.flow.is_pending(&key) => {
                let err = (
                    code::INVALID_REQUEST,
                    format!("request id {key} is already in use by a request in flight"),
                );
                let id = serde_json::from_str(&key).unwrap_or(Value::Null);
                self.refuse(method, id, err).await;
                false
            }
            Line::Request { key, method } => {
                let job = (method == "tools/call" && self.initialized.load(Ordering::Relaxed))
                    .then(|| direct::job(&key, line))
                    .flatten();
                let serial = self.flow.admit(key, method, line.len()).await;
                match job {
                    Some(job) => {
                        let alone = !more && self.flow.in_flight() == 1;
                        self.door.submit(job, serial, alone).await;
                        false
                    }
                    None => true,
                }
            }
            Line::Pass(name) => {
                if name == "notifications/roots/list_changed" {
                    // Calls read after this line wait for the new roots.
                    self.ctx.scope.changing();
                }
                let initialized = name == "notifications/initialized";
                let passed = self.pass(name).await;
                if initialized && passed {
                    self.initialized.store(true, Ordering::Relaxed);
                }
                passed
            }
            Line::Cancel(key) => {
                if let Some(p) = key.and_then(|k| self.flow.take(&k))
                    && !p.claimed
                {
                    let err = (code::INVALID_REQUEST, "cancelled by the client".to_string());
                    let _ = super::record(&self.gw, &self.ctx, p.method.clone(), Err(err)).await;
                }
                self.pass("notifications/cancelled".into()).await
            }
        }
    }

    /// Records a message passed on; if it cannot be recorded it is not passed on.
    async fn pass(&self, name: String) -> bool {
        match super::record(&self.gw, &self.ctx, name, Ok(())).await {
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

    /// Records a refused message and answers it (with a null id when it had none).
    async fn refuse(&self, name: String, id: Value, (code, message): (i64, String)) {
        let error =
            match super::record(&self.gw, &self.ctx, name, Err((code, message.clone()))).await {
                Ok(()) => json!({"code": code, "message": message}),
                Err(e) => e.to_rpc_error(),
            };
        let mut bytes = json!({"jsonrpc": "2.0", "id": id, "error": error})
            .to_string()
            .into_bytes();
        bytes.push(b'\n');
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> String {
        match classify(line.as_bytes()) {
            Line::Skip => "skip".into(),
            Line::Refuse(name, id, (code, _)) => format!("refuse {name} {id} {code}"),
            Line::Request { key, method } => format!("request {key} {method}"),
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
