//! `fsgate backup list|restore`: the command line (each command in a file of its own:
//! `list`, `restore`), and where the backup store lives by default.

mod list;
mod restore;

use std::path::{Path, PathBuf};

use fsgate_base::text::eprint_line;

use crate::error::BackupError;
use list::list;
pub(crate) use restore::NoAudit;
pub use restore::RestoreAudit;
use restore::restore_cmd;

/// `fsgate backup ...` subcommands.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum BackupCommand {
    /// List saved versions (all, or of PATH and everything beneath it).
    List {
        /// Backup store [default: the workspace's store under the user's state dir].
        #[arg(long, value_name = "DIR")]
        backup_dir: Option<PathBuf>,
        /// Workspace whose default store to use when --backup-dir is not given
        /// [default: the current directory].
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
        /// Workspace-relative path (or an absolute path inside --workspace).
        path: Option<String>,
        /// With a gateway serving several workspaces, this one's name (its
        /// `--workspace NAME=DIR`): its store is `NAME/` in --backup-dir (or `[backup]
        /// dir`), as the gateway keeps it.
        #[arg(long, value_name = "NAME")]
        workspace_name: Option<String>,
    },
    /// Put a saved version back; the current content is backed up first.
    Restore {
        /// Backup store [default: the workspace's store under the user's state dir].
        #[arg(long, value_name = "DIR")]
        backup_dir: Option<PathBuf>,
        /// The workspace the file belongs to.
        #[arg(long, value_name = "DIR")]
        workspace: PathBuf,
        /// Workspace-relative path, or an absolute path inside the workspace.
        path: String,
        /// Which version: a backup timestamp or id from `list`, or a time (RFC 3339 or
        /// YYYY-MM-DD) meaning the latest version saved at or before it [default: latest].
        #[arg(long, value_name = "TIMESTAMP")]
        at: Option<String>,
        /// The audit log to record the restore in: the gateway's `--audit-log` [default:
        /// the policy's `[audit] path`, else the workspace's log under the user's state dir].
        #[arg(long, value_name = "FILE")]
        audit_log: Option<PathBuf>,
        /// The policy the gateway serves this workspace with: its `[audit]` settings
        /// (signing key, fsync, rotation) and `[backup] dir` apply to the restore.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// With a gateway serving several workspaces, this one's name (its
        /// `--workspace NAME=DIR`): its store is `NAME/` in --backup-dir (or `[backup]
        /// dir`), as the gateway keeps it; the restore's records name it.
        #[arg(long, value_name = "NAME")]
        workspace_name: Option<String>,
    },
}

/// Runs a backup subcommand without the audit log (a `list`; a restore is refused);
/// returns the exit code (0 ok, 1 no such backup, 2 error).
pub fn run(cmd: BackupCommand) -> i32 {
    run_with_audit(cmd, &mut NoAudit)
}

/// [`run`] with the audit hook given.
pub fn run_with_audit(cmd: BackupCommand, audit: &mut dyn RestoreAudit) -> i32 {
    let result = match cmd {
        BackupCommand::List {
            backup_dir,
            workspace,
            json,
            path,
            workspace_name,
        } => named_store(backup_dir, workspace_name.as_deref())
            .and_then(|dir| list(dir, workspace, json, path)),
        BackupCommand::Restore {
            backup_dir,
            workspace,
            path,
            at,
            workspace_name,
            ..
        } => named_store(backup_dir, workspace_name.as_deref())
            .and_then(|dir| restore_cmd(dir, &workspace, &path, at.as_deref(), audit)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprint_line(&format!("fsgate backup: {e}"));
            if matches!(e, BackupError::NotFound { .. }) {
                1
            } else {
                2
            }
        }
    }
}

/// The store of the workspace `name` among several: `NAME/` in the store named (the
/// default, a workspace's own state directory, is its own already).
fn named_store(dir: Option<PathBuf>, name: Option<&str>) -> Result<Option<PathBuf>, BackupError> {
    let Some(name) = name else {
        return Ok(dir);
    };
    if !fsgate_base::state::valid_workspace_name(name) {
        return Err(BackupError::InvalidPath {
            path: name.to_owned(),
            reason: "not a workspace name (letters, digits, `.`, `_`, `-`, not starting with `.`)",
        });
    }
    Ok(dir.map(|d| d.join(name)))
}

/// Turns a command-line path into a workspace-relative one: relative paths are taken
/// as is; absolute ones must lie inside the (canonical) workspace.
fn to_rel_path(workspace: &Path, path: &str) -> Result<String, BackupError> {
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
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: BackupCommand,
    }

    #[test]
    fn command_line_matches_the_contract() {
        let cli =
            Cli::try_parse_from(["x", "list", "--backup-dir", "/b", "src/a.rs"]).expect("list");
        assert_eq!(
            cli.cmd,
            BackupCommand::List {
                backup_dir: Some("/b".into()),
                workspace: None,
                json: false,
                path: Some("src/a.rs".into()),
                workspace_name: None,
            }
        );
        let cli = Cli::try_parse_from([
            "x",
            "restore",
            "--workspace",
            "/w",
            "a.txt",
            "--at",
            "2025-01-01",
        ])
        .expect("restore");
        assert_eq!(
            cli.cmd,
            BackupCommand::Restore {
                backup_dir: None,
                workspace: "/w".into(),
                path: "a.txt".into(),
                at: Some("2025-01-01".into()),
                audit_log: None,
                policy: None,
                workspace_name: None,
            }
        );
        assert!(
            Cli::try_parse_from(["x", "restore", "a.txt"]).is_err(),
            "--workspace is required"
        );
    }

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
