//! The fixed floor: fsgate's own files (audit log, backups, the policy file) that no
//! policy can ever open to the agent, even when they lie inside the workspace.
//!
//! The engine checks [`FixedFloor::touches`] before any rule; `policy check` reports a
//! policy that tries to allow them.

use std::path::{Path, PathBuf};

use crate::rule::OpClass;
use fsgate_base::path::RelPath;

/// What a floor entry protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FloorKind {
    /// The active audit log file; its rotated files and sidecars (`<name>.*`) too.
    AuditLog,
    /// The key that signs the log's checkpoints (`[audit] signing_key`).
    SigningKey,
    /// A file the log's checkpoints are copied to (`[audit] checkpoint_sink`).
    CheckpointSink,
    /// The client key of a TLS shipping destination (`[audit] ship`'s `tls_key`).
    ShipKey,
    /// The backup store directory and everything beneath it.
    BackupDir,
    /// fsgate's state directory (`$XDG_STATE_HOME/fsgate`): every workspace's default
    /// audit log and backups, inside a workspace such as `~`.
    StateDir,
    /// The policy file in force (and the gitleaks config it names).
    PolicyFile,
}

impl FloorKind {
    /// A short name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            FloorKind::AuditLog => "the audit log",
            FloorKind::SigningKey => "the audit signing key",
            FloorKind::CheckpointSink => "the audit checkpoint sink",
            FloorKind::ShipKey => "the audit shipping TLS key",
            FloorKind::BackupDir => "the backup store",
            FloorKind::StateDir => {
                "the state directory of every workspace's default log and backups"
            }
            FloorKind::PolicyFile => "the policy file",
        }
    }

    /// The rule id refusals name.
    pub fn rule_id(self) -> &'static str {
        match self {
            FloorKind::AuditLog => "floor:audit-log",
            FloorKind::SigningKey => "floor:audit-signing-key",
            FloorKind::CheckpointSink => "floor:audit-checkpoint-sink",
            FloorKind::ShipKey => "floor:audit-ship-key",
            FloorKind::BackupDir => "floor:backup-dir",
            FloorKind::StateDir => "floor:state-dir",
            FloorKind::PolicyFile => "floor:policy-file",
        }
    }
}

/// One protected path, relative to the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloorEntry {
    /// What it is.
    pub kind: FloorKind,
    /// Where it is in the workspace.
    pub path: RelPath,
}

/// The protected paths that lie inside one workspace.
#[derive(Debug, Clone, Default)]
pub struct FixedFloor {
    entries: Vec<FloorEntry>,
}

impl FixedFloor {
    /// Builds the floor for `workspace_root` from fsgate's own files. Both sides must be
    /// absolute and normalised the same way (canonicalise them at start-up); files
    /// outside the workspace need no floor and are left out.
    pub fn new(workspace_root: &Path, files: &[(FloorKind, &Path)]) -> FixedFloor {
        let entries = files
            .iter()
            .filter_map(|(kind, p)| {
                let rel = p.strip_prefix(workspace_root).ok()?;
                let rel = RelPath::parse_rooted(&format!("/{}", rel.to_str()?)).ok()?;
                Some(FloorEntry {
                    kind: *kind,
                    path: rel,
                })
            })
            .collect();
        FixedFloor { entries }
    }

    /// A floor of entries already made workspace-relative.
    pub fn from_entries(entries: Vec<FloorEntry>) -> FixedFloor {
        FixedFloor { entries }
    }

    /// The protected entries (only those inside the workspace).
    pub fn entries(&self) -> &[FloorEntry] {
        &self.entries
    }

    /// True if nothing is protected (everything lies outside the workspace).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The floor entry `op` on `path` would reach, if any: reading, listing or writing
    /// the entry itself or anything beneath it (and an audit log's `<name>.*` siblings),
    /// and for write and delete also an ancestor directory (renaming or removing it would
    /// take the entry with it). The workspace root itself is never refused here.
    pub fn touches(&self, op: OpClass, path: &RelPath) -> Option<&FloorEntry> {
        let inside = |e: &&FloorEntry| path.starts_with(&e.path) || is_sidecar(e, path);
        if let Some(e) = self.entries.iter().find(inside) {
            return Some(e);
        }
        if !matches!(op, OpClass::Write | OpClass::Delete) || path.is_root() {
            return None;
        }
        // A directory above several entries is refused for the nearest, which holds
        // the others (the state directory, not one workspace's log in it).
        (self.entries.iter())
            .filter(|e| e.path.starts_with(path))
            .min_by_key(|e| e.path.components().count())
    }
}

/// `audit.jsonl.000000000001`, `audit.jsonl.checkpoint`, ... beside `audit.jsonl`.
fn is_sidecar(e: &FloorEntry, path: &RelPath) -> bool {
    // The audit files' `<name>.*` siblings (rotations, checkpoints, a key's or sink's
    // temporary copies) are theirs too.
    if matches!(
        e.kind,
        FloorKind::BackupDir | FloorKind::StateDir | FloorKind::PolicyFile
    ) {
        return false;
    }
    let (Some(name), Some(entry_name)) = (path.file_name(), e.path.file_name()) else {
        return false;
    };
    parent(path) == parent(&e.path)
        && name
            .strip_prefix(entry_name)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn parent(p: &RelPath) -> &str {
    p.as_str().rsplit_once('/').map_or("", |(d, _)| d)
}

/// The floor entries for those of fsgate's own files that lie inside the workspace.
///
/// # Ambient Authority
///
/// Resolves `own` paths (symlinks included) by path, to see where they really are.
pub fn entries_inside(
    root: &Path,
    own: impl IntoIterator<Item = (FloorKind, PathBuf)>,
) -> Vec<FloorEntry> {
    own.into_iter()
        .filter_map(|(kind, path)| {
            let rel = inside(root, &path)?;
            tracing::warn!(
                path = %path.display(),
                "{} lies inside the workspace; no request can reach it (fixed floor)",
                kind.as_str()
            );
            Some(FloorEntry { kind, path: rel })
        })
        .collect()
}

/// `path` as a workspace-relative path, if it lies inside the workspace.
fn inside(root: &Path, path: &Path) -> Option<RelPath> {
    let canon = std::fs::canonicalize(path).ok().or_else(|| {
        let parent = std::fs::canonicalize(path.parent()?).ok()?;
        Some(parent.join(path.file_name()?))
    })?;
    RelPath::parse_absolute(canon.to_str()?, root).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    fn floor() -> FixedFloor {
        FixedFloor::new(
            Path::new("/ws"),
            &[
                (FloorKind::PolicyFile, Path::new("/ws/.fsgate/policy.toml")),
                (FloorKind::AuditLog, Path::new("/ws/logs/audit.jsonl")),
                (FloorKind::BackupDir, Path::new("/var/backups")),
            ],
        )
    }

    /// The state directory is refused under its own name and rule, whatever lies
    /// beneath it; a sibling that merely starts with its name is not.
    #[test]
    fn the_state_directory_is_refused_as_itself() {
        let f = FixedFloor::new(
            Path::new("/home/u"),
            &[
                (
                    FloorKind::BackupDir,
                    Path::new("/home/u/.local/state/fsgate/ws-1/backups"),
                ),
                (
                    FloorKind::StateDir,
                    Path::new("/home/u/.local/state/fsgate"),
                ),
            ],
        );
        let other = f.touches(
            OpClass::Read,
            &p(".local/state/fsgate/ws-2/audit/audit.jsonl"),
        );
        let other = other.map(|e| (e.kind, e.kind.rule_id()));
        assert_eq!(other, Some((FloorKind::StateDir, "floor:state-dir")));
        assert!(FloorKind::StateDir.as_str().contains("state directory"));
        let own = f.touches(OpClass::Read, &p(".local/state/fsgate/ws-1/backups/x"));
        assert_eq!(own.map(|e| e.kind), Some(FloorKind::BackupDir));
        assert!(
            f.touches(OpClass::Read, &p(".local/state/fsgate.old"))
                .is_none()
        );
        // Above both: refused for the nearest, the state directory that holds the other.
        for path in [".local", ".local/state", ".local/state/fsgate"] {
            let above = f.touches(OpClass::Delete, &p(path));
            assert_eq!(above.map(|e| e.kind), Some(FloorKind::StateDir), "{path}");
        }
        // Inside the state directory, above one workspace's backups: the state
        // directory's (what a path lies in names it before what it holds).
        let within = f.touches(OpClass::Write, &p(".local/state/fsgate/ws-1"));
        assert_eq!(within.map(|e| e.kind), Some(FloorKind::StateDir));
    }

    #[test]
    fn only_entries_inside_the_workspace() {
        let f = floor();
        assert_eq!(f.entries().len(), 2);
        assert!(
            FixedFloor::new(
                Path::new("/ws"),
                &[(FloorKind::BackupDir, Path::new("/ws_evil/b"))]
            )
            .is_empty()
        );
    }

    #[test]
    fn touches_entries_sidecars_and_ancestors_on_change() {
        let f = floor();
        assert!(
            f.touches(OpClass::Read, &p(".fsgate/policy.toml"))
                .is_some()
        );
        assert!(
            f.touches(OpClass::Read, &p("logs/audit.jsonl.000000000001"))
                .is_some()
        );
        assert!(
            f.touches(OpClass::List, &p("logs/audit.jsonl.checkpoint"))
                .is_some()
        );
        assert!(f.touches(OpClass::Read, &p("logs/audit.jsonlx")).is_none());
        assert!(f.touches(OpClass::Read, &p("logs/other.log")).is_none());
        // Listing the parent is a matter of filtering entries, not refusing the listing.
        assert!(f.touches(OpClass::List, &p(".fsgate")).is_none());
        // Removing or renaming the parent would take the policy with it.
        assert_eq!(
            f.touches(OpClass::Delete, &p(".fsgate")).map(|e| e.kind),
            Some(FloorKind::PolicyFile)
        );
        assert!(f.touches(OpClass::Write, &RelPath::root()).is_none());
    }
}
