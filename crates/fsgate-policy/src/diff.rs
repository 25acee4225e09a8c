//! `fsgate policy diff`: everything that loosens or tightens between two policies.
//!
//! Decisions on a set of paths (a workspace's real tree, or the paths both policies'
//! tests mention), then `[limits]`, secret-name patterns, content rules (and, over a
//! workspace, which files' content now passes), the rules themselves, and the other
//! sections key by key. Each difference is an [`Item`] marked loosens, tightens or
//! changes (direction unclear).

mod decisions;
mod files;
pub(crate) mod item;
mod rules;
pub(crate) mod sections;
mod settings;
#[cfg(test)]
mod tests;

use super::Policy;
use item::Item;

pub(crate) use decisions::{DiffReport, decision_items, diff, test_paths, workspace_paths};
pub(crate) use files::{FileScan, content_files};

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

/// Sorts items loosening first, keeping each direction's items in the order found.
pub(crate) fn sort_items(items: &mut [Item]) {
    items.sort_by_key(|i| i.direction);
}
