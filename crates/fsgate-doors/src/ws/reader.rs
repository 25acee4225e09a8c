//! A connection's reading side: each message read, what is no operation answered, an
//! operation taken to be served; and, while a question waits for the client, its
//! reply read meanwhile.

use futures_util::StreamExt;
use futures_util::stream::SplitStream;
use serde_json::json;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsProtoError};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::answer::{answer, answer_if_asked, busy, invalid_request, no_head, record, too_large};
use super::permission::ReplyError;
use super::protocol::{self, Echo, Incoming};
use super::response;
use super::shared::Shared;
use crate::door::{Decoded, Door};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_gateway::ops::Op;

/// A decoded operation, waiting for its slot.
pub(super) struct Task {
    pub(super) op: Op,
    pub(super) tag: Echo,
}

/// Takes one text message: answers (after recording) what is no operation, and
/// returns an operation to serve.
pub(super) async fn take(
    sh: &Shared,
    sub_tx: &watch::Sender<Option<RelPath>>,
    text: &str,
) -> Option<Task> {
    match protocol::parse(text) {
        Incoming::Request(request) => match sh.codec().decode(&sh.gw, request) {
            Decoded::Op { op, tag } => return Some(Task { op, tag }),
            message => answer(sh, message).await,
        },
        Incoming::Bad { head, reply } => answer(sh, protocol::message(head, reply)).await,
        Incoming::Subscribe { head, path } => {
            let reply = match fsgate_gateway::subscription(&path) {
                Ok(rel) => {
                    let shown = rel.to_rooted();
                    sub_tx.send_replace(Some(rel));
                    response::data_response(&head, json!({"path": shown}))
                }
                Err(e) => response::gateway_error_response(&head, &e),
            };
            answer_if_asked(sh, head, reply).await;
        }
        Incoming::Unsubscribe { head } => {
            sub_tx.send_replace(None);
            let reply = response::data_response(&head, json!({}));
            answer_if_asked(sh, head, reply).await;
        }
        Incoming::Permission {
            head,
            id,
            answer: a,
        } => {
            let delivered = match &sh.asks {
                Some(asks) => asks.deliver(&id, a),
                None => Err(ReplyError::Unknown(id)),
            };
            match delivered {
                Ok(()) => record(sh, &head.kind, Ok(())).await,
                Err(e) => {
                    let err = GatewayError::InvalidParams(e.to_string());
                    let reply = response::gateway_error_response(&head, &err);
                    answer(sh, protocol::message(head, reply)).await;
                }
            }
        }
    }
    None
}

/// The connection's reading side.
pub(super) struct Reader {
    pub(super) stream: SplitStream<WebSocketStream<TcpStream>>,
    /// How many of the connection's questions wait for a reply.
    pub(super) waiting: Option<watch::Receiver<usize>>,
    /// The client closed, or the connection failed.
    pub(super) ended: bool,
    /// It ended with a message over the limit.
    pub(super) oversized: bool,
}

impl Reader {
    /// The text of what was read; anything else is answered here, or ends the reading.
    pub(super) async fn text(
        &mut self,
        sh: &Shared,
        read: Option<Result<Message, WsProtoError>>,
    ) -> Option<Utf8Bytes> {
        match read {
            Some(Ok(Message::Text(t))) => return Some(t),
            Some(Ok(Message::Binary(_))) => {
                let reply =
                    invalid_request("binary frames are not supported; send JSON text messages");
                answer(sh, protocol::message(no_head(), reply)).await;
                return None;
            }
            Some(Ok(Message::Close(_))) | None => {}
            Some(Ok(_)) => return None,
            Some(Err(WsProtoError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                let reply = too_large(size, max_size);
                answer(sh, protocol::message(no_head(), reply)).await;
                self.oversized = true;
            }
            Some(Err(e)) => tracing::debug!(session = %sh.ctx.session, "connection ended: {e}"),
        }
        self.ended = true;
        // Nobody is left to answer the questions still waiting.
        if let Some(a) = &sh.asks {
            a.close();
        }
        None
    }

    /// Waits for `fut` (a slot, room for answers). Meanwhile, while a question of this
    /// connection waits, it keeps reading, so that the reply is not stuck behind the
    /// requests waiting for it: replies are delivered, other requests refused as busy.
    pub(super) async fn meanwhile<F: Future>(
        &mut self,
        sh: &Shared,
        sub_tx: &watch::Sender<Option<RelPath>>,
        fut: F,
    ) -> F::Output {
        tokio::pin!(fut);
        let Some(mut waiting) = self.waiting.clone() else {
            return fut.await;
        };
        loop {
            if self.ended {
                return fut.await;
            }
            let asking = *waiting.borrow_and_update() > 0;
            tokio::select! {
                biased;
                out = &mut fut => return out,
                // Also while reading: once no question waits, reading stops again.
                changed = waiting.changed() => {
                    if changed.is_err() {
                        return fut.await;
                    }
                }
                read = self.stream.next(), if asking => {
                    if let Some(text) = self.text(sh, read).await
                        && let Some(task) = take(sh, sub_tx, text.as_str()).await
                    {
                        let head = task.tag.head;
                        let reply = busy(&head);
                        answer(sh, protocol::message(head, reply)).await;
                    }
                }
            }
        }
    }
}
