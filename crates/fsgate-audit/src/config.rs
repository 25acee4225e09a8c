//! The `[audit]` section of a policy file: durability, checkpoints, keys, rotation.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default number of records between two checkpoints.
pub(crate) const DEFAULT_CHECKPOINT_EVERY: u64 = 1000;
/// Default idle time, in seconds, after which a heartbeat checkpoint covers the tail.
pub(crate) const DEFAULT_HEARTBEAT_SECS: u64 = 30;
/// Default size, in bytes, at which the active file is rotated (8 MiB). Start-up reads
/// and verifies the whole active file (about 5 ms per MiB on a small VM), so this bounds
/// the time to a first answer and the memory start-up takes.
pub(crate) const DEFAULT_MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Default audit bytes the gateway may add per minute (`max_bytes_per_minute`): well
/// above what its fastest door writes in a benchmark run, far below a disk filled at
/// line speed.
pub(crate) const DEFAULT_MAX_BYTES_PER_MINUTE: u64 = 128 * 1024 * 1024;
/// Default audit bytes one session may add per minute (`max_session_bytes_per_minute`).
pub(crate) const DEFAULT_MAX_SESSION_BYTES_PER_MINUTE: u64 = 32 * 1024 * 1024;
/// The smallest growth budget accepted (other than 0, no limit): a few dozen records.
pub(crate) const MIN_BYTES_PER_MINUTE: u64 = 16 * 1024;
/// In `fsync = "batch"` mode, the longest time written records stay unsynced.
pub(crate) const BATCH_SYNC_INTERVAL: Duration = Duration::from_millis(100);

/// When a record reaches the disk.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// `append` returns only after an `fdatasync` covering the record (group commit:
    /// concurrent appenders share one). A record is on disk before its reply leaves.
    #[default]
    Always,
    /// `append` returns once the record is written to the file (it survives a crash of the
    /// process, not of the machine); an `fdatasync` follows within 100 ms.
    Batch,
    /// `append` returns once the record is written to the file; the file is synced only
    /// before a checkpoint, a rotation and at close.
    Never,
}

/// The `[audit]` policy section. Every field is optional; the defaults are safe.
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSettings {
    /// Durability of each record: "always" (default), "batch" or "never". See [`FsyncMode`].
    pub fsync: FsyncMode,
    /// Write a checkpoint (seq + head hash) every this many records (default 1000;
    /// 0 = only heartbeat and shutdown checkpoints).
    pub checkpoint_every: Option<u64>,
    /// When records were appended but no checkpoint covers them, write a heartbeat
    /// checkpoint after this many idle seconds (default 30; 0 = off).
    pub heartbeat_secs: Option<u64>,
    /// Ed25519 key that signs checkpoints and tombstones: a file holding the 32-byte seed
    /// as 64 hex digits, or a PKCS#8 PEM `PRIVATE KEY`. Keep it outside the workspace,
    /// readable by its owner only. Without it checkpoints are unsigned.
    pub signing_key: Option<PathBuf>,
    /// A second place every checkpoint is sent to: a file path (one JSON line appended per
    /// checkpoint, ideally on another filesystem), `"syslog"` (the local syslog socket
    /// `/dev/log`), or `"syslog:/path/to/socket"`.
    pub checkpoint_sink: Option<String>,
    /// Rotate the active file once it holds this many bytes (default 8 MiB; 0 = never).
    /// The chain continues across files. Start-up verifies the whole active file: a
    /// larger size makes start-up slower and its memory peak higher.
    pub max_file_bytes: Option<u64>,
    /// The active log file when `--audit-log` is not given.
    pub path: Option<PathBuf>,
    /// Collectors every record is shipped to, from the log's own files, off the
    /// request path (docs/shipping.md): `{ host, port }` for RFC 5424 syslog over TCP
    /// (TLS with `tls_ca`), or `{ socket = "/dev/log" }` for the local syslog socket.
    pub ship: Vec<crate::ship::config::ShipDestination>,
    /// Bytes of audit records the whole gateway may add per minute (default 128 MiB;
    /// 0 = no limit, at least 16384 otherwise). Once a minute's are spent, every request
    /// is refused (-32004, rule `audit.max_bytes_per_minute`) until the minute is over;
    /// only the first refusal of the minute is recorded, and a `growth-limit` record
    /// counts the others. Read at start.
    pub max_bytes_per_minute: Option<u64>,
    /// Bytes of audit records one session (ACP `sessionId`, an MCP or WebSocket
    /// connection) may add per minute (default 32 MiB; 0 = no limit, at least 16384
    /// otherwise): beyond it that session's requests are refused (-32004, rule
    /// `audit.max_session_bytes_per_minute`) as for `max_bytes_per_minute`. Read at start.
    pub max_session_bytes_per_minute: Option<u64>,
}

impl AuditSettings {
    /// Records between periodic checkpoints (0 = none).
    pub(crate) fn checkpoint_every(&self) -> u64 {
        self.checkpoint_every.unwrap_or(DEFAULT_CHECKPOINT_EVERY)
    }

    /// Idle time before a heartbeat checkpoint, or `None` when heartbeats are off.
    pub(crate) fn heartbeat(&self) -> Option<Duration> {
        match self.heartbeat_secs.unwrap_or(DEFAULT_HEARTBEAT_SECS) {
            0 => None,
            s => Some(Duration::from_secs(s)),
        }
    }

    /// Rotation size in bytes (0 = never rotate).
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES)
    }

    /// The process's growth budget in bytes per minute (0: none).
    pub(crate) fn max_bytes_per_minute(&self) -> u64 {
        self.max_bytes_per_minute
            .unwrap_or(DEFAULT_MAX_BYTES_PER_MINUTE)
    }

    /// A session's growth budget in bytes per minute (0: none).
    pub(crate) fn max_session_bytes_per_minute(&self) -> u64 {
        self.max_session_bytes_per_minute
            .unwrap_or(DEFAULT_MAX_SESSION_BYTES_PER_MINUTE)
    }

    /// Refuses values `fsgate serve` cannot work with: `(key, message)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, v) in [
            ("max_bytes_per_minute", self.max_bytes_per_minute),
            (
                "max_session_bytes_per_minute",
                self.max_session_bytes_per_minute,
            ),
        ] {
            if let Some(n) = v
                && n != 0
                && n < MIN_BYTES_PER_MINUTE
            {
                return Err((
                    key,
                    format!(
                        "{n} is too small: 0 (no limit) or at least {MIN_BYTES_PER_MINUTE} bytes, a few dozen records"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Resolves relative `signing_key`, `path` and file `checkpoint_sink` against `base`
    /// (the policy loader passes the policy file's directory).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        for p in [&mut self.signing_key, &mut self.path]
            .into_iter()
            .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        if let Some(sink) = &mut self.checkpoint_sink
            && !sink.starts_with("syslog")
            && Path::new(sink.as_str()).is_relative()
        {
            *sink = base.join(sink.as_str()).to_string_lossy().into_owned();
        }
        for d in &mut self.ship {
            d.resolve_relative_to(base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe() {
        let s: AuditSettings = toml::from_str("").unwrap();
        assert_eq!(s.fsync, FsyncMode::Always);
        assert_eq!(s.checkpoint_every(), 1000);
        assert_eq!(s.heartbeat(), Some(Duration::from_secs(30)));
        assert_eq!(s.max_file_bytes(), 8 * 1024 * 1024);
        assert_eq!(s.max_bytes_per_minute(), 128 << 20);
        assert_eq!(s.max_session_bytes_per_minute(), 32 << 20);
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s, AuditSettings::default());
    }

    #[test]
    fn parses_every_field_and_rejects_unknown_ones() {
        let s: AuditSettings = toml::from_str(
            "fsync = \"batch\"\ncheckpoint_every = 10\nheartbeat_secs = 0\n\
             signing_key = \"/etc/fsgate/key\"\ncheckpoint_sink = \"syslog\"\n\
             max_file_bytes = 4096\npath = \"/var/log/fsgate/audit.jsonl\"\n",
        )
        .unwrap();
        assert_eq!(s.fsync, FsyncMode::Batch);
        assert_eq!(s.checkpoint_every(), 10);
        assert_eq!(s.heartbeat(), None);
        assert_eq!(s.max_file_bytes(), 4096);
        let err = toml::from_str::<AuditSettings>("fsynk = \"never\"").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        assert!(toml::from_str::<AuditSettings>("fsync = \"sometimes\"").is_err());
    }

    #[test]
    fn growth_budgets_are_off_or_at_least_a_few_dozen_records() {
        for (text, ok) in [
            ("max_bytes_per_minute = 0", true),
            ("max_session_bytes_per_minute = 16384", true),
            ("max_session_bytes_per_minute = 16383", false),
            ("max_bytes_per_minute = 1", false),
        ] {
            let s: AuditSettings = toml::from_str(text).unwrap();
            assert_eq!(s.validate().is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn relative_paths_resolve_against_the_policy_dir() {
        let mut s = AuditSettings {
            signing_key: Some("keys/audit.key".into()),
            checkpoint_sink: Some("sink.jsonl".into()),
            path: Some("/abs/audit.jsonl".into()),
            ..Default::default()
        };
        s.resolve_relative_to(Path::new("/etc/fsgate"));
        assert_eq!(
            s.signing_key.unwrap(),
            Path::new("/etc/fsgate/keys/audit.key")
        );
        assert_eq!(s.checkpoint_sink.unwrap(), "/etc/fsgate/sink.jsonl");
        assert_eq!(s.path.unwrap(), Path::new("/abs/audit.jsonl"));
    }
}
