//! The listener and its connections: a connection is pending until a request on it
//! passes the Host, Origin and token checks; pending ones share a small budget (the
//! oldest is dropped when it is full), authenticated ones are counted
//! (`max_connections`). Request headers must arrive in time, and a client that reads
//! none of an answer for `write_stall_ms` is cut off, its answer dropped.

use std::future::Future;
use std::io;
use std::net::TcpListener;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, Semaphore};

use super::connection::{ConnInfo, short_random};
use super::server::Server;
use crate::ws::pending::Pending;

/// Serves connections on `listener` until an accept error (or until dropped, which
/// ends every connection).
pub(crate) async fn serve(server: Arc<Server>, listener: TcpListener) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let pending = Pending::new(server.limits.max_pending);
    let connections = Arc::new(Semaphore::new(server.limits.max_connections));
    let mut running = tokio::task::JoinSet::new();
    let idle = reap_idle(Arc::clone(&server));
    tokio::pin!(idle);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) if is_transient(&e) => {
                    tracing::warn!("http accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(e) => return Err(e),
            },
            Some(_) = running.join_next(), if !running.is_empty() => continue,
            () = &mut idle => continue,
        };
        let _ = tcp.set_nodelay(true);
        let n = server
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let info = Arc::new(ConnInfo {
            peer,
            label: format!("http-c{n}-{}", short_random()),
            slot: Mutex::new(None),
            authed: Notify::new(),
            connections: Arc::clone(&connections),
        });
        running.spawn(one(Arc::clone(&server), tcp, info, pending.admit()));
    }
}

/// Ends the sessions left unused for `session_idle`, now and then; never returns.
async fn reap_idle(server: Arc<Server>) {
    let every =
        (server.limits.session_idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<_> = {
            let mut sessions = server.sessions.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.idle_for(server.limits.session_idle))
                .map(|(k, _)| k.clone())
                .collect();
            ids.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        for s in idle {
            tracing::info!(session = ?s.id, "http: ending an idle session");
            s.principal
                .sessions
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            s.end();
        }
    }
}

/// Serves one connection; it is dropped if it is still pending when a newer one pushes
/// it out of the pending budget.
async fn one(
    server: Arc<Server>,
    tcp: tokio::net::TcpStream,
    info: Arc<ConnInfo>,
    ticket: crate::ws::pending::Ticket,
) {
    let io = TokioIo::new(StallIo::new(tcp, server.limits.write_stall));
    let svc_server = Arc::clone(&server);
    let svc_info = Arc::clone(&info);
    let service = hyper::service::service_fn(move |req| {
        super::route::handle(Arc::clone(&svc_server), Arc::clone(&svc_info), req)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(server.limits.request_timeout)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut ticket = Some(ticket);
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(peer = %info.peer, "http connection: {e}");
                }
                return;
            }
            () = evicted(&mut ticket) => {
                tracing::debug!(peer = %info.peer, "http: pending connection dropped: newer ones need the room");
                return;
            }
            () = info.authed.notified(), if ticket.is_some() => ticket = None,
        }
    }
}

/// Resolves when the pending connection holding `ticket` is pushed out; never once it
/// is authenticated (no ticket).
async fn evicted(ticket: &mut Option<crate::ws::pending::Ticket>) {
    match ticket {
        Some(t) => t.evicted().await,
        None => std::future::pending().await,
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error())
        || e.raw_os_error() == Some(rustix::io::Errno::NFILE.raw_os_error())
}

/// A stream whose writes fail once the peer has taken none of them for `stall`.
pub(crate) struct StallIo<T> {
    inner: T,
    stall: Duration,
    /// Set while a write waits for the peer.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> StallIo<T> {
    pub(crate) fn new(inner: T, stall: Duration) -> StallIo<T> {
        StallIo {
            inner,
            stall,
            waiting: None,
        }
    }

    /// The outcome of a write step: progress clears the watch; waiting starts it, and
    /// waiting past `stall` is an error.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let stall = self.stall;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client read nothing for [http] write_stall_ms",
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let polled = Pin::new(&mut me.inner).poll_write(cx, buf);
        me.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let polled = Pin::new(&mut me.inner).poll_write_vectored(cx, bufs);
        me.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let polled = Pin::new(&mut me.inner).poll_flush(cx);
        me.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_peer_that_reads_nothing_is_cut_off() {
        let (ours, _theirs) = tokio::io::duplex(1024);
        let mut io = StallIo::new(ours, Duration::from_millis(100));
        let started = std::time::Instant::now();
        let big = vec![0u8; 64 * 1024];
        let e = io.write_all(&big).await.expect_err("stalled");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_peer_that_reads_slowly_is_not() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut io = StallIo::new(ours, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 512];
            let mut n = 0;
            while n < 8192 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                n += theirs.read(&mut buf).await.expect("read");
            }
        });
        io.write_all(&[1u8; 8192]).await.expect("slow but steady");
        reader.await.expect("reader");
    }
}
