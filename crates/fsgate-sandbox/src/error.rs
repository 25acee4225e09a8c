//! [`SandboxError`]: why confining the gateway or an agent failed.

use crate::status::SandboxStatus;

/// Everything that can go wrong while building or applying a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The Landlock library or syscalls refused the ruleset.
    #[error("landlock: cannot {stage}: {source}")]
    Landlock {
        /// Which step failed ("create the ruleset", "add the rule for the audit dir", ...).
        stage: String,
        /// The underlying error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file or directory named in a plan cannot be used.
    #[error("sandbox: {what}: {source}")]
    Io {
        /// What was being done, naming the path or handle.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// An agent plan would give the agent a way into a protected directory.
    #[error(
        "sandbox: agent path {allowed} overlaps the protected {protected}; the agent could bypass the gateway"
    )]
    Overlap {
        /// The path the plan allows the agent.
        allowed: String,
        /// The protected path (workspace, audit or backup dir).
        protected: String,
    },
    /// `[sandbox] require_landlock = true` and the kernel did not fully enforce the plan.
    #[error("[sandbox] require_landlock = true, but {status}; refusing to start")]
    NotFullyEnforced {
        /// What was enforced.
        status: Box<SandboxStatus>,
    },
}
