//! Deciding a whole operation: every directory above the path it needs listable, then
//! its own classes, deny over ask over allow; a refusal names the step that refused.

use std::borrow::Cow;

use super::{Access, AccessStep};
use crate::decide::{Decision, TraceStep};
use crate::effect::Effect;
use crate::engine::Engine;
use crate::facts::{EntryKind, PathFacts};
use crate::rule::{OpClass, Rule};
use fsgate_base::path::RelPath;

impl Engine {
    /// True if some rule has a size condition: the gateway then decides again once it
    /// knows a file's size.
    pub fn has_size_rules(&self) -> bool {
        self.rules.iter().any(Rule::has_size)
    }

    /// Decides a whole operation on `path`: every directory above it the operation
    /// needs listable, then its own classes. The gateway, `explain` and `[[test]]`
    /// decide through this.
    pub fn decide_access(&self, op: Access, path: &RelPath, facts: &PathFacts) -> Decision<'_> {
        // Deny on any step decides at once; otherwise the first ask holds over allow.
        let mut ask = None;
        for dir in op.above(path) {
            let d = self.decide(OpClass::List, &dir, EntryKind::Dir);
            match d.effect {
                Effect::Allow => {}
                Effect::Ask if ask.is_some() => {}
                Effect::Ask => ask = Some(composite_refusal(op, OpClass::List, &dir, d)),
                Effect::Deny => return composite_refusal(op, OpClass::List, &dir, d),
            }
        }
        let own = self.decide_entry(op, path, facts);
        match ask {
            Some(asked) if own.effect != Effect::Deny => asked,
            _ => own,
        }
    }

    /// Decides `op`'s own checks on `path`, the directories above it already allowed
    /// (a walk calls this per entry: it entered only directories it could list).
    pub fn decide_entry(&self, op: Access, path: &RelPath, facts: &PathFacts) -> Decision<'_> {
        let facts = if op == Access::Mkdir {
            &PathFacts::kind(EntryKind::Dir)
        } else {
            facts
        };
        let (first, second) = op.own(facts.kind);
        let d = self.decide_with(first, path, facts);
        let Some(second) = second else {
            return d;
        };
        if d.effect == Effect::Deny {
            return composite_refusal(op, first, path, d);
        }
        let d2 = self.decide_with(second, path, facts);
        // Deny over ask over allow; between equals, the operation's primary class.
        if d.effect.weight() > d2.effect.weight() {
            return composite_refusal(op, first, path, d);
        }
        match (d2.allowed(), first == op.primary()) {
            (false, _) => composite_refusal(op, second, path, d2),
            (true, true) => d,
            (true, false) => d2,
        }
    }

    /// `Engine::decide_access` with each step's trace, for `explain`.
    pub fn explain_access(
        &self,
        op: Access,
        path: &RelPath,
        facts: &PathFacts,
    ) -> (Decision<'_>, Vec<(AccessStep, Vec<TraceStep>)>) {
        let mut traced = Vec::new();
        for step in op.steps(path, facts) {
            let step_facts = if step.dir {
                PathFacts::kind(EntryKind::Dir)
            } else {
                *facts
            };
            let (d, trace) = self.explain(step.class, &step.path, &step_facts);
            let refused = !d.allowed();
            traced.push((step, trace));
            if refused {
                break;
            }
        }
        (self.decide_access(op, path, facts), traced)
    }
}

/// A refusal of one step of a composite operation, saying which step.
fn composite_refusal<'p>(
    op: Access,
    class: OpClass,
    path: &RelPath,
    d: Decision<'p>,
) -> Decision<'p> {
    if op == Access::Class(class) {
        return d;
    }
    let shown = if path.is_root() { "/" } else { path.as_str() };
    Decision {
        reason: Cow::Owned(format!(
            "{} needs {} on `{shown}`: {}",
            op.as_str(),
            class.as_str(),
            d.reason
        )),
        ..d
    }
}
