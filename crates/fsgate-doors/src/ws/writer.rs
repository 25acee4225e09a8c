//! What a connection writes: its answers and change events in order of arrival,
//! coalesced into few flushes, and the watcher's notices under its subscription put in
//! its mailbox.

use std::sync::Arc;

use futures_util::SinkExt;

use tokio::sync::{broadcast, mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::events;
use super::mailbox::{Lost, Mailbox};
use super::stall::Stall;
use crate::outbox::Queued;
use fsgate_base::path::RelPath;
use fsgate_gateway::watch::Notice;

/// Writes answers and events in order of arrival; returns the sink so an oversized
/// connection can be drained. An answer's room is given back once it is written (when
/// its [`Queued`] drops). A client that reads nothing for `stall`'s limit is closed:
/// the writer stops, and its unwritten answers (and their room) are dropped.
pub(super) async fn write_all<S>(
    mut sink: S,
    mut rx: mpsc::UnboundedReceiver<Queued<Message>>,
    mailbox: Mailbox,
    stall: Stall,
) -> S
where
    S: futures_util::Sink<Message> + Unpin,
{
    loop {
        let sent = tokio::select! {
            q = rx.recv() => {
                let Some(q) = q else { break };
                stall.write(send_ready(&mut sink, q, &mut rx)).await
            }
            batch = mailbox.take() => {
                stall.write(send_events(&mut sink, batch.lost, batch.events)).await
            }
        };
        match sent {
            Some(true) => {}
            Some(false) => break,
            None => return sink,
        }
    }
    let _ = stall.write(sink.flush()).await;
    sink
}

/// Sends `first` and whatever else is already queued (up to [`COALESCE_BYTES`]) with one
/// flush; the messages' rooms are held until it. False: stop (closed or failed).
pub(super) async fn send_ready<S>(
    sink: &mut S,
    first: Queued<Message>,
    rx: &mut mpsc::UnboundedReceiver<Queued<Message>>,
) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    let mut held = Vec::new();
    let mut bytes = 0;
    let mut next = Some(first);
    while let Some(q) = next {
        let (msg, room) = q.split();
        let closing = matches!(msg, Message::Close(_));
        bytes += msg.len();
        held.push(room);
        if sink.feed(msg).await.is_err() {
            return false;
        }
        if closing {
            let _ = sink.flush().await;
            return false;
        }
        next = if bytes < COALESCE_BYTES {
            rx.try_recv().ok()
        } else {
            None
        };
    }
    sink.flush().await.is_ok()
}

/// Bytes of answers written with one flush at most.
pub(super) const COALESCE_BYTES: usize = 256 * 1024;

pub(super) async fn send_events<S>(sink: &mut S, lost: Lost, events: Vec<String>) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    if let Some(n) = lost {
        let v = events::overflow_event(n);
        if sink.feed(Message::text(v.to_string())).await.is_err() {
            return false;
        }
    }
    for e in events {
        if sink.feed(Message::text(e)).await.is_err() {
            return false;
        }
    }
    sink.flush().await.is_ok()
}

/// Puts the notices under the connection's subscription in its mailbox.
pub(super) async fn forward_notices(
    mut notices: broadcast::Receiver<Arc<Notice>>,
    subscription: watch::Receiver<Option<RelPath>>,
    out: Mailbox,
) {
    loop {
        match notices.recv().await {
            Ok(n) => match &*n {
                Notice::Change(c) => {
                    let wanted = subscription
                        .borrow()
                        .as_ref()
                        .is_some_and(|sub| c.path.starts_with(sub));
                    if wanted {
                        out.push(events::change_event(c).to_string());
                    }
                }
                Notice::Overflow => out.lost(None),
                Notice::Unwatched(u) => out.push(events::unwatched_event(u).to_string()),
            },
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(dropped = n, "a slow connection lost change events");
                out.lost(Some(n));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
