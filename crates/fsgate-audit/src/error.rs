//! [`AuditError`]: why the audit log could not be opened or written.

use std::path::PathBuf;

/// Everything that can go wrong while opening or writing the audit log.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// A file operation on the log, its directory or a sidecar failed.
    #[error("audit log: cannot {op} {}: {message}", path.display())]
    Io {
        /// What was being done ("open", "read", "rename", ...).
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The operating system's error kind.
        kind: std::io::ErrorKind,
        /// The operating system's message.
        message: String,
    },
    /// A record could not be made durable; the request must be refused (fail closed).
    #[error("audit log is not writable ({message}); request refused")]
    Write {
        /// The operating system's error kind.
        kind: std::io::ErrorKind,
        /// What failed.
        message: String,
    },
    /// The existing log does not verify at start-up and the operator did not accept it.
    #[error(
        "audit log {} does not verify: {report}; inspect it with `fsgate audit verify`, or restart with --accept-broken-chain to begin a new segment that records the break",
        path.display()
    )]
    BrokenChain {
        /// The active log file.
        path: PathBuf,
        /// What is wrong, one problem per `; `.
        report: String,
    },
    /// Another process (another gateway) holds the log.
    #[error("audit log {} is in use by another process", path.display())]
    Locked {
        /// The active log file.
        path: PathBuf,
    },
    /// The signing key or a public key could not be used.
    #[error("audit key {}: {message}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why it is unusable.
        message: String,
    },
    /// A checkpoint could not be written to the checkpoint file or its sink.
    #[error("audit checkpoint not written: {message}")]
    Checkpoint {
        /// What failed.
        message: String,
    },
    /// The settings are unusable (bad sink name, path without a file name, ...).
    #[error("audit settings: {0}")]
    Config(String),
    /// The log was closed; nothing more can be appended.
    #[error("audit log is closed")]
    Closed,
}

impl AuditError {
    /// Wraps an I/O error with the operation and path it concerns.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        AuditError::Io {
            op,
            path: path.into(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}
