//! `fsgate backup list|restore`: the command line (each command in a file of its own:
//! `list`, `restore`; where the backup store lives by default, in `paths`).

mod list;
pub(crate) mod paths;
mod restore;

use std::path::PathBuf;

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
}
