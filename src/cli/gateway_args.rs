//! The options `serve`, `acp` and `run` share: the workspaces, the policy, the audit log
//! and the backups, and the gateway they make.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::exit::fail;

// These doc comments are `--help` text: `[audit]` names a policy section and `<name>` a
// placeholder, not a link or an HTML tag.
#[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
/// Options shared by `serve` and `acp`.
#[derive(Debug, Args)]
pub(super) struct GatewayArgs {
    /// The workspace directory the agent may reach. Nothing outside it is reachable.
    ///
    /// Repeat it to serve several (`--workspace docs=/srv/docs`; default name: the
    /// directory's base name): each is reached only through its own handle, nothing
    /// between or above them. One missing or not a directory among several is skipped
    /// with a warning; if none is usable, fsgate exits with status 1. See
    /// docs/workspaces.md.
    #[arg(long, value_name = "[NAME=]DIR", required = true)]
    workspace: Vec<crate::startup::WorkspaceArg>,
    /// Policy file (TOML). Default: the built-in policy (policies/default.toml): read and
    /// write the workspace, secrets and .git denied, 10 MiB limits (256 MiB files for a
    /// process through `fsgate run`'s view), binary reads only of images and audio
    /// (base64), every other binary file refused.
    #[arg(long, value_name = "FILE")]
    pub(super) policy: Option<PathBuf>,
    /// The active audit log file (rotated files and checkpoints sit beside it). Default:
    /// the policy's [audit] path, else a per-workspace directory under your state dir.
    /// Keep it outside the workspace: one inside is accepted with a warning, hidden from
    /// listings, and no request can read, change, move or remove it, its sidecars, or a
    /// directory holding it (rule floor:audit-log).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Where previous versions of changed files are kept. Default: the policy's [backup]
    /// dir, else under your state dir. Keep it outside the workspace: one inside is
    /// accepted with a warning, hidden from listings, and no request can read, change,
    /// move or remove it, anything in it, or a directory holding it (rule
    /// floor:backup-dir). With several workspaces, DIR/<name> holds each one's backups.
    #[arg(long, value_name = "DIR")]
    backup_dir: Option<PathBuf>,
    /// Start even if the existing audit log does not verify: the damaged part is set
    /// aside and a `break` record, chained to the last good record, says what was wrong.
    #[arg(long)]
    accept_broken_chain: bool,
}

impl GatewayArgs {
    /// The gateway to build. Several workspaces are looked up first: the unusable ones
    /// are skipped with a warning, and none usable fails with exit 1.
    pub(super) fn config(&self) -> Result<crate::startup::config::GatewayConfig, ExitCode> {
        use crate::startup::several::{SeveralError, keep_usable};
        let several = match self.workspace.as_slice() {
            [] | [_] => Vec::new(),
            given => match keep_usable(given) {
                Ok(kept) => kept,
                Err(e @ SeveralError::NoneUsable(_)) => {
                    fsgate_base::text::eprint_line(&format!("fsgate: {e}"));
                    return Err(ExitCode::FAILURE);
                }
                Err(e) => return Err(fail(&e.to_string())),
            },
        };
        let workspace = match several.first() {
            Some(first) => first.dir.clone(),
            None => self
                .workspace
                .first()
                .map(|w| w.dir.clone())
                .unwrap_or_default(),
        };
        Ok(crate::startup::config::GatewayConfig {
            workspace,
            several,
            policy: self.policy.clone(),
            audit_log: self.audit_log.clone(),
            backup_dir: self.backup_dir.clone(),
            accept_broken_chain: self.accept_broken_chain,
        })
    }
}
