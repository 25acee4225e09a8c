//! Decisions on a set of paths: which paths (those the policies' tests name, or a
//! workspace's real tree), every op class on each decided under both policies, and the
//! changes as items.

use std::path::Path;

use super::item::{Direction, Item};
use crate::full_decision::{FullDecision, decide_with_content, shown};
use crate::{EntryKind, OpClass, Policy};
use fsgate_base::path::RelPath;

/// The decision changes of `r` as items (`decision` area, subject `op path`).
pub(crate) fn decision_items(r: &DiffReport) -> Vec<Item> {
    r.changes
        .iter()
        .map(|c| {
            let path = if c.path.is_empty() { "/" } else { &c.path };
            let slash = if c.dir && !c.path.is_empty() { "/" } else { "" };
            Item::new(
                Direction::wider(c.widens()),
                "decision",
                format!("{} {path}{slash}", c.op.as_str()),
                shown(&c.old),
                shown(&c.new),
            )
        })
        .collect()
}

/// One (op, path) whose effect differs.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Change {
    /// The operation class.
    pub op: OpClass,
    /// Workspace-relative path (`""` is the root).
    pub path: String,
    /// Whether the path was judged as a directory.
    pub dir: bool,
    /// Under the old policy.
    pub old: FullDecision,
    /// Under the new policy.
    pub new: FullDecision,
}

impl Change {
    /// True if the new policy lets through more than the old one: deny > ask > allow, so
    /// deny -> ask and ask -> allow widen, allow -> ask narrows.
    pub(crate) fn widens(&self) -> bool {
        self.new.effect.weight() < self.old.effect.weight()
    }
}

/// The comparison.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct DiffReport {
    /// Paths compared (each under every op class).
    pub paths: usize,
    /// Effect changes, widening ones first, then by path and op.
    pub changes: Vec<Change>,
    /// Decisions with the same effect but another deciding rule.
    pub rule_changes: Vec<Change>,
    /// The workspace walk stopped at the path limit.
    pub truncated: bool,
}

/// Compares `old` and `new` on every op class of every path.
pub(crate) fn diff(old: &Policy, new: &Policy, paths: &[(RelPath, EntryKind)]) -> DiffReport {
    let mut report = DiffReport {
        paths: paths.len(),
        ..DiffReport::default()
    };
    for (path, kind) in paths {
        for op in OpClass::ALL {
            let a = decide_with_content(old, op, path, *kind, None);
            let b = decide_with_content(new, op, path, *kind, None);
            if a == b {
                continue;
            }
            let change = Change {
                op,
                path: path.as_str().to_string(),
                dir: *kind == EntryKind::Dir,
                old: a,
                new: b,
            };
            if change.old.effect == change.new.effect {
                report.rule_changes.push(change);
            } else {
                report.changes.push(change);
            }
        }
    }
    report.changes.sort_by(|x, y| {
        (!x.widens(), &x.path, x.op as usize).cmp(&(!y.widens(), &y.path, y.op as usize))
    });
    report
}

/// The paths the policies' `[[test]]` cases name, with their ancestor directories.
pub(crate) fn test_paths(policies: &[&Policy]) -> Vec<(RelPath, EntryKind)> {
    let mut out: Vec<(RelPath, EntryKind)> = Vec::new();
    let mut push = |p: RelPath, k: EntryKind| {
        if !out.iter().any(|(q, _)| *q == p) {
            out.push((p, k));
        }
    };
    for pol in policies {
        for t in &pol.raw().tests {
            let Ok(p) = RelPath::parse_rooted(&t.path) else {
                continue;
            };
            let mut anc = p.parent();
            while let Some(a) = anc {
                anc = a.parent();
                push(a, EntryKind::Dir);
            }
            push(
                p,
                if t.dir {
                    EntryKind::Dir
                } else {
                    EntryKind::File
                },
            );
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every entry of the tree at `root` (not following symlinks), up to `max` entries.
///
/// # Ambient Authority
/// Walks `root` on the ambient filesystem (an authoring tool, not the gateway).
pub(crate) fn workspace_paths(
    root: &Path,
    max: usize,
) -> std::io::Result<(Vec<(RelPath, EntryKind)>, bool)> {
    let mut out = vec![(RelPath::root(), EntryKind::Dir)];
    let mut stack = vec![(root.to_path_buf(), RelPath::root())];
    std::fs::read_dir(root)?;
    while let Some((dir, rel)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if out.len() >= max {
                return Ok((out, true));
            }
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let child = rel.join(&name);
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => {
                    stack.push((e.path(), child.clone()));
                    EntryKind::Dir
                }
                Ok(t) if t.is_file() => EntryKind::File,
                _ => EntryKind::Unknown,
            };
            out.push((child, kind));
        }
    }
    Ok((out, false))
}
