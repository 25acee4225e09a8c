//! The fixed floor as the policy file meets it: the gitleaks configs a policy loaded
//! (floored like the policy), and `policy check`'s report of a policy that tries to
//! allow a floor entry (`fixed_floor_violations`). The floor itself is the engine's
//! (`fsgate_decide::floor`).

use std::path::PathBuf;

use crate::Policy;
use fsgate_decide::floor::{FixedFloor, FloorKind};
use fsgate_decide::{Effect, EntryKind, OpClass};

/// A policy rule that would open a floor entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct FloorViolation {
    /// What it would expose.
    pub kind: FloorKind,
    /// The entry's workspace-relative path.
    pub path: String,
    /// The operation class.
    pub op: OpClass,
    /// The allow rule that would allow it.
    pub rule: String,
    /// True if the rule aims at the entry: the literal part of one of its globs (`cfg`
    /// in `cfg/**`) is the entry, lies beneath it or above it. False if the rule only
    /// covers it with a wildcard from the root (`**`).
    pub explicit: bool,
}

/// The gitleaks configs `policy` loaded: part of the policy, so floored like it.
pub fn gitleaks_configs(policy: &Policy) -> Vec<(FloorKind, PathBuf)> {
    policy
        .content_scanner()
        .map(|sc| {
            sc.sources()
                .iter()
                .map(|s| (FloorKind::PolicyFile, s.path.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Every (entry, op) the policy alone would allow (or ask a person about). The gateway
/// refuses them anyway (the floor comes first); `policy check` reports the explicit ones
/// as errors.
pub(crate) fn fixed_floor_violations(policy: &Policy, floor: &FixedFloor) -> Vec<FloorViolation> {
    let mut out = Vec::new();
    for e in floor.entries() {
        for op in OpClass::ALL {
            let d = policy.decide(op, &e.path, EntryKind::Unknown);
            if d.effect == Effect::Deny {
                continue;
            }
            let explicit = policy
                .rules()
                .iter()
                .find(|r| r.id == d.rule)
                .is_some_and(|r| {
                    r.bases
                        .iter()
                        .any(|b| !b.is_root() && (b.starts_with(&e.path) || e.path.starts_with(b)))
                });
            out.push(FloorViolation {
                kind: e.kind,
                path: e.path.as_str().to_string(),
                op,
                rule: d.rule.to_string(),
                explicit,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn floor() -> FixedFloor {
        FixedFloor::new(
            Path::new("/ws"),
            &[
                (FloorKind::PolicyFile, Path::new("/ws/.fsgate/policy.toml")),
                (FloorKind::AuditLog, Path::new("/ws/logs/audit.jsonl")),
                (FloorKind::BackupDir, Path::new("/var/backups")),
            ],
        )
    }

    #[test]
    fn violations_tell_explicit_from_wildcard() {
        let f = floor();
        let pol = Policy::builtin_default().unwrap();
        let v = fixed_floor_violations(&pol, &f);
        assert!(!v.is_empty() && v.iter().all(|v| !v.explicit), "{v:?}");
        let pol = Policy::from_toml(
            "version = 1\n[[rule]]\nid = \"cfg\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\".fsgate/**\"]\n",
            "t",
        )
        .unwrap();
        let v = fixed_floor_violations(&pol, &f);
        assert_eq!(v.len(), 1);
        assert!(v[0].explicit && v[0].rule == "cfg" && v[0].kind == FloorKind::PolicyFile);
    }
}
