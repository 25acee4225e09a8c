//! What a rule matches on besides its op classes and its paths. A new condition is a
//! variant here (how it holds, what `explain` says when it does not, how a rule that
//! replaces one through `extends` stays within it), its key in the policy file
//! (`fsgate-policy/src/raw.rs`) and its parse (`fsgate-policy/src/compile.rs`).

use fsgate_base::path::RelPath;

use crate::effect::Effect;
use crate::facts::{EntryKind, PathFacts};

/// One condition of a rule; a rule applies only where all of its conditions hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The file's extension is one of these (ASCII-lowercased, no dot). An allow's
    /// does not apply to a directory; a deny's and an ask's apply to every path.
    Extension(Vec<String>),
    /// The file's size lies within `min..=max` bytes. A directory never meets it; an
    /// unknown size defers it: an allow's counts as met, a deny's as not (yet).
    Size {
        /// At least this many bytes.
        min: Option<u64>,
        /// At most this many bytes.
        max: Option<u64>,
    },
}

impl Condition {
    /// Whether the condition holds for a rule of `effect` on `path`.
    pub(crate) fn holds(&self, effect: Effect, path: &RelPath, facts: &PathFacts) -> bool {
        match self {
            Condition::Extension(exts) => {
                // An ask must not be put to a person for a path the rule may not cover.
                let check = effect != Effect::Allow || facts.kind == EntryKind::File;
                let listed = |e: &str| exts.iter().any(|x| e.eq_ignore_ascii_case(x));
                !check || path.extension().is_some_and(listed)
            }
            Condition::Size { min, max } => match (facts.kind, facts.size) {
                (EntryKind::Dir, _) => false,
                (_, Some(s)) => min.is_none_or(|m| s >= m) && max.is_none_or(|m| s <= m),
                (_, None) => effect == Effect::Allow,
            },
        }
    }

    /// Whether the condition is judged only once the size is known.
    pub fn needs_size(&self) -> bool {
        matches!(self, Condition::Size { .. })
    }

    /// Why the condition did not hold, for `explain`.
    pub(crate) fn miss_note(&self, facts: &PathFacts) -> String {
        match self {
            Condition::Extension(exts) => format!("extension not in {exts:?}"),
            Condition::Size { min, max } => {
                let cond = match (min, max) {
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
        }
    }

    /// Ok if a rule whose condition of this kind is `narrower` (None: it has none)
    /// reaches nothing this one does not; else why it does. A rule replacing a base
    /// rule through `extends` must stay within each of the base rule's conditions.
    pub fn within(&self, narrower: Option<&Condition>) -> Result<(), String> {
        match (self, narrower) {
            (Condition::Extension(be), p) => {
                let pe = match p {
                    Some(Condition::Extension(pe)) => Some(pe),
                    _ => None,
                };
                if pe.is_some_and(|pe| pe.iter().all(|e| be.contains(e))) {
                    Ok(())
                } else {
                    Err(format!("it matches extensions beyond {be:?}"))
                }
            }
            (
                Condition::Size {
                    min: bmin,
                    max: bmax,
                },
                p,
            ) => {
                let (pmin, pmax) = match p {
                    Some(Condition::Size { min, max }) => (*min, *max),
                    _ => (None, None),
                };
                if let Some(bm) = bmin.filter(|bm| pmin.is_none_or(|pm| pm < *bm)) {
                    return Err(format!(
                        "it reaches files smaller than the base rule's min_size {bm}"
                    ));
                }
                if let Some(bm) = bmax.filter(|bm| pmax.is_none_or(|pm| pm > *bm)) {
                    return Err(format!(
                        "it reaches files larger than the base rule's max_size {bm}"
                    ));
                }
                Ok(())
            }
        }
    }

    /// Whether `other` is a condition of the same kind.
    pub fn same_kind(&self, other: &Condition) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}
