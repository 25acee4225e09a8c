//! `dead-rule` and `shadowed-ops`: allow rules (or some of their ops) that a deny rule
//! always overrides.

use super::samples::{is_literal, rule_ops};
use crate::lint::findings::{Severity, Sink, only};
use crate::{EntryKind, OpClass, Policy, Rule};
use fsgate_base::path::RelPath;
use fsgate_decide::{Condition, Effect};

fn op_names(ops: &[OpClass]) -> String {
    ops.iter()
        .map(|o| o.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// True if some glob of `deny` textually covers everything `glob` matches: the same
/// glob, `**`, or a literal directory (`dir` or `dir/**`) that `glob` lies beneath.
fn glob_covered_textually(deny: &Rule, glob: &str) -> bool {
    let g = glob.trim_start_matches('/');
    deny.globs.iter().any(|h| {
        let h = h.trim_start_matches('/');
        let prefix = h.strip_suffix("/**").unwrap_or(h);
        h == "**"
            || h == g
            || (is_literal(prefix) && !prefix.is_empty() && g.starts_with(&format!("{prefix}/")))
    })
}

/// True if `deny` denies `op` on every path `allow` matches (ancestor listing aside).
fn deny_covers(policy: &Policy, deny: &Rule, allow: &Rule, op: OpClass) -> bool {
    if deny.effect != Effect::Deny || !deny.ops[op as usize] {
        return false;
    }
    // Only the conditions weighed below: a deny narrowed by any other may leave some
    // of the allow's paths to it.
    let weighed = |c: &Condition| matches!(c, Condition::Extension(_) | Condition::Size { .. });
    if !deny.conditions.iter().all(weighed) {
        return false;
    }
    if let Some(dx) = &deny.extensions() {
        // An allow's extensions do not limit it on directories, a deny's do: the allow
        // still decides listing, creating and removing directories (reading one is moot).
        if op != OpClass::Read {
            return false;
        }
        match &allow.extensions() {
            Some(ax) if ax.iter().all(|e| dx.contains(e)) => {}
            _ => return false,
        }
    }
    // A size-conditioned deny covers only files within its range (never directories):
    // the allow must be limited to that range too.
    let sized = |r: &Rule| r.min_size().is_some() || r.max_size().is_some();
    let within = !sized(deny)
        || (sized(allow)
            && deny.min_size().unwrap_or(0) <= allow.min_size().unwrap_or(0)
            && deny.max_size().unwrap_or(u64::MAX) >= allow.max_size().unwrap_or(u64::MAX));
    if !within {
        return false;
    }
    let mut d = deny.clone();
    d.conditions.clear();
    let reduced = only(policy, vec![d]);
    let covered = |glob: &str, base: &RelPath| {
        glob_covered_textually(deny, glob)
            || reduced.decide(op, base, EntryKind::Unknown).rule == deny.id
    };
    if allow.globs.is_empty() {
        return covered("**", &RelPath::root());
    }
    allow
        .globs
        .iter()
        .zip(&allow.bases)
        .all(|(g, b)| covered(g, b))
}

pub(super) fn dead_rules(policy: &Policy, sink: &mut Sink<'_>) {
    let denies: Vec<&Rule> = policy
        .rules()
        .iter()
        .filter(|r| r.effect == Effect::Deny)
        .collect();
    for a in policy.rules().iter().filter(|r| r.effect == Effect::Allow) {
        let ops = rule_ops(a);
        let mut dead = Vec::new();
        let mut by = Vec::new();
        for op in &ops {
            // Each glob may be covered by a different deny rule.
            let per_glob: Vec<Option<&Rule>> = if a.globs.is_empty() {
                vec![
                    denies
                        .iter()
                        .copied()
                        .find(|d| deny_covers(policy, d, a, *op)),
                ]
            } else {
                (0..a.globs.len())
                    .map(|i| {
                        let mut one = a.clone();
                        one.globs = vec![a.globs[i].clone()];
                        one.bases = vec![a.bases[i].clone()];
                        denies
                            .iter()
                            .copied()
                            .find(|d| deny_covers(policy, d, &one, *op))
                    })
                    .collect()
            };
            if per_glob.iter().all(Option::is_some) {
                dead.push(*op);
                for d in per_glob.into_iter().flatten() {
                    if !by.contains(&d.id) {
                        by.push(d.id.clone());
                    }
                }
            }
        }
        if dead.is_empty() {
            continue;
        }
        let by = by
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if dead.len() == ops.len() {
            sink.at_rule(
 a,
                Severity::Warning,
                "dead-rule",
                format!(
                    "allow rule `{}` never takes effect: deny rule {by} covers every path it matches for every op it names",
                    a.id
                ),
                "remove the allow rule, or narrow the deny rule if the allow was meant",
            );
        } else {
            sink.at_rule(
                a,
                Severity::Warning,
                "shadowed-ops",
                format!(
                    "ops [{}] of allow rule `{}` are always denied by {by}",
                    op_names(&dead),
                    a.id
                ),
                "drop those ops from the allow rule",
            );
        }
    }
}
