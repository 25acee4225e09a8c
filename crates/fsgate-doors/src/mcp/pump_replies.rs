//! The pump's state (where records go, the flow, where its own answers go), and how it
//! records the messages it takes and answers those it answers itself.

//!
//! How a line is judged before it is decoded is `classify.rs`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rmcp::model::{ClientJsonRpcMessage, ServerCapabilities};

use serde_json::Value;

use tokio::sync::{mpsc, oneshot, watch};

use super::call::Calls;

use super::encoded;

use super::flow::Flow;

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

impl Pump {
    /// Records a message passed on; if it cannot be recorded it is not passed on.
    pub(super) async fn pass(&self, name: String) -> bool {
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
    pub(super) async fn ignore(&self, name: String, why: &str) {
        let outcome = Err((code::INVALID_REQUEST, why.to_string()));
        if let Err(e) = record(&self.gw, &self.ctx, name, outcome).await {
            tracing::error!("an ignored message could not be recorded: {}", e.message());
        }
    }

    /// Records a request refused with the SDK's error `e` and answers it.
    pub(super) async fn reply_error(
        &self,
        ctx: &Arc<RequestCtx>,
        name: String,
        id: Value,
        e: McpError,
    ) {
        self.answer(ctx, name, id, Err(e)).await;
    }

    /// Records a request answered here and answers it (with a null id when it had
    /// none): `result`, or the error.
    pub(super) async fn reply(
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
    pub(super) async fn answer(
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

/// Records a message that is no workspace operation (on the blocking pool: the record
/// is synced). Err: it could not be recorded, and its answer must say so instead.
pub(super) async fn record(
    gw: &Arc<Gateway>,
    ctx: &Arc<RequestCtx>,
    name: String,
    outcome: Result<(), (i64, String)>,
) -> Result<(), GatewayError> {
    let (gw, ctx) = (Arc::clone(gw), Arc::clone(ctx));
    tokio::task::spawn_blocking(move || {
        gw.serve(
            &ctx,
            Request::message(name, outcome),
            fsgate_gateway::How::alone(),
        )
        .0
    })
    .await
    .unwrap_or_else(|e| Err(GatewayError::Internal(e.to_string())))
    .map(|_| ())
}
