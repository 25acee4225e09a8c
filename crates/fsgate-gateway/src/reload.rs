//! A policy reload: whether the new policy fits what the process can do (the kernel
//! sandbox, git staging), and putting it in force for each workspace.

use std::sync::Arc;

use std::path::Path;

use crate::gateway::Gateway;
use crate::vcs::Stager;
use fsgate_decide::OpClass;
use fsgate_policy::Policy;

impl Gateway {
    /// Notes that the kernel sandbox grants no write rights on the workspace.
    pub fn set_kernel_allows_write(&self, allowed: bool) {
        if let Ok(mut w) = self.kernel_allows_write.write() {
            *w = allowed;
        }
    }

    /// Replaces the policy after validating that it fits what the process can do.
    /// The fixed floor carries over. Returns (old sha256, new sha256).
    pub fn reload(&self, new: Policy) -> Result<(String, String), String> {
        if !self.is_several() {
            admits(self, &new)?;
            return Ok(reload_one(self, new));
        }
        // Several workspaces: each takes the rules for it, and only if every one can.
        let each: Vec<(&Gateway, Policy)> = self
            .members()
            .map(|m| (m, new.for_workspace(m.name().unwrap_or(""))))
            .collect();
        for (m, p) in &each {
            admits(m, p).map_err(|e| format!("workspace `{}`: {e}", m.name().unwrap_or("")))?;
        }
        let mut hashes = (String::new(), String::new());
        for (m, p) in each {
            hashes = reload_one(m, p);
        }
        Ok(hashes)
    }
}

/// Whether `new` fits what the process can do for the workspace `gw` serves.
fn admits(gw: &Gateway, new: &Policy) -> Result<(), String> {
    let may_write = gw.kernel_allows_write.read().map(|w| *w).unwrap_or(false);
    if new.can_ever(OpClass::Write) && !may_write {
        return Err(
                "the new policy allows writes, but the kernel sandbox was set up read-only at start; restart fsgate to widen it"
                    .into(),
            );
    }
    vcs_allows(gw.vcs.as_deref(), gw.workspace.root_path(), new)
}

/// Puts `new` in force for the workspace `gw` serves (checked by [`admits`]).
fn reload_one(gw: &Gateway, mut new: Policy) -> (String, String) {
    let old = gw.policy();
    // The floor carries over, plus any gitleaks config the new policy names.
    let mut floor = old.floor().entries().to_vec();
    floor.extend(fsgate_decide::floor::entries_inside(
        gw.workspace.root_path(),
        fsgate_policy::floor::gitleaks_configs(&new),
    ));
    new.set_floor(fsgate_decide::floor::FixedFloor::from_entries(floor));
    let hashes = (old.sha256().to_string(), new.sha256().to_string());
    let mut slot = match gw.policy.write() {
        Ok(p) => p,
        Err(poisoned) => poisoned.into_inner(),
    };
    // "Allow for this session" was given for a rule as it was: a rule changed (or
    // gone) under the same id is asked about again.
    gw.grants.retain(|id| match (old.rule(id), new.rule(id)) {
        (Some(a), Some(b)) => a.same_scope(b),
        _ => false,
    });
    *slot = Arc::new(new);
    // Under the lock, so that no request sees the new policy before the log does.
    if let Some(a) = &gw.audit {
        a.set_policy_sha256(&hashes.1);
    }
    hashes
}

/// `[vcs] stage` in a reloaded policy: git's files (of the work tree `vcs` found at
/// start for the workspace at `root`) must stay out of the agent's reach; a repository
/// is only looked for at start.
fn vcs_allows(vcs: Option<&Stager>, root: &Path, new: &Policy) -> Result<(), String> {
    if !new.vcs_stage() {
        return Ok(());
    }
    match vcs {
        Some(v) => v.check_policy(new, root).map_err(|e| e.to_string()),
        None => {
            tracing::warn!(
                "[vcs] stage = true in the reloaded policy, but no git work tree was found at start (or staging was off then): nothing is staged until a restart"
            );
            Ok(())
        }
    }
}
