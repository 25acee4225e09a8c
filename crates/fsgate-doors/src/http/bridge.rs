//! `GET /mcp/stdio` with `Upgrade: fsgate-mcp-stdio`: the connection becomes the plain
//! MCP line protocol of the stdio door, served by a door of its own. This is what
//! `fsgate mcp-connect` speaks for an agent that starts its MCP servers as commands:
//! the agent's stdio goes through the bridge to this server, under the same token (an
//! ACP session's secret) as the HTTP entry would carry.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::body::{Reply, Room, held};
use super::connection::{ConnInfo, identity};
use super::refusal::Refusal;
use super::server::Server;
use super::session::Principal;
use crate::stdio::sink::Sink;

/// The bridge's path.
pub const PATH: &str = "/mcp/stdio";

/// The protocol named in `Upgrade`.
pub const PROTOCOL: &str = "fsgate-mcp-stdio";

/// Accepts the upgrade (101) and serves the connection once it is handed over.
pub(super) fn upgrade(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
    req: Request<Incoming>,
) -> Result<Response<Reply>, Refusal> {
    let asked = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
    if !asked {
        return Err(Refusal::http(
            StatusCode::BAD_REQUEST,
            "http-upgrade",
            format!("{PATH} needs Upgrade: {PROTOCOL}"),
        ));
    }
    if p.sessions.fetch_add(1, Ordering::AcqRel) >= p.max_sessions {
        p.sessions.fetch_sub(1, Ordering::AcqRel);
        return Err(Refusal::http(
            StatusCode::SERVICE_UNAVAILABLE,
            "http-sessions",
            "too many sessions",
        ));
    }
    let who = identity(server, conn, p);
    let (gw, room, p) = (
        Arc::clone(&server.gw),
        Arc::clone(&server.room),
        Arc::clone(p),
    );
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let (read, write) = tokio::io::split(TokioIo::new(upgraded));
                let (tx, rx) = mpsc::unbounded_channel();
                let drain = tokio::spawn(drain(rx, write));
                let sink = Sink::new(ChannelWriter { tx, room });
                let session = who.session.clone();
                if let Err(e) = crate::mcp::serve_as(gw, who, read, sink).await {
                    tracing::debug!(%session, "mcp bridge ended: {e}");
                }
                let _ = drain.await;
            }
            Err(e) => tracing::debug!("mcp bridge: upgrade failed: {e}"),
        }
        p.sessions.fetch_sub(1, Ordering::AcqRel);
    });
    let mut resp = Response::new(Reply::Empty);
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
    Ok(resp)
}

/// Writes what the door wrote, in order, until the door is done or the client gone.
async fn drain<W: tokio::io::AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    mut out: W,
) {
    while let Some(bytes) = rx.recv().await {
        if out.write_all(&bytes).await.is_err() {
            return;
        }
        // Whatever else is ready goes out before the flush.
        while let Ok(more) = rx.try_recv() {
            if out.write_all(&more).await.is_err() {
                return;
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}

/// The door's output, queued for [`drain`] in the server's answer room (a client that
/// reads nothing holds its door's writer, not the gateway's memory).
struct ChannelWriter {
    tx: mpsc::UnboundedSender<Bytes>,
    room: Arc<Room>,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let share = self.room.take(buf.len());
        self.tx.send(held(buf.to_vec(), share)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client is gone")
        })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
