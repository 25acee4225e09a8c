//! Secret names: `secret-exposed` (an allow that reaches a default secret name),
//! `secret-glob` (a glob naming one literally) and `waived-pattern` (each waiver shown).

use regex::{RegexSet, RegexSetBuilder};

use super::samples::{allows, is_literal, rule_ops, samples};
use crate::compile::secrets::BUILTIN_SECRETS;
use crate::lint::findings::{Severity, Sink, only};
use crate::{OpClass, Policy};
use fsgate_base::path::RelPath;
use fsgate_decide::{Effect, leaves_out};

/// Paths a default secret-name pattern catches, one or two per built-in pattern.
const SECRET_SAMPLES: &[&str] = &[
    ".env",
    "config/.env.production",
    "id_rsa",
    ".ssh/id_ed25519",
    "certs/server.pem",
    "credentials.json",
    "config/secrets.yaml",
    ".netrc",
    ".npmrc",
    ".aws/credentials",
    ".git/config",
    ".git",
];

/// `waived-pattern`: a built-in secret-name pattern this file waives, so a reviewer
/// sees every waiver where it is written.
pub(super) fn waivers(policy: &Policy, sink: &mut Sink<'_>) {
    for w in &policy.raw().secrets.disabled_patterns {
        let name = w.get_ref().trim();
        let id = format!("secrets:{}", name.strip_prefix("secrets:").unwrap_or(name));
        let Some(p) = policy.waived_patterns().iter().find(|p| p.id == id) else {
            continue;
        };
        sink.at(
            sink.pos(w.span().start),
            Severity::Note,
            "waived-pattern",
            format!(
                "the built-in secret-name pattern `{id}` (/{}/) is waived: paths it matches are decided by the rules; `policy explain` shows the waiver and each audit record of such a request carries it",
                p.source
            ),
            "keep the waiver as narrow as the need: a deny rule can still cover the paths that remain secret",
        );
    }
}

fn builtin_set() -> Option<RegexSet> {
    RegexSetBuilder::new(BUILTIN_SECRETS.iter().map(|(_, re)| *re))
        .case_insensitive(true)
        .build()
        .ok()
}

pub(super) fn secrets(policy: &Policy, sink: &mut Sink<'_>) {
    let Some(builtin) = builtin_set() else { return };
    let builtin_id = |comp: &str| {
        builtin
            .matches(comp)
            .iter()
            .map(|i| BUILTIN_SECRETS[i].0)
            .find(|id| !leaves_out(&format!("secrets:{id}"), comp))
    };
    for a in policy.rules().iter().filter(|r| r.effect == Effect::Allow) {
        let alone = only(policy, vec![a.clone()]);
        let mut candidates: Vec<RelPath> = SECRET_SAMPLES
            .iter()
            .filter_map(|s| RelPath::parse_rooted(s).ok())
            .collect();
        candidates.extend(samples(a));
        let mut exposed: Vec<(String, &str, OpClass)> = Vec::new();
        for s in &candidates {
            let Some(id) = s.components().find_map(builtin_id) else {
                continue;
            };
            // A pattern waived by `disabled_patterns` is let through on purpose.
            if policy
                .waived_patterns()
                .iter()
                .any(|w| w.id.strip_prefix("secrets:") == Some(id))
            {
                continue;
            }
            for op in rule_ops(a) {
                if allows(&alone, op, s) && allows(policy, op, s) {
                    exposed.push((s.as_str().to_string(), id, op));
                    break;
                }
            }
        }
        if let Some((path, id, op)) = exposed.first() {
            let more = if exposed.len() > 1 {
                format!(", and {} more secret path(s)", exposed.len() - 1)
            } else {
                String::new()
            };
            sink.at_rule(
 a,
                Severity::Error,
                "secret-exposed",
                format!(
                    "allow rule `{}` exposes `{path}` (a default secret name, secrets:{id}) to {}{more}",
                    a.id,
                    op.as_str()
                ),
                "keep `[secrets] builtin = true`, or add a deny rule for these paths before the allow",
            );
        }
        // A glob naming a secret literally can never allow anything there.
        for g in &a.globs {
            let hit = g
                .split('/')
                .filter(|c| is_literal(c) && !c.is_empty())
                .find_map(|c| {
                    let i = policy.secrets().first_match(c).ok().flatten()?;
                    Some((c.to_string(), policy.secrets().patterns()[i].id.clone()))
                });
            if let Some((comp, id)) = hit {
                sink.at_rule(
 a,
                    Severity::Warning,
                    "secret-glob",
                    format!(
                        "glob `{g}` of allow rule `{}` names `{comp}`, which {id} always denies first",
                        a.id
                    ),
                    "remove the glob; secret names cannot be allowed while their pattern is on",
                );
            }
        }
    }
}
