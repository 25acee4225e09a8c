//! `[audit] ship`: the collectors every record is shipped to, as the policy names them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Default records a destination may lag behind the log before the gateway records a
/// `ship-behind` record.
pub(crate) const DEFAULT_ALERT_BEHIND: u64 = 10_000;
/// Default APP-NAME of the syslog messages.
pub(crate) const DEFAULT_APP_NAME: &str = "fsgate";
/// RFC 5424 limits on the header fields (section 6).
const MAX_APP_NAME: usize = 48;
const MAX_HOSTNAME: usize = 255;
/// Longest destination name (it names the destination in the cursor file and records).
const MAX_NAME: usize = 128;

/// One destination: a syslog collector over TCP (optionally TLS), or a local syslog
/// datagram socket.
///
/// ```toml
/// [audit]
/// ship = [
///   { host = "logs.example.org", port = 6514, tls_ca = "/etc/fsgate/collector-ca.pem" },
///   { socket = "/dev/log" },
/// ]
/// ```
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShipDestination {
    /// The destination's name in `fsgate audit ship-status`, in the cursor file and in
    /// the `ship-behind` / `ship-caught-up` records (default: `host:port`, or the socket's
    /// path). Renaming a destination starts its shipping again from the first record.
    pub name: Option<String>,
    /// The collector's host name or IP address (RFC 5424 over TCP, octet-counted framing
    /// as RFC 6587 section 3.4.1 describes). With `port`; not with `socket`.
    pub host: Option<String>,
    /// The collector's TCP port (514 by convention in the clear, 6514 over TLS).
    pub port: Option<u16>,
    /// A local syslog datagram socket, e.g. `/dev/log`: each record is one datagram in
    /// the format `syslog(3)` sends. Not with `host`.
    pub socket: Option<PathBuf>,
    /// PEM file of the certificate authorities that sign the collector's certificate:
    /// turns TLS on (RFC 5425). Read at start.
    pub tls_ca: Option<PathBuf>,
    /// The name the collector's certificate must carry (default: `host`).
    pub tls_server_name: Option<String>,
    /// PEM certificate chain presented to a collector that asks for a client
    /// certificate (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1). Keep it outside the
    /// workspace; no policy rule can reach it.
    pub tls_key: Option<PathBuf>,
    /// Syslog facility: `kern`, `user`, `mail`, `daemon`, `auth` (default), `syslog`,
    /// `lpr`, `news`, `uucp`, `cron`, `authpriv`, `ftp`, `local0` ... `local7`.
    pub facility: Option<Facility>,
    /// The APP-NAME of every message (default `fsgate`): printable ASCII, at most 48
    /// characters.
    pub app_name: Option<String>,
    /// The HOSTNAME of every message (default: this machine's host name).
    pub hostname: Option<String>,
    /// Record a `ship-behind` record once this destination lags more than this many
    /// records behind the log, and a `ship-caught-up` record once it has shipped
    /// everything again (default 10000; 0 = never).
    pub alert_behind: Option<u64>,
}

/// Syslog facilities (RFC 5424 section 6.2.1), by their usual names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Facility {
    Kern,
    User,
    Mail,
    Daemon,
    Auth,
    Syslog,
    Lpr,
    News,
    Uucp,
    Cron,
    Authpriv,
    Ftp,
    Local0,
    Local1,
    Local2,
    Local3,
    Local4,
    Local5,
    Local6,
    Local7,
}

impl Facility {
    /// The facility's code (PRI = code * 8 + severity).
    pub fn code(self) -> u8 {
        use Facility::*;
        match self {
            Kern => 0,
            User => 1,
            Mail => 2,
            Daemon => 3,
            Auth => 4,
            Syslog => 5,
            Lpr => 6,
            News => 7,
            Uucp => 8,
            Cron => 9,
            Authpriv => 10,
            Ftp => 11,
            Local0 => 16,
            Local1 => 17,
            Local2 => 18,
            Local3 => 19,
            Local4 => 20,
            Local5 => 21,
            Local6 => 22,
            Local7 => 23,
        }
    }
}

/// Where a destination's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// TCP to `host:port` (TLS when `tls_ca` is set).
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// A local datagram socket.
    Socket(PathBuf),
}

impl ShipDestination {
    /// Where this destination's messages go, or why the entry is unusable.
    pub fn target(&self) -> Result<Target, String> {
        match (&self.host, self.port, &self.socket) {
            (Some(host), Some(port), None) if !host.is_empty() && port != 0 => Ok(Target::Tcp {
                host: host.clone(),
                port,
            }),
            (Some(_), Some(0), None) => Err("port 0 is not a collector's port".into()),
            (Some(h), Some(_), None) if h.is_empty() => Err("host is empty".into()),
            (None, None, Some(path)) if path.is_absolute() => Ok(Target::Socket(path.clone())),
            (None, None, Some(_)) => Err("socket must be an absolute path".into()),
            (Some(_), None, None) => Err("host needs a port".into()),
            (None, Some(_), None) => Err("port needs a host".into()),
            _ => Err("give either host and port, or socket (not both)".into()),
        }
    }

    /// The destination's name (see [`ShipDestination::name`]).
    pub(crate) fn display_name(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        match self.target() {
            Ok(Target::Tcp { host, port }) if host.contains(':') => format!("[{host}]:{port}"),
            Ok(Target::Tcp { host, port }) => format!("{host}:{port}"),
            Ok(Target::Socket(p)) => p.display().to_string(),
            Err(_) => "?".into(),
        }
    }

    /// Whether TLS is on.
    pub(crate) fn tls(&self) -> bool {
        self.tls_ca.is_some()
    }

    /// Facility in force.
    pub(crate) fn facility(&self) -> Facility {
        self.facility.unwrap_or(Facility::Auth)
    }

    /// APP-NAME in force.
    pub(crate) fn app_name(&self) -> &str {
        self.app_name.as_deref().unwrap_or(DEFAULT_APP_NAME)
    }

    /// Lag, in records, that makes a `ship-behind` record; None = never.
    pub(crate) fn alert_behind(&self) -> Option<u64> {
        match self.alert_behind.unwrap_or(DEFAULT_ALERT_BEHIND) {
            0 => None,
            n => Some(n),
        }
    }

    /// Checks one entry's values (what parses but cannot work).
    fn check(&self) -> Result<(), String> {
        let target = self.target()?;
        let tls_keys = [
            self.tls_server_name.is_some(),
            self.tls_cert.is_some(),
            self.tls_key.is_some(),
        ];
        if matches!(target, Target::Socket(_)) && (self.tls() || tls_keys.contains(&true)) {
            return Err("tls_* keys are for a TCP collector, not a socket".into());
        }
        if !self.tls() && tls_keys.contains(&true) {
            return Err("tls_server_name, tls_cert and tls_key need tls_ca (TLS)".into());
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("tls_cert and tls_key go together".into());
        }
        if let Some(n) = &self.name
            && (n.is_empty() || n.len() > MAX_NAME || n.chars().any(char::is_control))
        {
            return Err(format!(
                "name must be 1 to {MAX_NAME} bytes without control characters"
            ));
        }
        header_field("app_name", self.app_name(), MAX_APP_NAME)?;
        if let Some(h) = &self.hostname {
            header_field("hostname", h, MAX_HOSTNAME)?;
        }
        Ok(())
    }

    /// Makes relative file names absolute against `base` (the policy file's directory).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        for p in [&mut self.tls_ca, &mut self.tls_cert, &mut self.tls_key]
            .into_iter()
            .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}

/// RFC 5424 header fields are 1..=max printable US-ASCII characters (33..=126).
fn header_field(key: &str, v: &str, max: usize) -> Result<(), String> {
    if v.is_empty() || v.len() > max || !v.bytes().all(|b| (33..=126).contains(&b)) {
        return Err(format!(
            "{key} must be 1 to {max} printable ASCII characters without spaces"
        ));
    }
    Ok(())
}

/// Checks every entry of `[audit] ship`: each usable, names unique. The message starts
/// with the entry's index so `policy check` can point at it.
pub fn check_all(dests: &[ShipDestination]) -> Result<(), String> {
    let mut names = BTreeSet::new();
    for (i, d) in dests.iter().enumerate() {
        d.check().map_err(|e| format!("ship[{i}]: {e}"))?;
        if !names.insert(d.display_name()) {
            return Err(format!(
                "ship[{i}]: a second destination named {:?}: give each a distinct name",
                d.display_name()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<ShipDestination>, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct W {
            ship: Vec<ShipDestination>,
        }
        let w: W = toml::from_str(text).map_err(|e| e.to_string())?;
        check_all(&w.ship)?;
        Ok(w.ship)
    }

    #[test]
    fn tcp_tls_and_socket_entries_parse() {
        let d = parse(
            "ship = [{ host = \"127.0.0.1\", port = 6514, tls_ca = \"ca.pem\", facility = \"local3\", app_name = \"gw1\" }, { socket = \"/dev/log\" }]",
        )
        .unwrap();
        assert_eq!(d[0].display_name(), "127.0.0.1:6514");
        assert!(d[0].tls());
        assert_eq!(d[0].facility().code(), 19);
        assert_eq!(d[0].app_name(), "gw1");
        assert_eq!(d[1].target(), Ok(Target::Socket("/dev/log".into())));
        assert_eq!(d[1].facility(), Facility::Auth);
        assert_eq!(d[1].alert_behind(), Some(DEFAULT_ALERT_BEHIND));
        let v6 = parse("ship = [{ host = \"::1\", port = 514, alert_behind = 0 }]").unwrap();
        assert_eq!(v6[0].display_name(), "[::1]:514");
        assert_eq!(v6[0].alert_behind(), None);
    }

    #[test]
    fn unusable_entries_are_refused() {
        for bad in [
            "ship = [{ host = \"a\" }]",
            "ship = [{ port = 514 }]",
            "ship = [{ host = \"a\", port = 0 }]",
            "ship = [{ host = \"a\", port = 514, socket = \"/dev/log\" }]",
            "ship = [{ socket = \"dev/log\" }]",
            "ship = [{ socket = \"/dev/log\", tls_ca = \"/ca\" }]",
            "ship = [{ host = \"a\", port = 514, tls_cert = \"/c\", tls_key = \"/k\" }]",
            "ship = [{ host = \"a\", port = 514, tls_ca = \"/ca\", tls_cert = \"/c\" }]",
            "ship = [{ host = \"a\", port = 514, app_name = \"two words\" }]",
            "ship = [{ host = \"a\", port = 514, facility = \"local9\" }]",
            "ship = [{ host = \"a\", port = 514, hots = \"b\" }]",
            "ship = [{ host = \"a\", port = 514 }, { host = \"a\", port = 514 }]",
            "ship = [{ host = \"a\", port = 70000 }]",
            "ship = [{}]",
        ] {
            assert!(parse(bad).is_err(), "accepted: {bad}");
        }
        let named =
            "ship = [{ host = \"a\", port = 514 }, { name = \"b\", host = \"a\", port = 514 }]";
        assert!(parse(named).is_ok());
    }

    #[test]
    fn relative_tls_files_resolve_against_the_policy_dir() {
        let mut d = ShipDestination {
            tls_ca: Some("ca.pem".into()),
            tls_key: Some("/abs/key.pem".into()),
            ..Default::default()
        };
        d.resolve_relative_to(Path::new("/etc/fsgate"));
        assert_eq!(d.tls_ca.unwrap(), Path::new("/etc/fsgate/ca.pem"));
        assert_eq!(d.tls_key.unwrap(), Path::new("/abs/key.pem"));
    }
}
