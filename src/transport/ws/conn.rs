//! One WebSocket connection: its requests (served concurrently, up to a limit), its
//! subscription, and its share of the change notices.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsProtoError};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::protocol::{self, Head, Incoming};
use super::watch::Notice;
use crate::error::{GatewayError, code};
use crate::gateway::Gateway;
use crate::gateway::Request;
use crate::ops::RequestCtx;
use crate::path::RelPath;
use crate::transport::outbox::{Outbox, Queued, SharedRoom};

/// How long the rest of an oversized message is read and discarded, so that closing
/// the socket does not reset it before the client has read the error.
const DRAIN_AFTER_OVERSIZE: Duration = Duration::from_secs(5);

/// Per-connection limits.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Requests served at once.
    pub max_in_flight: usize,
    /// Largest message, in bytes.
    pub max_message: usize,
    /// Unwritten bytes of all connections together.
    pub total: SharedRoom,
}

/// Serves one upgraded connection until the client closes it.
pub async fn run(
    ws: WebSocketStream<TcpStream>,
    gw: Arc<Gateway>,
    ctx: RequestCtx,
    limits: ConnLimits,
    notices: Option<broadcast::Receiver<Arc<Notice>>>,
    subscription: Option<RelPath>,
) {
    let (sink, mut stream) = ws.split();
    // Unwritten messages: at most twice the message limit per connection, and the
    // server's total across connections; a full outbox stops reading requests.
    let (out, out_rx) = Outbox::<Message>::new(limits.max_message.saturating_mul(2));
    let out = out.sharing(&limits.total);
    let writer = tokio::spawn(write_all(sink, out_rx));
    let (sub_tx, sub_rx) = watch::channel(subscription);
    let events = notices.map(|n| tokio::spawn(forward_notices(n, sub_rx, out.clone())));
    let ctx = Arc::new(ctx);
    let slots = Arc::new(Semaphore::new(limits.max_in_flight));
    let mut tasks = JoinSet::new();
    let mut oversized = false;
    loop {
        while tasks.try_join_next().is_some() {}
        out.wait_for_room().await;
        let msg = match stream.next().await {
            None => break,
            Some(Ok(m)) => m,
            Some(Err(WsProtoError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                too_large(&gw, &ctx, &out, size, max_size).await;
                oversized = true;
                break;
            }
            Some(Err(e)) => {
                tracing::debug!(session = %ctx.session, "connection ended: {e}");
                break;
            }
        };
        let text = match msg {
            Message::Text(t) => t,
            Message::Binary(_) => {
                let msg = "binary frames are not supported; send JSON text messages";
                let v = protocol::error_response(&no_head(), code::INVALID_REQUEST, msg, None);
                let outcome = Err((code::INVALID_REQUEST, msg.to_string()));
                answer_recorded(&gw, &ctx, "invalid-message", outcome, v, &out).await;
                continue;
            }
            Message::Close(_) => break,
            // Control frames, answered by the WebSocket layer itself: no request.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        match protocol::parse(text.as_str()) {
            Incoming::Bad(v) => {
                let outcome = Err((
                    v["error"]["code"].as_i64().unwrap_or(code::INVALID_REQUEST),
                    v["error"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
                answer_recorded(&gw, &ctx, "invalid-message", outcome, v, &out).await;
            }
            Incoming::Subscribe { head, path } => {
                let (reply, outcome) = match RelPath::parse_rooted(&path) {
                    Ok(rel) => {
                        let shown = rel.to_rooted();
                        sub_tx.send_replace(Some(rel));
                        (
                            protocol::data_response(&head, json!({"path": shown})),
                            Ok(()),
                        )
                    }
                    Err(e) => {
                        let err = GatewayError::InvalidParams(format!("path {path:?}: {e}"));
                        let outcome = Err((err.code(), err.message()));
                        (protocol::gateway_error_response(&head, &err), outcome)
                    }
                };
                let reply = head.request_id.is_some().then_some(reply);
                answer_recorded_opt(&gw, &ctx, "subscribe", outcome, reply, &out).await;
            }
            Incoming::Unsubscribe { head } => {
                sub_tx.send_replace(None);
                let reply = head
                    .request_id
                    .is_some()
                    .then(|| protocol::data_response(&head, json!({})));
                answer_recorded_opt(&gw, &ctx, "unsubscribe", Ok(()), reply, &out).await;
            }
            Incoming::Op { head, op, base64 } => {
                // Back-pressure: at the limit, the next message is not read until a
                // request finishes.
                let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                    break;
                };
                let (gw, ctx, out) = (Arc::clone(&gw), Arc::clone(&ctx), out.clone());
                tasks.spawn(async move {
                    let head2 = head.clone();
                    let (reply, lease) = tokio::task::spawn_blocking(move || {
                        let (v, lease) = match gw.serve_leased(&ctx, Request::Op(op)) {
                            (Ok(o), lease) => (
                                protocol::data_response(&head, protocol::render(&gw, o, base64)),
                                lease,
                            ),
                            (Err(e), _) => (protocol::gateway_error_response(&head, &e), None),
                        };
                        (text_message(&v), lease)
                    })
                    .await
                    .unwrap_or_else(|e| {
                        tracing::error!("request task failed: {e}");
                        let err = GatewayError::Internal("request task failed".into());
                        let v = protocol::gateway_error_response(&head2, &err);
                        (text_message(&v), None)
                    });
                    send(&out, reply).await;
                    drop(lease);
                    drop(permit);
                });
            }
        }
    }
    // Requests already running finish and are answered (they are audited either way).
    while tasks.join_next().await.is_some() {}
    if let Some(e) = events {
        e.abort();
    }
    if oversized {
        let close = Message::Close(Some(CloseFrame {
            code: CloseCode::Size,
            reason: "message too large".into(),
        }));
        send(&out, close).await;
    }
    drop(out);
    if let Ok(sink) = writer.await
        && oversized
        && let Ok(mut ws) = stream.reunite(sink)
    {
        drain(ws.get_mut(), limits.max_message).await;
    }
    tracing::debug!(session = %ctx.session, "connection closed");
}

async fn too_large(
    gw: &Arc<Gateway>,
    ctx: &Arc<RequestCtx>,
    out: &Outbox<Message>,
    size: usize,
    max: usize,
) {
    let msg = format!(
        "message of {size} bytes exceeds the limit of {max} bytes ([ws] max_message_bytes / [limits] max_message_bytes); the connection will be closed"
    );
    tracing::warn!("{msg}");
    let extra = json!({"rule": "limits.max_message_bytes", "reason": msg});
    let v = protocol::error_response(&no_head(), code::LIMIT, &msg, Some(&extra));
    answer_recorded(gw, ctx, "invalid-message", Err((code::LIMIT, msg)), v, out).await;
}

/// The head of an answer to a message that named none.
fn no_head() -> Head {
    Head {
        kind: "error".into(),
        request_id: None,
    }
}

/// Records a message that is no workspace operation (on the blocking pool: the record
/// is synced), then sends `reply`; if the record could not be written, the client gets
/// that error instead.
async fn answer_recorded(
    gw: &Arc<Gateway>,
    ctx: &Arc<RequestCtx>,
    name: &'static str,
    outcome: Result<(), (i64, String)>,
    reply: Value,
    out: &Outbox<Message>,
) {
    answer_recorded_opt(gw, ctx, name, outcome, Some(reply), out).await;
}

/// [`answer_recorded`] for a message that may expect no reply (`reply` None).
async fn answer_recorded_opt(
    gw: &Arc<Gateway>,
    ctx: &Arc<RequestCtx>,
    name: &'static str,
    outcome: Result<(), (i64, String)>,
    reply: Option<Value>,
    out: &Outbox<Message>,
) {
    let (gw, ctx2) = (Arc::clone(gw), Arc::clone(ctx));
    let recorded =
        tokio::task::spawn_blocking(move || gw.serve(&ctx2, Request::message(name, outcome)))
            .await
            .unwrap_or_else(|e| Err(GatewayError::Internal(format!("request task failed: {e}"))));
    let reply = match recorded {
        Ok(_) => reply,
        Err(e) => Some(protocol::gateway_error_response(&no_head(), &e)),
    };
    if let Some(v) = reply {
        let _ = send(out, text_message(&v)).await;
    }
}

/// Closes our side (the server closes TCP first after a close frame) and reads and
/// discards what the client still sends, until it closes or time is up.
async fn drain(tcp: &mut TcpStream, max: usize) {
    let _ = tcp.shutdown().await;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = max.saturating_mul(2);
    let _ = tokio::time::timeout(DRAIN_AFTER_OVERSIZE, async {
        while left > 0 {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

fn text_message(v: &Value) -> Message {
    Message::text(v.to_string())
}

/// Queues `m` once the connection (and the server) has room for it; false if closed.
async fn send(out: &Outbox<Message>, m: Message) -> bool {
    let len = m.len();
    out.send(m, len).await
}

/// Sends queued messages in order; returns the sink so an oversized connection can be
/// drained.
async fn write_all<S>(mut sink: S, mut rx: mpsc::UnboundedReceiver<Queued<Message>>) -> S
where
    S: futures_util::Sink<Message> + Unpin,
{
    // Each message's room is given back once it is written (when `q` drops).
    while let Some(q) = rx.recv().await {
        let closing = matches!(q.msg, Message::Close(_));
        if sink.send(q.msg).await.is_err() || closing {
            break;
        }
    }
    let _ = sink.flush().await;
    sink
}

/// Pushes the notices under the connection's subscription.
async fn forward_notices(
    mut notices: broadcast::Receiver<Arc<Notice>>,
    subscription: watch::Receiver<Option<RelPath>>,
    out: Outbox<Message>,
) {
    loop {
        let msg = match notices.recv().await {
            Ok(n) => match &*n {
                Notice::Change(c) => {
                    let wanted = subscription
                        .borrow()
                        .as_ref()
                        .is_some_and(|sub| c.path.starts_with(sub));
                    if !wanted {
                        continue;
                    }
                    protocol::change_event(c)
                }
                Notice::Overflow => protocol::overflow_event(None),
            },
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(dropped = n, "a slow client lost change events");
                protocol::overflow_event(Some(n))
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !send(&out, text_message(&msg)).await {
            return;
        }
    }
}
