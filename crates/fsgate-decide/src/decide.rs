//! The decision: a pure function of (policy, op class, path, entry kind).
//!
//! Order: secret-name patterns, then deny rules, then ask rules, then allow rules, then
//! `default-deny`. The first match in that order decides, so deny always wins, and ask
//! wins over allow.

use std::borrow::Cow;

use crate::effect::Effect;
use crate::engine::Engine;
use crate::facts::{EntryKind, PathFacts};
use crate::rule::{OpClass, Rule};
use fsgate_base::path::RelPath;

/// The rule id reported when no rule matched.
pub const DEFAULT_DENY: &str = "default-deny";

/// The outcome of a decision, naming the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<'p> {
    /// allow, deny, or ask (a person decides when the request comes).
    pub effect: Effect,
    /// The deciding rule's id (`secrets:<id>`, a `[[rule]]` id, or `default-deny`).
    pub rule: &'p str,
    /// One line saying why.
    pub reason: Cow<'p, str>,
    /// Waived secret-name patterns (`secrets:<id>`) the path matched: without the
    /// `disabled_patterns` waiver they would have denied it. Empty almost always.
    pub waived: Vec<&'p str>,
}

impl Decision<'_> {
    /// True if allowed.
    pub fn allowed(&self) -> bool {
        self.effect == Effect::Allow
    }

    /// True if a person must be asked.
    pub fn asks(&self) -> bool {
        self.effect == Effect::Ask
    }
}

/// One rule considered while deciding, for `fsgate policy explain`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceStep {
    /// Rule id.
    pub rule: String,
    /// Effect it would have.
    pub effect: Effect,
    /// Whether it matched this request.
    pub matched: bool,
    /// Why it matched or not.
    pub note: String,
}

impl Engine {
    /// Decides `op` on `path`. Pure: no filesystem access.
    pub fn decide(&self, op: OpClass, path: &RelPath, kind: EntryKind) -> Decision<'_> {
        self.evaluate(op, path, &PathFacts::kind(kind), None)
    }

    /// Decides `op` on `path`, knowing `facts` (the size, for size conditions).
    pub fn decide_with(&self, op: OpClass, path: &RelPath, facts: &PathFacts) -> Decision<'_> {
        self.evaluate(op, path, facts, None)
    }

    /// Decides, and returns every rule considered in evaluation order.
    pub fn explain(
        &self,
        op: OpClass,
        path: &RelPath,
        facts: &PathFacts,
    ) -> (Decision<'_>, Vec<TraceStep>) {
        let mut trace = Vec::new();
        let d = self.evaluate(op, path, facts, Some(&mut trace));
        (d, trace)
    }

    /// A name is, to a person, the same in its composed (NFC) and decomposed (NFD, as
    /// macOS writes accents) spellings, and, to a deny, in any case (globset folds
    /// ASCII only): a non-ASCII path is decided as spelled, composed and composed
    /// lowercase. A refusal or a question a rule makes in any spelling is the decision;
    /// else an allow as spelled or composed (never lowercase: an allow does not grow by
    /// folding case); else the decision as spelled.
    pub(super) fn evaluate(
        &self,
        op: OpClass,
        path: &RelPath,
        facts: &PathFacts,
        mut trace: Option<&mut Vec<TraceStep>>,
    ) -> Decision<'_> {
        let others = other_spellings(path);
        let given = self.evaluate_spelled(op, path, facts, trace.as_deref_mut());
        if others.is_empty() {
            return given;
        }
        let by_rule = |d: &Decision<'_>| d.effect != Effect::Allow && d.rule != DEFAULT_DENY;
        if by_rule(&given) {
            return given;
        }
        let mut allowed = (given.effect == Effect::Allow).then_some(given);
        for (spelled, may_allow) in others {
            let d = self.evaluate_spelled(op, &spelled, facts, None);
            if by_rule(&d) {
                if let Some(t) = trace.as_deref_mut() {
                    t.push(TraceStep {
                        rule: d.rule.into(),
                        effect: d.effect,
                        matched: true,
                        note: format!("decided on the path spelled `{}`", spelled.as_str()),
                    });
                }
                return d;
            }
            if allowed.is_none() && may_allow && d.effect == Effect::Allow {
                allowed = Some(d);
            }
        }
        allowed.unwrap_or_else(|| self.evaluate_spelled(op, path, facts, None))
    }

    /// [`evaluate`](Self::evaluate) of the path as spelled.
    fn evaluate_spelled(
        &self,
        op: OpClass,
        path: &RelPath,
        facts: &PathFacts,
        mut trace: Option<&mut Vec<TraceStep>>,
    ) -> Decision<'_> {
        // 0. The fixed floor: fsgate's own files, whatever the rules say.
        if let Some(refused) = self.floor_decision(op, path, trace.as_deref_mut()) {
            return refused;
        }
        // 1. Secret names, on every component.
        if let Some(refused) = self.secret_decision(path, trace.as_deref_mut()) {
            return refused;
        }
        let waived = self.waived_on(path, trace.as_deref_mut());
        // 2. Deny rules, then 3. ask rules, then 4. allow rules, each in file order.
        if let Some(rule) = self.first_rule(op, path, facts, trace.as_deref_mut()) {
            let reason = match &rule.reason {
                Some(r) => Cow::Borrowed(r.as_str()),
                None => Cow::Owned(format!(
                    "{} rule `{}` covers {} on this path",
                    rule.effect.as_str(),
                    rule.id,
                    op.as_str()
                )),
            };
            return Decision {
                effect: rule.effect,
                rule: &rule.id,
                reason,
                waived,
            };
        }
        if let Some(t) = trace {
            t.push(TraceStep {
                rule: DEFAULT_DENY.into(),
                effect: Effect::Deny,
                matched: true,
                note: "no rule allowed this operation on this path".into(),
            });
        }
        Decision {
            effect: Effect::Deny,
            rule: DEFAULT_DENY,
            reason: Cow::Owned(format!("no rule allows {} on this path", op.as_str())),
            waived,
        }
    }

    /// The refusal when `op` on `path` touches one of fsgate's own files.
    fn floor_decision(
        &self,
        op: OpClass,
        path: &RelPath,
        trace: Option<&mut Vec<TraceStep>>,
    ) -> Option<Decision<'_>> {
        let f = self.floor.touches(op, path)?;
        let rule = f.kind.rule_id();
        let note = format!("`{}` is {}, fsgate's own file", f.path, f.kind.as_str());
        if let Some(t) = trace {
            t.push(TraceStep {
                rule: rule.into(),
                effect: Effect::Deny,
                matched: true,
                note: note.clone(),
            });
        }
        Some(Decision {
            effect: Effect::Deny,
            rule,
            reason: Cow::Owned(format!("{note}; no policy can open it")),
            waived: Vec::new(),
        })
    }

    /// The refusal when a component of `path` matches a secret-name pattern (each
    /// pattern traced, matched or not).
    fn secret_decision(
        &self,
        path: &RelPath,
        trace: Option<&mut Vec<TraceStep>>,
    ) -> Option<Decision<'_>> {
        let secret_hit = match self.secret_component(path) {
            Ok(hit) => hit,
            Err(refused) => return Some(refused),
        };
        if let Some(t) = trace {
            for (i, p) in self.secrets.patterns.iter().enumerate() {
                let matched = secret_hit.is_some_and(|(h, _)| h == i);
                t.push(TraceStep {
                    rule: p.id.clone(),
                    effect: Effect::Deny,
                    matched,
                    note: format!(
                        "secret-name pattern /{}/ on each path component{}",
                        p.source,
                        crate::secrets::left_out(p)
                    ),
                });
            }
        }
        let (i, comp) = secret_hit?;
        let p = &self.secrets.patterns[i];
        Some(Decision {
            effect: Effect::Deny,
            rule: &p.id,
            reason: Cow::Owned(format!(
                "`{comp}` matches the secret-name pattern /{}/",
                p.source
            )),
            waived: Vec::new(),
        })
    }

    /// The first rule covering `op` on `path`: deny rules, then ask, then allow, each
    /// in file order (every rule tried is traced).
    fn first_rule(
        &self,
        op: OpClass,
        path: &RelPath,
        facts: &PathFacts,
        mut trace: Option<&mut Vec<TraceStep>>,
    ) -> Option<&Rule> {
        for effect in [Effect::Deny, Effect::Ask, Effect::Allow] {
            for rule in self.rules.iter().filter(|r| r.effect == effect) {
                let miss = rule_misses(rule, op, path, facts);
                if let Some(t) = trace.as_deref_mut() {
                    t.push(TraceStep {
                        rule: rule.id.clone(),
                        effect,
                        matched: miss.is_none(),
                        note: note(rule, op, facts, miss),
                    });
                }
                if miss.is_none() {
                    return Some(rule);
                }
            }
        }
        None
    }

    /// The first component of `path` a secret-name pattern matches, and which pattern;
    /// Err: the patterns cannot be compiled, and the refusal that says so (fail closed).
    fn secret_component<'a>(
        &self,
        path: &'a RelPath,
    ) -> Result<Option<(usize, &'a str)>, Decision<'_>> {
        for comp in path.components() {
            match self.secrets.first_match(comp) {
                Ok(None) => {}
                Ok(Some(i)) => return Ok(Some((i, comp))),
                Err(why) => {
                    let rule = self
                        .secrets
                        .patterns
                        .first()
                        .map_or(DEFAULT_DENY, |p| &p.id);
                    return Err(Decision {
                        effect: Effect::Deny,
                        rule,
                        reason: Cow::Owned(format!(
                            "the secret-name patterns cannot be compiled ({why}): nothing is allowed"
                        )),
                        waived: Vec::new(),
                    });
                }
            }
        }
        Ok(None)
    }

    /// The waived secret-name patterns some component of `path` matches (and, for
    /// `explain`, one trace step per waived pattern).
    fn waived_on(&self, path: &RelPath, trace: Option<&mut Vec<TraceStep>>) -> Vec<&str> {
        let Some(set) = &self.waivers.set else {
            return Vec::new();
        };
        let mut hit = vec![false; self.waivers.patterns.len()];
        for comp in path.components().filter(|c| set.is_match(c)) {
            for i in set.matches(comp).iter() {
                // A name the pattern leaves out was no secret to waive.
                let out = (self.waivers.patterns.get(i))
                    .is_some_and(|p| p.builtin && crate::secrets::leaves_out(&p.id, comp));
                if let Some(h) = hit.get_mut(i).filter(|_| !out) {
                    *h = true;
                }
            }
        }
        if let Some(t) = trace {
            for (p, matched) in self.waivers.patterns.iter().zip(hit.iter().copied()) {
                t.push(TraceStep {
                    rule: p.id.clone(),
                    effect: Effect::Deny,
                    matched: false,
                    note: format!(
                        "secret-name pattern /{}/ waived by disabled_patterns{}",
                        p.source,
                        if matched {
                            " (it matches this path: the waiver lets it through)"
                        } else {
                            ""
                        }
                    ),
                });
            }
        }
        self.waivers
            .patterns
            .iter()
            .zip(hit.iter().copied())
            .filter(|(_, h)| *h)
            .map(|(p, _)| p.id.as_str())
            .collect()
    }
}

/// Why a rule does not apply to a request. The note `explain` shows is built from it
/// only when a trace is asked for: deciding allocates nothing per rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Miss {
    /// The rule does not cover the op class.
    Op,
    /// No glob matches the path.
    Paths,
    /// The rule's condition at this index does not hold (for a size condition: or,
    /// for a deny, the size is not known yet).
    Condition(usize),
}

/// None if `rule` applies to `op` on `path`, else why not.
fn rule_misses(rule: &Rule, op: OpClass, path: &RelPath, facts: &PathFacts) -> Option<Miss> {
    rule_misses_known(rule, op, path, facts, false)
}

/// [`rule_misses`], told when the rule's globs are already known to match `path`.
pub(super) fn rule_misses_known(
    rule: &Rule,
    op: OpClass,
    path: &RelPath,
    facts: &PathFacts,
    globs_match: bool,
) -> Option<Miss> {
    let kind = facts.kind;
    if !rule.ops[op as usize] {
        return Some(Miss::Op);
    }
    let path_ok = match &rule.paths {
        None => true,
        Some(_) if globs_match => true,
        Some(set) => {
            set.is_match(path.as_str())
                || (rule.effect == Effect::Allow
                    && op == OpClass::List
                    && kind != EntryKind::File
                    && is_ancestor_of_base(rule, path))
        }
    };
    if !path_ok {
        return Some(Miss::Paths);
    }
    if let Some(i) = rule
        .conditions
        .iter()
        .position(|c| !c.holds(rule.effect, path, facts))
    {
        return Some(Miss::Condition(i));
    }
    None
}

/// The trace note for `rule` on `op`, for `explain`.
fn note(rule: &Rule, op: OpClass, facts: &PathFacts, miss: Option<Miss>) -> String {
    match miss {
        None if facts.size.is_none() && rule.has_size() => {
            "matches (its size condition is judged once the size is known)".into()
        }
        None => "matches".into(),
        Some(Miss::Condition(i)) => rule.conditions[i].miss_note(facts),
        Some(Miss::Op) => format!("does not cover {}", op.as_str()),
        Some(Miss::Paths) => format!("paths {:?} do not match", rule.globs),
    }
}

/// Listing a directory that leads towards an allowed subtree is allowed (so `src/**`
/// lets the agent list the root and see `src`); the entries are filtered separately.
/// The caller applies this to directories (and not-yet-known kinds) only: a file leads
/// nowhere, so an allow on `b.md/x` does not show the file `b.md`.
fn is_ancestor_of_base(rule: &Rule, path: &RelPath) -> bool {
    rule.bases.iter().any(|base| base.starts_with(path))
}

/// The other spellings of a non-ASCII `path` a decision looks at, each with whether an
/// allow in it counts: composed (NFC; it does), composed lowercase (it does not).
pub(crate) fn other_spellings(path: &RelPath) -> Vec<(RelPath, bool)> {
    use unicode_normalization::UnicodeNormalization;
    let given = path.as_str();
    if given.is_ascii() {
        return Vec::new();
    }
    let composed: String = given.nfc().collect();
    let folded = composed.to_lowercase();
    let mut out = Vec::new();
    for (text, may_allow) in [(composed, true), (folded, false)] {
        if text != given
            && out
                .iter()
                .all(|(p, _): &(RelPath, bool)| p.as_str() != text)
        {
            out.extend(RelPath::parse_rooted(&text).ok().map(|p| (p, may_allow)));
        }
    }
    out
}
