//! An open connection to a destination (TCP, TLS over TCP, or a datagram socket):
//! sending, how far the collector acknowledged, and noticing that it went away.
//! Making one is in `endpoint`.

use std::io::{Read, Write};
use std::net::TcpStream;

/// A TCP stream that counts the bytes written to it: with the socket's unacknowledged
/// bytes, it tells how far into the stream the collector's kernel acknowledged.
pub(super) struct Counted {
    /// The socket.
    sock: TcpStream,
    /// Bytes written since the connection opened (TLS records included).
    written: u64,
}

impl Counted {
    /// A freshly connected socket, nothing written yet.
    pub(super) fn new(sock: TcpStream) -> Counted {
        Counted { sock, written: 0 }
    }
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.sock.read(buf)
    }
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.sock.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.sock.flush()
    }
}

/// An open connection.
pub(super) enum Conn {
    /// Plain TCP.
    Tcp(Counted),
    /// TLS over TCP.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Counted>>),
    /// A connected datagram socket.
    Datagram(std::os::unix::net::UnixDatagram),
}

impl Conn {
    /// Whether each message goes as a datagram of its own (no framing).
    pub(super) fn is_datagram(&self) -> bool {
        matches!(self, Conn::Datagram(_))
    }

    /// Sends `buf`: on a stream, framed messages back to back; on a datagram socket,
    /// the messages `buf[ends[i-1]..ends[i]]` one by one.
    pub(super) fn send(&mut self, buf: &[u8], ends: &[usize]) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(buf),
            Conn::Tls(s) => s.write_all(buf).and_then(|()| s.flush()),
            Conn::Datagram(s) => {
                let mut start = 0;
                for &end in ends {
                    s.send(&buf[start..end])?;
                    start = end;
                }
                Ok(())
            }
        }
    }

    /// Ends the connection politely (TLS close_notify), when the gateway stops.
    pub(super) fn close(mut self) {
        if let Conn::Tls(s) = &mut self {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
        if let Some(sock) = self.tcp() {
            let _ = sock.shutdown(std::net::Shutdown::Write);
        }
    }

    /// Bytes written to the connection so far (0 for a datagram socket).
    pub(super) fn written(&self) -> u64 {
        match self {
            Conn::Tcp(s) => s.written,
            Conn::Tls(s) => s.get_ref().written,
            Conn::Datagram(_) => 0,
        }
    }

    /// Of [`written`](Self::written), the bytes the collector's kernel acknowledged.
    pub(super) fn acked(&self) -> u64 {
        let c = match self {
            Conn::Tcp(s) => s,
            Conn::Tls(s) => s.get_ref(),
            Conn::Datagram(_) => return 0,
        };
        c.written.saturating_sub(outq(&c.sock) as u64)
    }

    /// Whether the collector still holds the connection open: it sends nothing on its
    /// own, so data or an end of stream means it is going away (TLS messages such as
    /// session tickets are taken in and ignored).
    pub(super) fn check_alive(&mut self) -> Result<(), String> {
        let Some(sock) = self.tcp() else {
            return Ok(());
        };
        sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        let seen = self.drain_incoming();
        if let Some(sock) = self.tcp() {
            sock.set_nonblocking(false).map_err(|e| e.to_string())?;
        }
        seen
    }

    /// The TCP socket under a stream connection.
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        match self {
            Conn::Tcp(s) => Some(&mut s.sock),
            Conn::Tls(s) => Some(&mut s.get_mut().sock),
            Conn::Datagram(_) => None,
        }
    }

    /// Reads what the collector sent, without blocking.
    fn drain_incoming(&mut self) -> Result<(), String> {
        let mut scratch = [0u8; 4096];
        loop {
            let n = match self {
                Conn::Tcp(s) => s.read(&mut scratch),
                Conn::Tls(s) => {
                    let (tls, sock) = (&mut s.conn, &mut s.sock);
                    match tls.read_tls(sock) {
                        Ok(0) => Ok(0),
                        Ok(n) => {
                            let state =
                                tls.process_new_packets().map_err(|e| format!("TLS: {e}"))?;
                            if state.peer_has_closed() {
                                return Err("the collector closed the TLS session".into());
                            }
                            // Application data from a syslog collector means nothing.
                            let _ = tls.reader().read(&mut scratch);
                            Ok(n)
                        }
                        Err(e) => Err(e),
                    }
                }
                Conn::Datagram(_) => return Ok(()),
            };
            match n {
                Ok(0) => return Err("the collector closed the connection".into()),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Bytes in a TCP socket's send queue not yet acknowledged by the peer; 0 if unknown.
#[allow(unsafe_code)]
fn outq(s: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one c_int through the pointer, to a local we
    // own, on a descriptor we hold open.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        usize::try_from(n).unwrap_or(0)
    } else {
        0
    }
}
