//! `fsgate policy diff`: everything that loosens or tightens between two policies.
//!
//! Decisions on a set of paths (a workspace's real tree, or the paths both policies'
//! tests mention), then `[limits]`, secret-name patterns, content rules (and, over a
//! workspace, which files' content now passes), the rules themselves, and the other
//! sections key by key. Each difference is an [`Item`] marked loosens, tightens or
//! changes (direction unclear).

mod decisions;
mod files;
mod rules;
pub(crate) mod sections;
mod settings;
#[cfg(test)]
mod tests;

use super::Policy;
use super::full_decision::FullDecision;

pub(crate) use decisions::{DiffReport, decision_items, diff, test_paths, workspace_paths};
pub(crate) use files::{FileScan, content_files};

/// Which way a difference moves access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Direction {
    /// The new policy lets through something the old one refused (or weakens a
    /// safeguard).
    Loosens,
    /// The new policy refuses something the old one let through.
    Tightens,
    /// Different, without a clear direction.
    Changes,
}

impl Direction {
    /// The word shown in the report.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Direction::Loosens => "loosens",
            Direction::Tightens => "tightens",
            Direction::Changes => "changes",
        }
    }

    /// `Loosens` if `wider` (more is let through), else `Tightens`.
    fn wider(wider: bool) -> Direction {
        if wider {
            Direction::Loosens
        } else {
            Direction::Tightens
        }
    }
}

/// One difference between the two policies.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Item {
    /// Loosens, tightens or changes.
    pub direction: Direction,
    /// What part of the policy: `decision`, `limits`, `secrets`, `content`,
    /// `content-file`, `rule`, or a section name (`audit`, `agent`, ...).
    pub area: String,
    /// What changed: a key, a rule or pattern id, `op path`.
    pub subject: String,
    /// Under the old policy (`(unset)`, `(absent)` when it had none).
    pub old: String,
    /// Under the new policy.
    pub new: String,
}

impl Item {
    fn new(
        direction: Direction,
        area: &str,
        subject: impl Into<String>,
        old: impl Into<String>,
        new: impl Into<String>,
    ) -> Item {
        Item {
            direction,
            area: area.to_string(),
            subject: subject.into(),
            old: old.into(),
            new: new.into(),
        }
    }
}

/// Every difference outside the decisions on a tree: limits, secret names, content
/// rules, rules, and the other sections. `*_text` are the policies' TOML texts (for keys
/// the compiled policy does not keep).
pub(crate) fn setting_items(
    old: &Policy,
    old_text: &str,
    new: &Policy,
    new_text: &str,
) -> Vec<Item> {
    let mut out = Vec::new();
    settings::limits(old.limits(), new.limits(), &mut out);
    settings::secrets(old.secret_patterns(), new.secret_patterns(), &mut out);
    settings::content(old, new, &mut out);
    rules::rules(old, old_text, new, new_text, &mut out);
    sections::sections(
        (old_text, old.base_texts()),
        (new_text, new.base_texts()),
        &mut out,
    );
    out
}

/// `allow (rule)`.
fn shown(d: &FullDecision) -> String {
    format!(
        "{} ({})",
        super::full_decision::effect_name(d.effect),
        d.rule
    )
}

/// Sorts items loosening first, keeping each direction's items in the order found.
pub(crate) fn sort_items(items: &mut [Item]) {
    items.sort_by_key(|i| i.direction);
}
