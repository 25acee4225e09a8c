//! What the command line says about the gateway to build.

use std::path::PathBuf;

use super::several;

/// What the command line says about the gateway to build.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Workspace directory (with several, the first usable one).
    pub workspace: PathBuf,
    /// Several workspaces (`--workspace` repeated), the usable ones with their names,
    /// `workspace` first; empty when one was given.
    pub several: Vec<several::NamedRoot>,
    /// Policy file; None = built-in default.
    pub policy: Option<PathBuf>,
    /// Active audit log file.
    pub audit_log: Option<PathBuf>,
    /// Backup directory.
    pub backup_dir: Option<PathBuf>,
    /// Start even if the existing audit chain does not verify (recording the break).
    pub accept_broken_chain: bool,
}
