//! The policy loaded (scoped to the first workspace when several are served), and the
//! other workspaces served added to the gateway.

use std::path::{Path, PathBuf};

use fsgate_decide::floor::FloorKind;
use fsgate_gateway::Gateway;
use fsgate_policy::Policy;

use super::config::GatewayConfig;
use super::several;
use super::vcs::VcsGrants;

/// Loads the policy named on the command line, or the built-in default.
pub(super) fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    match path {
        Some(p) => Policy::load(p).map_err(|e| format!("invalid policy: {e}")),
        None => Policy::builtin_default().map_err(|e| format!("built-in policy: {e}")),
    }
}

/// The policy, scoped to the first workspace when several are served, and the policy
/// as loaded (each other workspace scopes its own).
pub(super) fn scoped_policy(cfg: &GatewayConfig) -> Result<(Policy, Policy), String> {
    let mut policy = load_policy(cfg.policy.as_deref())?;
    let base_policy = policy.clone();
    if let Some(first) = cfg.several.first() {
        several::warn_unserved_scopes(&policy, &cfg.several);
        policy = policy.for_workspace(&first.name);
    } else if !policy.scoped_workspaces().is_empty() {
        tracing::warn!(
            "the policy has rules scoped to workspaces by name; with one --workspace they apply nowhere"
        );
    }
    Ok((policy, base_policy))
}

/// What the other workspaces served share with the first: the policy as loaded, the
/// fixed floor's files, the backup settings and root.
pub(super) struct Members<'a> {
    pub(super) base_policy: &'a Policy,
    pub(super) own: &'a [(FloorKind, PathBuf)],
    pub(super) backups: (&'a fsgate_backup::BackupSettings, Option<&'a Path>),
}

impl Members<'_> {
    /// The gateway serving every other workspace too (unchanged with one); their
    /// backup directories are added to `own_dirs`, what staging in their git
    /// repositories needs to `grants`.
    pub(super) fn add_to(
        self,
        gateway: Gateway,
        cfg: &GatewayConfig,
        (own_dirs, grants): (&mut Vec<PathBuf>, &mut VcsGrants),
    ) -> Result<Gateway, String> {
        let Some((first, rest)) = cfg.several.split_first() else {
            return Ok(gateway);
        };
        let members = several::open_members(
            rest,
            self.base_policy,
            self.own,
            self.backups,
            (&gateway, grants),
        )?;
        own_dirs.extend(
            members
                .iter()
                .filter_map(|(_, g)| Some(g.backups()?.location().to_path_buf())),
        );
        Ok(gateway.with_members(&first.name, members))
    }
}
