//! `fsgate policy diff`: which decisions change between two policies, over a set of paths
//! (a workspace's real tree, or the paths both policies' tests mention).

use std::path::Path;

use super::raw::Effect;
use super::testrun::{FullDecision, decide_with_content};
use super::{EntryKind, OpClass, Policy};
use crate::path::RelPath;

/// One (op, path) whose effect differs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Change {
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
    /// True if the new policy allows what the old one denied.
    pub fn widens(&self) -> bool {
        self.new.effect == Effect::Allow
    }
}

/// The comparison.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DiffReport {
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
pub fn diff(old: &Policy, new: &Policy, paths: &[(RelPath, EntryKind)]) -> DiffReport {
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
pub fn test_paths(policies: &[&Policy]) -> Vec<(RelPath, EntryKind)> {
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
pub fn workspace_paths(
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

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = r#"version = 1
[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]

[[test]]
op = "read"
path = "src/a.rs"
expect = "allow"
"#;

    const NEW: &str = r#"version = 1
[[rule]]
id = "read-src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]

[[rule]]
id = "write-docs"
effect = "allow"
ops = ["write"]
paths = ["docs/**"]

[[test]]
op = "write"
path = "docs/guide.md"
expect = "allow"
"#;

    #[test]
    fn changes_over_test_paths() {
        let old = Policy::from_toml(OLD, "old").unwrap();
        let new = Policy::from_toml(NEW, "new").unwrap();
        let paths = test_paths(&[&old, &new]);
        let names: Vec<&str> = paths.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, vec!["", "docs", "docs/guide.md", "src", "src/a.rs"]);
        let r = diff(&old, &new, &paths);
        let got: Vec<(bool, &str, &str)> = r
            .changes
            .iter()
            .map(|c| (c.widens(), c.op.as_str(), c.path.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (true, "write", "docs/guide.md"),
                (false, "read", ""),
                (false, "read", "docs"),
                (false, "list", "docs"),
                (false, "read", "docs/guide.md"),
                (false, "list", "docs/guide.md"),
                // `src/**` covers what lies beneath src, not src itself (listing it is
                // allowed as an ancestor, reading it as a file is not).
                (false, "read", "src"),
            ]
        );
        // `src/a.rs` is still readable, now by another rule.
        assert!(
            r.rule_changes
                .iter()
                .any(|c| c.path == "src/a.rs" && c.new.rule == "read-src")
        );
    }

    #[test]
    fn workspace_walk_does_not_follow_symlinks_and_stops_at_max() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/f.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("a/root")).unwrap();
        let (paths, truncated) = workspace_paths(dir.path(), 100).unwrap();
        let names: Vec<(&str, EntryKind)> = paths.iter().map(|(p, k)| (p.as_str(), *k)).collect();
        assert!(!truncated);
        assert_eq!(
            names,
            vec![
                ("", EntryKind::Dir),
                ("a", EntryKind::Dir),
                ("a/b", EntryKind::Dir),
                ("a/root", EntryKind::Unknown),
                ("a/b/f.txt", EntryKind::File),
            ]
        );
        let (paths, truncated) = workspace_paths(dir.path(), 2).unwrap();
        assert!(truncated && paths.len() == 2);
    }
}
