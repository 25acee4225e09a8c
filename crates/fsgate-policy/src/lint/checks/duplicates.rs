//! `duplicate-rule`: two rules with the same effect, ops, paths and conditions.

use crate::lint::findings::{Severity, Sink};
use crate::{Policy, Rule};
use fsgate_decide::Condition;

pub(super) fn duplicates(policy: &Policy, sink: &mut Sink<'_>) {
    let key = |r: &Rule| {
        let mut g = r.globs.clone();
        g.sort();
        // Every condition, an extension list in any order.
        let conditions: Vec<Condition> = r
            .conditions
            .iter()
            .map(|c| match c {
                Condition::Extension(e) => {
                    let mut e = e.clone();
                    e.sort();
                    Condition::Extension(e)
                }
                c => c.clone(),
            })
            .collect();
        (r.effect, r.ops, g, conditions)
    };
    let rules = policy.rules();
    for (i, r) in rules.iter().enumerate() {
        if let Some(first) = rules[..i].iter().find(|f| key(f) == key(r)) {
            sink.at_rule(
 r,
                Severity::Warning,
                "duplicate-rule",
                format!(
                    "rule `{}` duplicates rule `{}` (line {}): same effect, ops, paths, extensions and size range",
                    r.id, first.id, first.line
                ),
                "remove one of them",
            );
        }
    }
}
