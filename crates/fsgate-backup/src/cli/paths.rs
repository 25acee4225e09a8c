//! The paths of `fsgate backup`: a command-line path as a workspace path, and where a
//! workspace's store (and state directory) lives by default.

use std::path::{Path, PathBuf};

use crate::error::BackupError;

/// Turns a command-line path into a workspace-relative one: relative paths are taken
/// as is; absolute ones must lie inside the (canonical) workspace.
pub(super) fn to_rel_path(workspace: &Path, path: &str) -> Result<String, BackupError> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Ok(path
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_owned());
    }
    let outside = || BackupError::InvalidPath {
        path: path.to_owned(),
        reason: "not inside the workspace",
    };
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let rel = p
        .strip_prefix(&ws)
        .or_else(|_| p.strip_prefix(workspace))
        .map_err(|_| outside())?;
    let parts: Option<Vec<&str>> = rel.iter().map(|c| c.to_str()).collect();
    let joined = parts.ok_or_else(outside)?.join("/");
    if joined.is_empty() {
        return Err(outside());
    }
    Ok(joined)
}

/// The default store of `workspace`:
/// `$XDG_STATE_HOME/fsgate/<name>-<hash>/backups` (or `~/.local/state/...`), where
/// `<hash>` is 16 hex digits of the SHA-256 of the canonical workspace path, so every
/// workspace gets its own store and renaming a workspace directory starts a new one.
///
/// Errors when neither `XDG_STATE_HOME` nor `HOME` is an absolute path.
pub(crate) fn default_backup_dir(workspace: &Path) -> Result<PathBuf, BackupError> {
    Ok(workspace_state_dir(workspace)?.join("backups"))
}

/// `<state dir>/fsgate/<name>-<hash>`: the per-workspace directory that also holds the
/// default audit log ([`fsgate_base::state::workspace_state_dir`]).
pub fn workspace_state_dir(workspace: &Path) -> Result<PathBuf, BackupError> {
    fsgate_base::state::workspace_state_dir(workspace).map_err(|_| BackupError::NoStateDir)
}

/// Refuses a backup directory inside the workspace (the agent could reach it) or one
/// that contains the workspace (pruning would then be pointed at workspace files).
pub(crate) fn ensure_outside_workspace(
    backup_dir: &Path,
    workspace: &Path,
) -> Result<(), BackupError> {
    let canon = |p: &Path| {
        // The store may not exist yet: canonicalize its nearest existing ancestor.
        let mut existing = p.to_path_buf();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (
                existing.file_name().map(|n| n.to_os_string()),
                existing.parent(),
            ) {
                (Some(n), Some(parent)) => {
                    rest.push(n);
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let mut c = std::fs::canonicalize(&existing).unwrap_or(existing);
        c.extend(rest.iter().rev());
        c
    };
    let (b, w) = (canon(backup_dir), canon(workspace));
    if b.starts_with(&w) || w.starts_with(&b) {
        return Err(BackupError::UnsafeDir {
            path: backup_dir.display().to_string(),
            reason: format!("must be outside the workspace {}", workspace.display()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_dir_is_per_workspace_and_outside_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (tmp.path().join("proj"), tmp.path().join("other/proj"));
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::create_dir_all(&b).expect("mkdir");
        let (da, db) = (
            default_backup_dir(&a).expect("a"),
            default_backup_dir(&b).expect("b"),
        );
        assert_ne!(da, db);
        assert!(da.ends_with("backups"));
        assert!(
            da.to_string_lossy().contains("/fsgate/proj-"),
            "{}",
            da.display()
        );
        assert_eq!(
            default_backup_dir(&a.join(".")).expect("same"),
            da,
            "canonical path"
        );
        assert!(ensure_outside_workspace(&da, &a).is_ok());
        assert!(ensure_outside_workspace(&a.join(".backups/x"), &a).is_err());
        assert!(ensure_outside_workspace(tmp.path(), &a).is_err());
    }

    #[test]
    fn paths_from_the_command_line() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path();
        assert_eq!(to_rel_path(ws, "src/a.rs").ok(), Some("src/a.rs".into()));
        assert_eq!(to_rel_path(ws, "./src/").ok(), Some("src".into()));
        let abs = ws.join("src/a.rs");
        assert_eq!(
            to_rel_path(ws, abs.to_str().expect("utf8")).ok(),
            Some("src/a.rs".into())
        );
        assert!(to_rel_path(ws, "/etc/passwd").is_err());
        assert!(to_rel_path(ws, ws.to_str().expect("utf8")).is_err());
    }
}
