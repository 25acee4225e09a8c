//! The checkpoint sink (`[audit] checkpoint_sink`): a copy of every checkpoint line
//! appended to a second file, or sent to syslog.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::AuditError;

/// Where a copy of every checkpoint goes (`[audit] checkpoint_sink`).
#[derive(Debug)]
pub(crate) enum Sink {
    /// A file, one JSON line appended (and synced) per checkpoint.
    File {
        /// Its path, for messages.
        path: PathBuf,
        /// Opened for appending at start-up.
        file: std::fs::File,
    },
    /// A syslog datagram socket (`/dev/log` by default).
    #[cfg(unix)]
    Syslog {
        /// The socket's path, to reconnect after a syslog restart.
        path: PathBuf,
        /// The connected socket.
        sock: Option<std::os::unix::net::UnixDatagram>,
    },
}

impl Sink {
    /// The sink's file, when it is one (syslog cannot be read back).
    pub(crate) fn file_path(&self) -> Option<&Path> {
        match self {
            Sink::File { path, .. } => Some(path),
            #[cfg(unix)]
            Sink::Syslog { .. } => None,
        }
    }

    /// Opens the sink named in the settings. Done at start-up, before confinement.
    ///
    /// # Ambient Authority
    ///
    /// Opens a path or connects a socket by name.
    pub(crate) fn open(spec: &str) -> Result<Sink, AuditError> {
        if let Some(rest) = spec.strip_prefix("syslog") {
            let path = match rest.strip_prefix(':') {
                Some(p) if !p.is_empty() => PathBuf::from(p),
                None if rest.is_empty() => PathBuf::from("/dev/log"),
                _ => return Err(AuditError::Config(format!("bad checkpoint_sink {spec:?}"))),
            };
            #[cfg(unix)]
            {
                let sock = std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|s| s.connect(&path).map(|()| s))
                    .map_err(|e| AuditError::io("connect to syslog socket", &path, &e))?;
                return Ok(Sink::Syslog {
                    path,
                    sock: Some(sock),
                });
            }
            #[cfg(not(unix))]
            return Err(AuditError::Config(format!(
                "syslog sink {} is not available on this platform",
                path.display()
            )));
        }
        let path = PathBuf::from(spec);
        let mut opts = std::fs::OpenOptions::new();
        opts.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts
            .open(&path)
            .map_err(|e| AuditError::io("open checkpoint sink", &path, &e))?;
        Ok(Sink::File { path, file })
    }

    /// Sends one checkpoint line.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), String> {
        match self {
            Sink::File { path, file } => {
                let mut buf = Vec::with_capacity(line.len() + 1);
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
                file.write_all(&buf)
                    .and_then(|()| file.sync_data())
                    .map_err(|e| format!("checkpoint sink {}: {e}", path.display()))
            }
            #[cfg(unix)]
            Sink::Syslog { path, sock } => {
                // LOG_AUTH (4) * 8 + LOG_NOTICE (5).
                let msg = format!("<37>fsgate-audit[{}]: {line}", std::process::id());
                if let Some(s) = sock
                    && s.send(msg.as_bytes()).is_ok()
                {
                    return Ok(());
                }
                // The daemon may have restarted: reconnect once.
                let fresh = std::os::unix::net::UnixDatagram::unbound()
                    .and_then(|s| s.connect(&*path).map(|()| s))
                    .map_err(|e| format!("syslog {}: {e}", path.display()))?;
                let sent = fresh
                    .send(msg.as_bytes())
                    .map_err(|e| format!("syslog {}: {e}", path.display()));
                *sock = Some(fresh);
                sent.map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn sinks_receive_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sink.jsonl");
        let mut sink = Sink::open(file.to_str().unwrap()).unwrap();
        sink.send("{\"a\":1}").unwrap();
        sink.send("{\"a\":2}").unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );

        let sock_path = dir.path().join("log.sock");
        let server = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
        let mut sink = Sink::open(&format!("syslog:{}", sock_path.display())).unwrap();
        sink.send("{\"b\":1}").unwrap();
        let mut buf = [0u8; 256];
        let n = server.recv(&mut buf).unwrap();
        let got = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(got.starts_with("<37>fsgate-audit["), "{got}");
        assert!(got.ends_with("]: {\"b\":1}"), "{got}");
        assert!(Sink::open("syslog:").is_err());
    }
}
