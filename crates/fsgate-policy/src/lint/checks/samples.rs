//! Concrete paths a rule matches, and what the policy decides on them: the probes the
//! checks ask the real decision function about.

use crate::{EntryKind, OpClass, Policy, Rule};
use fsgate_base::path::RelPath;

pub(super) fn allows(p: &Policy, op: OpClass, path: &RelPath) -> bool {
    p.decide(op, path, EntryKind::File).allowed()
}

pub(super) fn rule_ops(r: &Rule) -> Vec<OpClass> {
    OpClass::ALL
        .into_iter()
        .filter(|o| r.ops[*o as usize])
        .collect()
}

pub(super) fn is_literal(s: &str) -> bool {
    !s.contains(['*', '?', '[', '{', '\\'])
}

/// A concrete path a glob matches: wildcards replaced by `x`, classes by a member,
/// alternatives by the first one.
pub(crate) fn concretize(glob: &str) -> String {
    let first = crate::lint::globs::expand_braces(glob.trim_start_matches('/'))
        .into_iter()
        .next()
        .unwrap_or_default();
    crate::lint::globs::fill(&first, "x")
}

/// Concrete files a rule matches: each glob made concrete, and a file beneath it with
/// one of the rule's extensions.
pub(super) fn samples(rule: &Rule) -> Vec<RelPath> {
    let ext = rule
        .extensions()
        .and_then(|e| e.first().cloned())
        .unwrap_or_else(|| "txt".into());
    let globs: Vec<String> = if rule.globs.is_empty() {
        vec!["x".into()]
    } else {
        rule.globs.iter().map(|g| concretize(g)).collect()
    };
    let mut out = Vec::new();
    for g in globs {
        for s in [g.clone(), format!("{g}/x.{ext}"), format!("{g}.{ext}")] {
            if let Ok(p) = RelPath::parse_rooted(&format!("/{s}"))
                && !p.is_root()
                && !out.contains(&p)
            {
                out.push(p);
            }
        }
    }
    out
}
