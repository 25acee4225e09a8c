//! Shipping every audit record to syslog collectors (`[audit] ship`, docs/shipping.md).
//!
//! # Layout
//!
//! - `config`: the policy's `ship = [...]` entries ([`ShipDestination`]).
//! - `frame`: the syslog messages: RFC 5424 with octet counting (RFC 6587) on TCP and
//!   TLS, the `syslog(3)` format on a local socket; the record line is the MSG, byte
//!   for byte.
//! - `reader`: reads records back from the log files (the spool), rotated ones too.
//! - [`cursor`]: the `.NAME.ship` file beside the log: the last seq delivered per
//!   destination, and the state `fsgate audit ship-status` shows.
//! - `endpoint`: where and how to connect (TCP, TLS with rustls, datagram), prepared
//!   before confinement; `conn`: an open connection; `worker`: one thread per
//!   destination.
//! - `status` and `import`: `fsgate audit ship-status` and `fsgate audit
//!   import-syslog`; `cli`: their arguments.
//!
//! # Threads and Landlock
//!
//! [`ShipPlan::prepare`] runs before confinement (it reads the TLS files and resolves
//! the collectors); the gateway's Landlock ruleset then allows connecting to the
//! collectors' TCP ports and to the local sockets. [`ShipPlan::start`] spawns one thread
//! per destination after confinement, so they inherit it. Nothing on a request's path
//! waits for them: they read the log's files, not its writer's queue.

pub(crate) mod cli;
pub(crate) mod config;
mod conn;
pub mod cursor;
mod endpoint;
pub(crate) mod frame;
pub(crate) mod import;
pub(crate) mod reader;
pub(crate) mod status;
mod stop;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use config::{Facility, ShipDestination, check_all};

use crate::writer::AuditLog;

/// How long a stopping gateway keeps shipping what is left (its `stop` record
/// included) before it exits; what is not confirmed by then goes at the next start.
pub(crate) const STOP_DRAIN: Duration = Duration::from_secs(2);

/// Reads and parses every destination's TLS files as `serve` does at start (the CA
/// certificates, the client certificate and its key, which must match), without
/// connecting or resolving anything: what `policy check` can know offline. The message
/// starts with the entry's index.
///
/// # Ambient Authority
///
/// Reads the TLS files named in the policy.
pub fn check_tls_files(dests: &[ShipDestination]) -> Result<(), String> {
    for (i, d) in dests.iter().enumerate() {
        if let Ok(config::Target::Tcp { host, .. }) = d.target() {
            endpoint::load_tls(d, &host).map_err(|e| format!("ship[{i}]: {e}"))?;
        }
    }
    Ok(())
}

/// The destinations, prepared before confinement.
#[derive(Debug)]
pub struct ShipPlan {
    /// Each destination with its endpoint.
    dests: Vec<(ShipDestination, endpoint::Endpoint)>,
    /// HOSTNAME used where a destination names none.
    hostname: String,
}

impl ShipPlan {
    /// Prepares `[audit] ship`; None when it is empty.
    ///
    /// # Ambient Authority
    ///
    /// Reads the TLS files and resolves the collectors' names.
    pub fn prepare(dests: &[ShipDestination]) -> Result<Option<ShipPlan>, String> {
        if dests.is_empty() {
            return Ok(None);
        }
        check_all(dests).map_err(|e| format!("[audit] {e}"))?;
        let mut out = Vec::new();
        for d in dests {
            let ep = endpoint::Endpoint::prepare(d)
                .map_err(|e| format!("[audit] ship {}: {e}", d.display_name()))?;
            out.push((d.clone(), ep));
        }
        let hostname = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(255)
            .collect::<String>();
        Ok(Some(ShipPlan {
            dests: out,
            hostname: if hostname.is_empty() {
                "-".into()
            } else {
                hostname
            },
        }))
    }

    /// The TCP ports the gateway must be allowed to connect to.
    pub fn tcp_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .dests
            .iter()
            .filter_map(|(_, e)| e.tcp_port())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The local sockets shipped to.
    pub fn sockets(&self) -> Vec<PathBuf> {
        self.dests
            .iter()
            .filter_map(|(_, e)| match e {
                endpoint::Endpoint::Datagram(p) => Some(p.clone()),
                endpoint::Endpoint::Tcp { .. } => None,
            })
            .collect()
    }

    /// Whether a collector is named by a host name (resolving it later reads the
    /// resolver's files).
    pub fn resolves_names(&self) -> bool {
        self.dests.iter().any(|(d, _)| {
            d.host
                .as_deref()
                .is_some_and(|h| h.parse::<std::net::IpAddr>().is_err())
        })
    }

    /// Starts one shipping thread per destination for `log` (call after confinement);
    /// they drain and end when the log is closed.
    /// `dir` is the log's directory, opened before confinement.
    pub fn start(&self, log: &AuditLog, dir: &std::fs::File) -> Result<(), String> {
        let open_dir = || {
            dir.try_clone()
                .map(cap_std::fs::Dir::from_std_file)
                .map_err(|e| format!("audit ship: cannot use the log directory: {e}"))
        };
        let base = crate::series::file_name(log.path());
        let cursor = Arc::new(cursor::CursorFile::load(open_dir()?, &base, log.log_id()));
        let names: Vec<String> = self.dests.iter().map(|(d, _)| d.display_name()).collect();
        if let Err(e) = cursor.retain(&names) {
            tracing::warn!("audit ship: {e}");
        }
        let stop = Arc::new(stop::Stop::default());
        let mut handles = Vec::new();
        for (d, endpoint) in &self.dests {
            let w = worker::Worker {
                name: d.display_name(),
                endpoint: endpoint.clone(),
                header: frame::Header {
                    facility: d.facility().code(),
                    hostname: d.hostname.clone().unwrap_or_else(|| self.hostname.clone()),
                    app_name: d.app_name().to_owned(),
                    log_id: log.log_id().to_owned(),
                    pid: std::process::id(),
                },
                alert_behind: d.alert_behind(),
                reader: reader::LogReader::new(open_dir()?, &base, 1),
                cursor: Arc::clone(&cursor),
                tap: log.tap(),
                stop: Arc::clone(&stop),
            };
            let h = std::thread::Builder::new()
                .name("fsgate-audit-ship".into())
                .spawn(move || w.run())
                .map_err(|e| format!("audit ship: cannot start a thread: {e}"))?;
            handles.push(h);
        }
        log.on_close(Box::new(move || {
            let deadline = Instant::now() + STOP_DRAIN;
            stop.request(deadline);
            for h in handles {
                // A thread stuck in a write past the deadline is left behind: the
                // process is ending, and its records go at the next start.
                while !h.is_finished() && Instant::now() < deadline + Duration::from_millis(200) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if h.is_finished() {
                    let _ = h.join();
                }
            }
        }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use super::*;
    use crate::{AuditEvent, AuditSettings, OpenOptions};

    /// The frames of an octet-counted stream, as the seqs of their records.
    fn seqs_of_frames(mut rest: &[u8]) -> Vec<u64> {
        let mut seqs = Vec::new();
        while let Some(sp) = rest.iter().position(|b| *b == b' ') {
            let len: usize = std::str::from_utf8(&rest[..sp]).unwrap().parse().unwrap();
            let msg = &rest[sp + 1..sp + 1 + len];
            let at = memchr::memmem::find(msg, b"{\"seq\":").unwrap();
            seqs.push(frame::seq_of(&msg[at..]).unwrap());
            rest = &rest[sp + 1 + len..];
        }
        assert!(rest.is_empty(), "a cut frame: {rest:?}");
        seqs
    }

    #[test]
    fn a_closing_log_drains_to_the_collector_and_moves_the_cursor() {
        let tmp = tempfile::tempdir().unwrap();
        let collector = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = collector.local_addr().unwrap().port();
        let dest = ShipDestination {
            host: Some("127.0.0.1".into()),
            port: Some(port),
            ..Default::default()
        };
        let plan = ShipPlan::prepare(&[dest]).unwrap().unwrap();
        assert_eq!(plan.tcp_ports(), [port]);
        let path = tmp.path().join("audit.jsonl");
        let log = AuditLog::open(
            &path,
            &AuditSettings::default(),
            "p",
            OpenOptions::default(),
        )
        .unwrap();
        plan.start(&log, &std::fs::File::open(tmp.path()).unwrap())
            .unwrap();
        let received = std::thread::spawn(move || {
            let (mut s, _) = collector.accept().unwrap();
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            all
        });
        for _ in 0..50 {
            log.append(AuditEvent::lifecycle("test", serde_json::Map::new()))
                .unwrap();
        }
        // Closing waits for the shipper to deliver the rest, the `stop` record included.
        log.close().unwrap();
        let head = log.head().0;
        let seqs = seqs_of_frames(&received.join().unwrap());
        assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
        let dir =
            cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let doc = cursor::CursorDoc::read(&dir, ".audit.jsonl.ship");
        let state = &doc.destinations[&format!("127.0.0.1:{port}")];
        assert_eq!((state.seq, state.state.as_str()), (head, "stopped"));
        assert_eq!(doc.log, log.log_id());
    }
}
