//! A client that stops reading its answers is closed after `[ws] write_stall_ms`.
//!
//! A connection's unwritten answers hold room in the server's shared outbox, and the
//! reads behind them hold the shared content budget until they are written: a client
//! that keeps its socket open and reads nothing would otherwise hold both from every
//! other connection for as long as it likes. Progress is the client's TCP acknowledging
//! bytes (`TCP_INFO`'s `tcpi_bytes_acked` growing), so a slow client that still reads is
//! never closed. The size of the send queue is no such measure: it also grows while the
//! client reads nothing, as the kernel enlarges the socket's send buffer (autotuning),
//! and it stays level while a slow client's acknowledgements make room that the waiting
//! write fills again at once.

use std::future::Future;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// How long a write runs before the client's progress is first looked at, and how soon
/// it is looked at again after it moved.
const FIRST_LOOK: Duration = Duration::from_millis(10);

/// The connection's socket, watched while a write to it waits.
pub(super) struct Stall {
    /// A duplicate of the connection's socket: read for the client's progress, and shut
    /// down when the client stalls (the connection's reader then ends too). Held as a
    /// `std` stream only for its safe `shutdown`, which any stream socket takes.
    sock: Option<std::net::TcpStream>,
    after: Duration,
}

/// The client's progress as last seen, and since when it has not changed.
#[derive(Clone, Copy)]
struct Unchanged {
    acked: Option<u64>,
    since: Instant,
}

impl Stall {
    /// Watches `sock` (duplicated here) with the limit `after`.
    pub(super) fn new(sock: &impl AsFd, after: Duration) -> Stall {
        let sock = sock.as_fd().try_clone_to_owned();
        if let Err(e) = &sock {
            tracing::warn!("cannot watch a ws connection for stalls: {e}");
        }
        Stall {
            sock: sock.ok().map(std::net::TcpStream::from),
            after,
        }
    }

    /// Runs `write` (a write to the connection's socket). None: the client took no byte
    /// for `after` while it waited; the socket is then shut down both ways.
    pub(super) async fn write<F: Future>(&self, write: F) -> Option<F::Output> {
        let mut write = std::pin::pin!(write);
        let tick = (self.after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let started = Instant::now();
        // Progress is first looked at once the write has waited a moment: a write that
        // is done at once (nearly all) costs no system call here, and the limit is
        // still counted from about when the client stopped taking bytes.
        let mut wait = FIRST_LOOK;
        let mut seen: Option<Unchanged> = None;
        loop {
            match tokio::time::timeout(wait, write.as_mut()).await {
                Ok(out) => return Some(out),
                Err(_) => {
                    let acked = self.acked();
                    let (since, moved) = match seen {
                        Some(s) if s.acked == acked => (s.since, false),
                        // Progress unknown: only the time the write has waited counts.
                        _ => {
                            let since = acked.map_or(started, |_| Instant::now());
                            seen = Some(Unchanged { acked, since });
                            (since, acked.is_some())
                        }
                    };
                    let left = self.after.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        self.close();
                        return None;
                    }
                    // Looked at again soon after progress (it may have been seen while
                    // still going on), then less and less often, and exactly when the
                    // limit is reached.
                    let next = if moved { FIRST_LOOK } else { wait * 2 };
                    wait = next.min(tick).min(left);
                }
            }
        }
    }

    /// Bytes the client's TCP has acknowledged on this connection so far; None if
    /// unknown (not a TCP socket, or a kernel older than 4.1).
    #[allow(unsafe_code)]
    fn acked(&self) -> Option<u64> {
        let sock = self.sock.as_ref()?;
        // SAFETY: `tcp_info` is plain integers, for which all zero bytes are valid.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::tcp_info>();
        let mut len = libc::socklen_t::try_from(size).ok()?;
        // SAFETY: getsockopt writes at most `len` bytes through the pointer, to a local
        // of that size we own, on a descriptor we hold open.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&raw mut info).cast(),
                &mut len,
            )
        };
        let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + size_of::<u64>();
        (rc == 0 && usize::try_from(len).is_ok_and(|n| n >= needed))
            .then_some(info.tcpi_bytes_acked)
    }

    fn close(&self) {
        tracing::warn!(
            "a ws client read none of its answers for {} ms; closing its connection",
            self.after.as_millis()
        );
        if let Some(sock) = &self.sock {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// Both ends of a loopback TCP connection: ours non-blocking, as a server's is.
    fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let theirs = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (ours, _) = listener.accept().expect("accept");
        ours.set_nonblocking(true).expect("nonblocking");
        (ours, theirs)
    }

    /// Fills `ours` until the kernel takes no more: what a client that reads nothing
    /// leaves behind.
    fn fill(ours: &mut TcpStream) {
        let chunk = [0u8; 64 * 1024];
        let idle = Instant::now() + Duration::from_millis(300);
        while Instant::now() < idle {
            if ours.write(&chunk).is_err() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// A socket whose peer reads nothing is closed once the write has waited `after`
    /// (not a tick later), though the kernel may still grow its send queue meanwhile.
    #[tokio::test]
    async fn a_peer_that_reads_nothing_is_closed_at_the_limit() {
        let (mut ours, mut theirs) = connected();
        fill(&mut ours);
        let after = Duration::from_millis(800);
        let stall = Stall::new(&ours, after);
        assert!(stall.acked().is_some(), "TCP_INFO unreadable");
        // A write that never finishes, as a full socket's would.
        let t = Instant::now();
        let out = stall.write(std::future::pending::<()>()).await;
        assert!(out.is_none());
        // The limit, give or take the first look and a loaded machine's timers: well
        // under the tick (200 ms) by which a watch that starts counting late misses.
        let took = t.elapsed();
        assert!(took >= after, "{took:?}");
        assert!(took < after + Duration::from_millis(100), "{took:?}");
        theirs
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = vec![0u8; 1 << 20];
        while theirs.read(&mut buf).is_ok_and(|n| n > 0) {}
        assert!(ours.write(b"x").is_err(), "shut down");
    }

    /// A peer that drains its socket now and then keeps the connection, though the
    /// waiting write refills the send queue as fast as it drains. (Its reads are a
    /// segment or more each: TCP reopens a full window only once that much is free.)
    #[tokio::test]
    async fn a_peer_that_reads_slowly_is_not_closed() {
        let (mut ours, theirs) = connected();
        fill(&mut ours);
        let stall = Stall::new(&ours, Duration::from_millis(300));
        let refill = std::thread::spawn(move || {
            let (mut ours, mut theirs) = (ours, theirs);
            let mut buf = vec![0u8; 64 * 1024];
            for _ in 0..12 {
                std::thread::sleep(Duration::from_millis(100));
                let _ = theirs.read(&mut buf);
                fill_now(&mut ours);
            }
            (ours, theirs)
        });
        let slow = tokio::time::sleep(Duration::from_millis(1300));
        assert!(
            stall.write(slow).await.is_some(),
            "a reading peer was closed"
        );
        let _ = refill.join();
    }

    /// Writes until the socket takes no more, at once.
    fn fill_now(ours: &mut TcpStream) {
        let chunk = [0u8; 8192];
        while ours.write(&chunk).is_ok() {}
    }
}
