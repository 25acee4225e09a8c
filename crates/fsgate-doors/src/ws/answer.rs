//! The answers a connection gives to messages that are no operation: recorded, then
//! queued (or only recorded, when they get no answer).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::protocol::{self, Ws};
use super::response::{self, Head};

use super::shared::Shared;
use crate::door::{self, Decoded, Door};
use crate::outbox::Outbox;
use fsgate_base::error::{GatewayError, code};
use fsgate_gateway::Request;

/// The answer to a request read while the connection cannot take one (its slots are
/// all taken, or its answers unread) and a question waits for the client: refused
/// rather than left unread.
pub(super) fn busy(head: &Head) -> Value {
    let msg = "this connection cannot take another request now (its [ws] max_in_flight requests are running, or its answers are unread) while a permission question waits for your reply; answer it, then send this request again".to_string();
    let extra = json!({"rule": "ws.max_in_flight", "reason": msg});
    response::error_response(head, code::LIMIT, &msg, Some(&extra))
}

/// Records a message that is no operation, then queues its answer (or, if the record
/// could not be made, the error saying so).
pub(super) async fn answer(sh: &Shared, message: Decoded<Ws>) {
    let (gw, ctx, codec) = (Arc::clone(&sh.gw), Arc::clone(&sh.ctx), sh.codec());
    let tag = match &message {
        Decoded::Op { tag, .. } | Decoded::Task { tag, .. } | Decoded::Message { tag, .. } => {
            tag.clone()
        }
    };
    let text = (sh.pool)
        .spawn_blocking(move || door::serve(&codec, &gw, &ctx, None, message).answer)
        .await
        .unwrap_or_else(|e| {
            let err = GatewayError::Internal(format!("record task failed: {e}"));
            sh.codec().refuse(&tag, &err)
        });
    send(&sh.out, text).await;
}

/// Queues an encoded answer once the connection (and the server) has room for it.
pub(super) async fn send(out: &Outbox<Message>, text: String) {
    let len = text.len();
    out.send(Message::text(text), len).await;
}

/// [`answer`], for `subscribe` / `unsubscribe`: recorded always, answered only when
/// the message had a `requestId`.
pub(super) async fn answer_if_asked(sh: &Shared, head: Head, reply: Value) {
    if head.request_id.is_none() {
        return record(sh, &head.kind, response::outcome_of(&reply)).await;
    }
    answer(sh, protocol::message(head, reply)).await;
}

/// Records a message that gets no answer.
pub(super) async fn record(sh: &Shared, name: &str, outcome: Result<(), (i64, String)>) {
    let (gw, ctx) = (Arc::clone(&sh.gw), Arc::clone(&sh.ctx));
    let name = name.to_string();
    let _ = (sh.pool)
        .spawn_blocking(move || {
            gw.serve(
                &ctx,
                Request::message(name, outcome),
                fsgate_gateway::How::alone(),
            )
            .0
        })
        .await;
}

/// The head of a message that could not be read: no type, no `requestId`.
pub(super) fn no_head() -> Head {
    Head {
        kind: "error".into(),
        request_id: None,
    }
}

pub(super) fn invalid_request(msg: &str) -> Value {
    response::error_response(&no_head(), code::INVALID_REQUEST, msg, None)
}

pub(super) fn too_large(size: usize, max: usize) -> Value {
    let head = no_head();
    let msg = format!(
        "message of {size} bytes exceeds the limit of {max} bytes ([ws] max_message_bytes / [limits] max_message_bytes); the connection will be closed"
    );
    tracing::warn!("{msg}");
    let extra = json!({"rule": "limits.max_message_bytes", "reason": msg});
    response::error_response(&head, code::LIMIT, &msg, Some(&extra))
}
