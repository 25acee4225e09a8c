//! Where and how to reach a destination: TCP, TLS over TCP (rustls, RFC 5425), or a
//! local datagram socket, prepared before confinement (the TLS client configuration
//! built once at start), and connecting to it.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::config::ShipDestination;
use super::conn::{Conn, Counted};

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
                let tls = load_tls(d, &host)?;
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
                let sock = Counted::new(connect_tcp(host, *port, addrs)?);
                match tls {
                    None => Ok(Conn::Tcp(sock)),
                    Some((config, name)) => handshake(sock, config, name),
                }
            }
        }
    }
}

/// The TLS client configuration of a TCP destination whose host is `host` (None without
/// `tls_ca`): its files read and parsed, the client certificate matched to its key.
/// `serve` builds it at start and `policy check` builds it too, so that both refuse the
/// same files.
///
/// # Ambient Authority
///
/// Reads the TLS files named in the policy.
pub(super) fn load_tls(
    d: &ShipDestination,
    host: &str,
) -> Result<Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>, String> {
    d.tls_ca
        .as_deref()
        .map(|ca| tls_config(d, ca, host))
        .transpose()
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
