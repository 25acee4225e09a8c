//! One WebSocket connection: its requests (served concurrently, within limits in count
//! and bytes), its subscription, and its share of the change notices.
//!
//! Every message that arrives goes through [`Gateway::serve`] exactly once: a workspace
//! operation as [`Request::Op`], anything else (malformed, binary, oversized,
//! subscribe, unknown type) as [`Request::message`] with the answer the client gets;
//! both through [`door::serve`], except the messages that get no answer (a subscription
//! without a `requestId`, a delivered permission reply), which are only recorded.
//!
//! Memory: answers wait in an [`Outbox`] counted in encoded bytes (twice the message
//! limit per connection, and the server's total across connections); while it is full
//! the connection reads no further message, so a client that stops reading stops being
//! served. Requests in flight are bounded in count and in bytes, per connection and
//! across the server; an answer over the message limit becomes a limit error. Change
//! events wait in a small [`Mailbox`] that turns into one `overflow` event when the
//! client does not keep up.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::events;
use super::mailbox::Mailbox;
use super::reader::Reader;
use super::requests::{BatchDoor, Requests};
use super::shared::{CloseAsks, Conn, shared};
use super::stall::Stall;
use super::writer::{forward_notices, write_all};
use crate::batch;
use crate::outbox::Outbox;
use fsgate_base::path::RelPath;
use fsgate_gateway::watch::Notice;

/// How long the rest of an oversized message is read and discarded, so that closing
/// the socket does not reset it before the client has read the error.
const DRAIN_AFTER_OVERSIZE: Duration = Duration::from_secs(5);

/// The watcher's notices from now on, and what it left unwatched in each workspace
/// (said first).
pub(super) type Notices = (broadcast::Receiver<Arc<Notice>>, Vec<Arc<Notice>>);

/// Serves one upgraded connection until the client closes it.
pub(super) async fn run(
    ws: WebSocketStream<TcpStream>,
    conn: Conn,
    notices: Option<Notices>,
    subscription: Option<RelPath>,
) {
    let stall = Stall::new(ws.get_ref(), conn.limits.write_stall);
    let (sink, stream) = ws.split();
    let (out, out_rx) = Outbox::<Message>::new(conn.limits.conn_out());
    let out = out.sharing(&conn.limits.total);
    let mailbox = Mailbox::default();
    let writer = tokio::spawn(write_all(sink, out_rx, mailbox.clone(), stall));
    let (sub_tx, sub_rx) = watch::channel(subscription);
    let events = notices.map(|(n, gaps)| {
        for gap in gaps {
            if let Notice::Unwatched(u) = &*gap {
                mailbox.push(events::unwatched_event(u).to_string());
            }
        }
        tokio::spawn(forward_notices(n, sub_rx, mailbox))
    });
    let sh = shared(conn, &out);
    let _close_asks = CloseAsks(sh.asks.clone());
    let door = Arc::new(BatchDoor {
        sh: Arc::clone(&sh),
        rt: tokio::runtime::Handle::current(),
    });
    let Ok((batch, batch_ended)) = batch::start_joined(Arc::clone(&door), "fsgate-ws-batch") else {
        tracing::error!(session = %sh.ctx.session, "cannot start the connection's batch thread");
        return;
    };
    let mut tasks = JoinSet::new();
    let mut rd = Reader {
        waiting: sh.asks.as_ref().map(|a| a.waiting()),
        stream,
        ended: false,
        oversized: false,
    };
    let requests = Requests {
        sh: &sh,
        sub_tx: &sub_tx,
        out: &out,
        door: &door,
        batch: &batch,
    };
    requests.serve(&mut rd, &mut tasks).await;
    // Questions still waiting cannot be answered any more.
    if let Some(a) = &sh.asks {
        a.close();
    }
    let (stream, oversized) = (rd.stream, rd.oversized);
    // Requests already running finish and are answered (they are recorded either way).
    while tasks.join_next().await.is_some() {}
    drop((batch, door));
    let _ = batch_ended.await;
    if let Some(e) = events {
        e.abort();
    }
    if oversized {
        let close = Message::Close(Some(CloseFrame {
            code: CloseCode::Size,
            reason: "message too large".into(),
        }));
        out.send(close, 1).await;
    }
    let (session, max) = (sh.ctx.session.clone(), sh.limits.max_message);
    drop((out, sh));
    if let Ok(sink) = writer.await
        && oversized
        && let Ok(mut ws) = stream.reunite(sink)
    {
        drain(ws.get_mut(), max).await;
    }
    tracing::debug!(%session, "connection closed");
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
