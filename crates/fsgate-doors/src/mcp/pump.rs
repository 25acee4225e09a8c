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

//!
//! How a line is judged before it is decoded is `classify.rs`; the pump's state, its
//! records and its own answers are `pump_replies.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::call::{Call, Unrun};
use super::classify::{Line, classify_guarded};
use super::direct::Job;
use super::pump_replies::{Handover, Pump, record};

use super::era;

use super::guard::LineGuard;

use fsgate_base::error::code;
use fsgate_gateway::ops::RequestCtx;

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
        match classify_guarded(line) {
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
}
