//! A policy reload: whether the new policy fits what the process can do (the kernel
//! sandbox, git staging), putting it in force for each workspace, and its record.

use std::sync::Arc;

use serde_json::Value;

use super::Gateway;
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
            self.admits(&new)?;
            return Ok(self.reload_one(new));
        }
        // Several workspaces: each takes the rules for it, and only if every one can.
        let each: Vec<(&Gateway, Policy)> = self
            .members()
            .map(|m| (m, new.for_workspace(m.name().unwrap_or(""))))
            .collect();
        for (m, p) in &each {
            m.admits(p)
                .map_err(|e| format!("workspace `{}`: {e}", m.name().unwrap_or("")))?;
        }
        let mut hashes = (String::new(), String::new());
        for (m, p) in each {
            hashes = m.reload_one(p);
        }
        Ok(hashes)
    }

    /// Whether `new` fits what the process can do for this workspace.
    fn admits(&self, new: &Policy) -> Result<(), String> {
        let may_write = self.kernel_allows_write.read().map(|w| *w).unwrap_or(false);
        if new.can_ever(OpClass::Write) && !may_write {
            return Err(
                "the new policy allows writes, but the kernel sandbox was set up read-only at start; restart fsgate to widen it"
                    .into(),
            );
        }
        self.vcs_allows(new)
    }

    /// Puts `new` in force for this workspace (checked by [`Self::admits`]).
    fn reload_one(&self, mut new: Policy) -> (String, String) {
        let old = self.policy();
        // The floor carries over, plus any gitleaks config the new policy names.
        let mut floor = old.floor().entries().to_vec();
        floor.extend(fsgate_decide::floor::entries_inside(
            self.workspace.root_path(),
            fsgate_policy::floor::gitleaks_configs(&new),
        ));
        new.set_floor(fsgate_decide::floor::FixedFloor::from_entries(floor));
        let hashes = (old.sha256().to_string(), new.sha256().to_string());
        let mut slot = match self.policy.write() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        // "Allow for this session" was given for a rule as it was: a rule changed (or
        // gone) under the same id is asked about again.
        self.grants.retain(|id| match (old.rule(id), new.rule(id)) {
            (Some(a), Some(b)) => a.same_scope(b),
            _ => false,
        });
        *slot = Arc::new(new);
        // Under the lock, so that no request sees the new policy before the log does.
        if let Some(a) = &self.audit {
            a.set_policy_sha256(&hashes.1);
        }
        hashes
    }

    /// `[vcs] stage` in a reloaded policy: git's files must stay out of the agent's
    /// reach; a repository is only looked for at start.
    fn vcs_allows(&self, new: &Policy) -> Result<(), String> {
        if !new.vcs_stage() {
            return Ok(());
        }
        match &self.vcs {
            Some(v) => v
                .check_policy(new, self.workspace.root_path())
                .map_err(|e| e.to_string()),
            None => {
                tracing::warn!(
                    "[vcs] stage = true in the reloaded policy, but no git work tree was found at start (or staging was off then): nothing is staged until a restart"
                );
                Ok(())
            }
        }
    }

    /// Records the result of a policy reload: a `reload` audit record with both hashes,
    /// or a `reload-rejected` record saying why the old policy stays in force.
    pub fn note_reload(&self, origin: &str, result: Result<(String, String), String>) {
        let mut details = serde_json::Map::new();
        details.insert("policy".into(), origin.into());
        match result {
            Ok((old, new)) => {
                details.insert("old_sha256".into(), old.clone().into());
                details.insert("new_sha256".into(), new.clone().into());
                self.record("reload", details);
                self.set_meta("policyReloadedFrom", Value::String(old + " -> " + &new));
            }
            Err(e) => {
                details.insert("error".into(), e.clone().into());
                details.insert("in_force_sha256".into(), self.policy().sha256().into());
                self.record("reload-rejected", details);
                self.set_meta("lastReloadError", Value::String(e));
            }
        }
    }
}
