//! fsgate's benchmark driver: the same workloads, with every answer checked, against
//! fsgate's doors and the reference MCP filesystem server, in one run.

pub mod client;
pub mod floor;
pub mod fresh_fs;
pub mod mono;
pub mod mono_work;
pub mod report;
pub mod server;
pub mod suite;
pub mod tree;
pub mod workloads;

use std::path::Path;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or process of the driver's own.
    #[error("{path}: {source}")]
    Io {
        /// What was touched.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server misbehaved on the wire (closed, no answer, bad handshake).
    #[error("protocol: {0}")]
    Protocol(String),
    /// An answer was an error or did not hold what it must.
    #[error("wrong answer: {0}")]
    Answer(String),
    /// A workload or setup could not run as asked.
    #[error("{0}")]
    Setup(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
