//! The decision: a pure function of (policy, op class, path, entry kind).
//!
//! Order: secret-name patterns, then deny rules, then ask rules, then allow rules, then
//! `default-deny`. The first match in that order decides, so deny always wins, and ask
//! wins over allow.

use std::borrow::Cow;

use crate::engine::Engine;
use crate::rule::{Effect, OpClass, Rule};
use fsgate_base::path::RelPath;

/// The rule id reported when no rule matched.
pub const DEFAULT_DENY: &str = "default-deny";

/// What kind of entry a path names, when the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (or a file about to be created).
    File,
    /// A directory: extension conditions of allow rules do not apply to it.
    Dir,
    /// Not known yet (checked before touching the filesystem); allow rules' extension
    /// conditions are deferred to the second check, deny rules apply in full.
    Unknown,
}

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

/// What the caller knows about a path besides its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathFacts {
    /// File, directory, or not known yet.
    pub kind: EntryKind,
    /// A file's size in bytes (for a write, the larger of its current and new size);
    /// None before it is known: rules with a size condition are then deferred (an
    /// allow's condition counts as met, a deny does not apply yet), and the caller
    /// decides again once it knows the size.
    pub size: Option<u64>,
}

impl PathFacts {
    /// `kind`, size unknown.
    pub fn kind(kind: EntryKind) -> PathFacts {
        PathFacts { kind, size: None }
    }

    /// A file of `size` bytes.
    pub fn file(size: u64) -> PathFacts {
        PathFacts {
            kind: EntryKind::File,
            size: Some(size),
        }
    }
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

    pub(super) fn evaluate(
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
                    note: format!("secret-name pattern /{}/ on each path component", p.source),
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
                if let Some(h) = hit.get_mut(i) {
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
    /// The file's extension is not listed.
    Extension,
    /// The size condition is not met (or, for a deny, the size is not known yet).
    Size,
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
    if let Some(exts) = &rule.extensions {
        let check = match (rule.effect, kind) {
            // An ask must not be put to a person for a path the rule may not cover.
            (Effect::Deny | Effect::Ask, _) => true,
            (Effect::Allow, EntryKind::File) => true,
            (Effect::Allow, _) => false,
        };
        // The listed extensions are ASCII-lowercased at compile time.
        let listed = |e: &str| exts.iter().any(|x| e.eq_ignore_ascii_case(x));
        if check && !path.extension().is_some_and(listed) {
            return Some(Miss::Extension);
        }
    }
    if !size_applies(rule, facts) {
        return Some(Miss::Size);
    }
    None
}

/// Whether `rule`'s size condition (if any) holds. Directories never meet one; an
/// unknown size defers it: an allow's counts as met, a deny's as not (yet).
fn size_applies(rule: &Rule, facts: &PathFacts) -> bool {
    if rule.min_size.is_none() && rule.max_size.is_none() {
        return true;
    }
    match (facts.kind, facts.size) {
        (EntryKind::Dir, _) => false,
        (_, Some(s)) => {
            rule.min_size.is_none_or(|m| s >= m) && rule.max_size.is_none_or(|m| s <= m)
        }
        (_, None) => rule.effect == Effect::Allow,
    }
}

/// The trace note for `rule` on `op`, for `explain`.
fn note(rule: &Rule, op: OpClass, facts: &PathFacts, miss: Option<Miss>) -> String {
    match miss {
        None if facts.size.is_none() && has_size(rule) => {
            "matches (its size condition is judged once the size is known)".into()
        }
        None => "matches".into(),
        Some(Miss::Size) => size_note(rule, facts),
        Some(Miss::Op) => format!("does not cover {}", op.as_str()),
        Some(Miss::Paths) => format!("paths {:?} do not match", rule.globs),
        Some(Miss::Extension) => {
            format!(
                "extension not in {:?}",
                rule.extensions.as_deref().unwrap_or_default()
            )
        }
    }
}

fn has_size(rule: &Rule) -> bool {
    rule.min_size.is_some() || rule.max_size.is_some()
}

/// Why a size condition did not apply.
fn size_note(rule: &Rule, facts: &PathFacts) -> String {
    let cond = match (rule.min_size, rule.max_size) {
        (Some(a), Some(b)) => format!("{a}..={b} bytes"),
        (Some(a), None) => format!(">= {a} bytes"),
        (None, b) => format!("<= {} bytes", b.unwrap_or(u64::MAX)),
    };
    match (facts.kind, facts.size) {
        (EntryKind::Dir, _) => format!("size condition ({cond}) applies to files only"),
        (_, Some(s)) => format!("size {s} not {cond}"),
        (_, None) => format!("size not known yet; applies once it is ({cond})"),
    }
}

/// Listing a directory that leads towards an allowed subtree is allowed (so `src/**`
/// lets the agent list the root and see `src`); the entries are filtered separately.
/// The caller applies this to directories (and not-yet-known kinds) only: a file leads
/// nowhere, so an allow on `b.md/x` does not show the file `b.md`.
fn is_ancestor_of_base(rule: &Rule, path: &RelPath) -> bool {
    rule.bases.iter().any(|base| base.starts_with(path))
}
