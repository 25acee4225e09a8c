//! Connections to a destination: TCP, TLS over TCP (rustls, RFC 5425), or a local
//! datagram socket; and the TLS client configuration, built once at start.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::config::ShipDestination;

/// Longest wait for a connection, a TLS handshake, or one write to go out.
pub(super) const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to connect, prepared before confinement.
#[derive(Clone)]
pub(super) enum Endpoint {
    /// TCP (TLS when `tls` is set).
    Tcp {
        /// Host name or address, resolved again at each connect when it is a name.
        host: String,
        /// Port.
        port: u16,
        /// The addresses the name had at start (used when resolving fails later).
        addrs: Vec<SocketAddr>,
        /// TLS client configuration and the name to verify.
        tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    },
    /// A local datagram socket.
    Datagram(std::path::PathBuf),
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp {
                host, port, tls, ..
            } => write!(f, "tcp {host}:{port} tls={}", tls.is_some()),
            Endpoint::Datagram(p) => write!(f, "datagram {}", p.display()),
        }
    }
}

impl Endpoint {
    /// Prepares a destination: resolves its host (loading the resolver before
    /// confinement) and reads its TLS files.
    ///
    /// # Ambient Authority
    ///
    /// Reads the TLS files named in the policy.
    pub(super) fn prepare(d: &ShipDestination) -> Result<Endpoint, String> {
        match d.target()? {
            super::config::Target::Socket(p) => Ok(Endpoint::Datagram(p)),
            super::config::Target::Tcp { host, port } => {
                // A name that does not resolve now may later: not a reason to refuse
                // to start (shipping retries), only to warn.
                let addrs = match (host.as_str(), port).to_socket_addrs() {
                    Ok(a) => a.collect(),
                    Err(e) => {
                        tracing::warn!(host = %host, "audit ship: cannot resolve the collector now: {e}");
                        Vec::new()
                    }
                };
                let tls = match &d.tls_ca {
                    Some(ca) => Some(tls_config(d, ca, &host)?),
                    None => None,
                };
                Ok(Endpoint::Tcp {
                    host,
                    port,
                    addrs,
                    tls,
                })
            }
        }
    }

    /// The TCP port, for the Landlock rule that lets the gateway connect to it.
    pub(super) fn tcp_port(&self) -> Option<u16> {
        match self {
            Endpoint::Tcp { port, .. } => Some(*port),
            Endpoint::Datagram(_) => None,
        }
    }

    /// Connects (and completes the TLS handshake).
    pub(super) fn connect(&self) -> Result<Conn, String> {
        match self {
            Endpoint::Datagram(path) => {
                let sock = std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|s| s.connect(path).map(|()| s))
                    .map_err(|e| format!("connect to {}: {e}", path.display()))?;
                sock.set_write_timeout(Some(IO_TIMEOUT))
                    .map_err(|e| e.to_string())?;
                Ok(Conn::Datagram(sock))
            }
            Endpoint::Tcp {
                host,
                port,
                addrs,
                tls,
            } => {
                let sock = Counted {
                    sock: connect_tcp(host, *port, addrs)?,
                    written: 0,
                };
                match tls {
                    None => Ok(Conn::Tcp(sock)),
                    Some((config, name)) => handshake(sock, config, name),
                }
            }
        }
    }
}

fn tls_config(
    d: &ShipDestination,
    ca: &Path,
    host: &str,
) -> Result<(Arc<rustls::ClientConfig>, ServerName<'static>), String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(ca).map_err(|e| format!("tls_ca {}: {e}", ca.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("tls_ca {}: {e}", ca.display()))?;
        roots
            .add(cert)
            .map_err(|e| format!("tls_ca {}: {e}", ca.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("tls_ca {}: no certificate in it", ca.display()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match (&d.tls_cert, &d.tls_key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("tls_cert {}: {e}", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("tls_key {}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("tls_cert/tls_key: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    let name = d.tls_server_name.as_deref().unwrap_or(host);
    let name = ServerName::try_from(name.to_owned())
        .map_err(|e| format!("tls_server_name {name:?}: {e}"))?;
    Ok((Arc::new(config), name))
}

fn connect_tcp(host: &str, port: u16, known: &[SocketAddr]) -> Result<TcpStream, String> {
    let fresh: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    let addrs = if fresh.is_empty() { known } else { &fresh };
    let mut last = format!("cannot resolve {host}");
    for addr in addrs {
        match TcpStream::connect_timeout(addr, IO_TIMEOUT) {
            Ok(s) => {
                s.set_write_timeout(Some(IO_TIMEOUT))
                    .and_then(|()| s.set_read_timeout(Some(IO_TIMEOUT)))
                    .map_err(|e| e.to_string())?;
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("connect to {addr}: {e}"),
        }
    }
    Err(last)
}

fn handshake(
    mut sock: Counted,
    config: &Arc<rustls::ClientConfig>,
    name: &ServerName<'static>,
) -> Result<Conn, String> {
    let mut tls = rustls::ClientConnection::new(Arc::clone(config), name.clone())
        .map_err(|e| format!("TLS: {e}"))?;
    while tls.is_handshaking() {
        tls.complete_io(&mut sock)
            .map_err(|e| format!("TLS handshake: {e}"))?;
    }
    Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(tls, sock))))
}

/// A TCP stream that counts the bytes written to it: with the socket's unacknowledged
/// bytes, it tells how far into the stream the collector's kernel acknowledged.
pub(super) struct Counted {
    /// The socket.
    sock: TcpStream,
    /// Bytes written since the connection opened (TLS records included).
    written: u64,
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
