//! A client that stops reading its answers is closed after `[ws] write_stall_ms`.
//!
//! A connection's unwritten answers hold room in the server's shared outbox, and the
//! reads behind them hold the shared content budget until they are written: a client
//! that keeps its socket open and reads nothing would otherwise hold both from every
//! other connection for as long as it likes. Progress is the socket's send queue
//! (`SIOCOUTQ`) shrinking, so a slow client that still reads is never closed.

use std::future::Future;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// The connection's socket, watched while a write to it waits.
pub(super) struct Stall {
    /// A duplicate of the connection's socket: read for its send queue, and shut down
    /// when the client stalls (the connection's reader then ends too). Held as a
    /// `std` stream only for its safe `shutdown`, which any stream socket takes.
    sock: Option<std::net::TcpStream>,
    after: Duration,
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

    /// Runs `write` (a write to the connection's socket). None: the socket took no byte
    /// for `after` while it waited; the socket is then shut down both ways.
    pub(super) async fn write<F: Future>(&self, write: F) -> Option<F::Output> {
        let mut write = std::pin::pin!(write);
        let tick = (self.after / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        // The send queue is first looked at after a tick: a write that is done at once
        // (nearly all) costs no system call here.
        let mut queued = None;
        let mut since = Instant::now();
        loop {
            match tokio::time::timeout(tick, write.as_mut()).await {
                Ok(out) => return Some(out),
                Err(_) => {
                    let now = self.unsent();
                    if now.is_some() && now != queued {
                        (queued, since) = (now, Instant::now());
                    } else if since.elapsed() >= self.after {
                        self.close();
                        return None;
                    }
                }
            }
        }
    }

    /// Bytes in the socket's send queue not yet acknowledged by the client; None if
    /// unknown (then only the time a write waits counts).
    #[allow(unsafe_code)]
    fn unsent(&self) -> Option<i32> {
        let sock = self.sock.as_ref()?;
        let mut n: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one c_int through the pointer, to a local we own, on
        // a descriptor we hold open.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        (rc == 0).then_some(n)
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

    /// A socket whose peer reads nothing is closed once the write has waited `after`;
    /// one whose peer reads slowly is not.
    #[tokio::test]
    async fn only_a_peer_that_reads_nothing_is_closed() {
        let (mut ours, mut theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
        ours.set_nonblocking(true).expect("nonblocking");
        let stall = Stall::new(&ours, Duration::from_millis(300));
        // A write that never finishes, as a full socket's would.
        let t = Instant::now();
        let out = stall.write(std::future::pending::<()>()).await;
        assert!(out.is_none());
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let mut buf = [0u8; 8];
        assert_eq!(theirs.read(&mut buf).expect("read"), 0, "shut down");
        assert!(ours.write(b"x").is_err(), "shut down");
        // A peer that drains the queue now and then keeps the connection.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
        ours.set_nonblocking(true).expect("nonblocking");
        let stall = Stall::new(&ours, Duration::from_millis(300));
        let filler = std::thread::spawn(move || {
            let (mut ours, mut theirs) = (ours, theirs);
            let chunk = [0u8; 4096];
            while ours.write(&chunk).is_ok() {}
            let mut buf = [0u8; 8192];
            for _ in 0..12 {
                std::thread::sleep(Duration::from_millis(100));
                let _ = theirs.read(&mut buf);
            }
            (ours, theirs)
        });
        let slow = tokio::time::sleep(Duration::from_millis(1100));
        assert!(
            stall.write(slow).await.is_some(),
            "a reading peer was closed"
        );
        let _ = filler.join();
    }
}
