//! `fsgate backup list|restore`, and where the backup store lives by default.

use std::io::Write;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use fsgate_base::text::{Esc, eprint_line};

use super::{BackupError, BackupRef, BackupSettings, BackupStore, RestoreReport, restore};

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
    },
}

/// Receives the outcome of `fsgate backup restore` for the audit log.
///
/// `fsgate backup restore` implements it with the workspace's audit log; [`run`] uses
/// [`NoAudit`], which refuses a restore.
pub trait RestoreAudit {
    /// Records the restore about to be made (`version` of `rel_path`, with `previous`
    /// the backup of the current content), durably, before the workspace is touched.
    /// An error refuses the restore: nothing changes.
    fn intend_restore(
        &mut self,
        rel_path: &str,
        version: &BackupRef,
        previous: Option<&BackupRef>,
    ) -> Result<(), String>;
    /// Records a completed restore. An error makes the command exit 2 after saying the
    /// file was restored but not audited.
    fn record_restore(&mut self, workspace: &Path, report: &RestoreReport) -> Result<(), String>;
    /// Records that a restore whose intent was recorded failed with `error`.
    fn record_failure(&mut self, rel_path: &str, error: &str) -> Result<(), String>;
}

/// The [`RestoreAudit`] of a command run without the audit log: it refuses every
/// restore (fail closed), since a restore nobody recorded must not happen.
#[derive(Debug, Default)]
pub struct NoAudit;

impl RestoreAudit for NoAudit {
    fn intend_restore(
        &mut self,
        rel_path: &str,
        _: &BackupRef,
        _: Option<&BackupRef>,
    ) -> Result<(), String> {
        Err(format!(
            "restore of {} refused: no audit log to record it in",
            Esc(rel_path)
        ))
    }

    fn record_failure(&mut self, _: &str, _: &str) -> Result<(), String> {
        Err("no audit log".into())
    }

    fn record_restore(&mut self, _: &Path, _: &RestoreReport) -> Result<(), String> {
        Err("no audit log".into())
    }
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
        } => list(backup_dir, workspace, json, path),
        BackupCommand::Restore {
            backup_dir,
            workspace,
            path,
            at,
            ..
        } => restore_cmd(backup_dir, &workspace, &path, at.as_deref(), audit),
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

fn list(
    backup_dir: Option<PathBuf>,
    workspace: Option<PathBuf>,
    json: bool,
    path: Option<String>,
) -> Result<i32, BackupError> {
    let workspace = match workspace {
        Some(w) => w,
        None => {
            std::env::current_dir().map_err(BackupError::io("find", "the current directory"))?
        }
    };
    let dir = match backup_dir {
        Some(d) => d,
        None => default_backup_dir(&workspace)?,
    };
    if !dir.is_dir() {
        return Err(BackupError::UnsafeDir {
            path: dir.display().to_string(),
            reason: "no backup store here (pass --backup-dir or --workspace)".into(),
        });
    }
    let store = BackupStore::open(&dir, &BackupSettings::default())?;
    let rel = path.map(|p| to_rel_path(&workspace, &p)).transpose()?;
    let refs = store.list(rel.as_deref())?;
    let mut out = std::io::stdout().lock();
    let written = if json {
        print_json(&mut out, &refs)
    } else {
        print_table(&mut out, &refs)
    };
    written.map_err(BackupError::io("write", "stdout"))?;
    Ok(0)
}

fn print_json(out: &mut dyn Write, refs: &[BackupRef]) -> std::io::Result<()> {
    for r in refs {
        serde_json::to_writer(&mut *out, r).map_err(std::io::Error::other)?;
        writeln!(out)?;
    }
    Ok(())
}

fn print_table(out: &mut dyn Write, refs: &[BackupRef]) -> std::io::Result<()> {
    if refs.is_empty() {
        return writeln!(out, "no backups");
    }
    writeln!(
        out,
        "{:<30}  {:>10}  {:<12}  PATH",
        "TIMESTAMP (UTC)", "SIZE", "SHA256"
    )?;
    for r in refs {
        writeln!(
            out,
            "{:<30}{:<2}{:>10}  {:<12}  {}",
            Esc(&r.ts),
            if r.original { " *" } else { "" },
            r.size,
            Esc(r.sha256.get(..12).unwrap_or(&r.sha256)),
            Esc(&r.rel_path)
        )?;
    }
    if refs.iter().any(|r| r.original) {
        writeln!(
            out,
            "* the content before fsgate's first change to the file in a session; \
             keep_versions and max_total_bytes keep it"
        )?;
    }
    Ok(())
}

fn restore_cmd(
    backup_dir: Option<PathBuf>,
    workspace: &Path,
    path: &str,
    at: Option<&str>,
    audit: &mut dyn RestoreAudit,
) -> Result<i32, BackupError> {
    let dir = match backup_dir {
        Some(d) => d,
        None => default_backup_dir(workspace)?,
    };
    ensure_outside_workspace(&dir, workspace)?;
    let store = BackupStore::open(&dir, &BackupSettings::default())?;
    let ws = Dir::open_ambient_dir(workspace, ambient_authority()).map_err(BackupError::io(
        "open workspace",
        workspace.display().to_string(),
    ))?;
    let rel = to_rel_path(workspace, path)?;
    let mut intended = false;
    let result = restore(&store, &ws, &rel, at, &mut |version, previous| {
        audit
            .intend_restore(&rel, version, previous)
            .map_err(BackupError::NotRecorded)?;
        intended = true;
        Ok(())
    });
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if intended && let Err(a) = audit.record_failure(&rel, &e.to_string()) {
                eprint_line(&format!(
                    "fsgate backup: the failed restore could not be recorded: {a}"
                ));
            }
            return Err(e);
        }
    };
    println!(
        "restored {} from backup of {}",
        Esc(&report.restored.rel_path),
        Esc(&report.restored.ts)
    );
    if let Some(prev) = &report.previous {
        println!(
            "previous content saved as {} (undo with --at {})",
            Esc(&prev.id),
            Esc(&prev.ts)
        );
    }
    if let Err(e) = audit.record_restore(workspace, &report) {
        eprint_line(&format!(
            "fsgate backup: file restored, but the audit record failed: {e}"
        ));
        return Ok(2);
    }
    Ok(0)
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
pub fn default_backup_dir(workspace: &Path) -> Result<PathBuf, BackupError> {
    Ok(workspace_state_dir(workspace)?.join("backups"))
}

/// `<state dir>/fsgate/<name>-<hash>`: the per-workspace directory that also holds the
/// default audit log ([`fsgate_base::state::workspace_state_dir`]).
pub fn workspace_state_dir(workspace: &Path) -> Result<PathBuf, BackupError> {
    fsgate_base::state::workspace_state_dir(workspace).map_err(|_| BackupError::NoStateDir)
}

/// Refuses a backup directory inside the workspace (the agent could reach it) or one
/// that contains the workspace (pruning would then be pointed at workspace files).
pub fn ensure_outside_workspace(backup_dir: &Path, workspace: &Path) -> Result<(), BackupError> {
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
                path: Some("src/a.rs".into())
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

    struct Recorder(Vec<RestoreReport>);
    impl RestoreAudit for Recorder {
        fn intend_restore(
            &mut self,
            _: &str,
            _: &BackupRef,
            _: Option<&BackupRef>,
        ) -> Result<(), String> {
            Ok(())
        }
        fn record_restore(&mut self, _: &Path, report: &RestoreReport) -> Result<(), String> {
            self.0.push(report.clone());
            Ok(())
        }
        fn record_failure(&mut self, _: &str, _: &str) -> Result<(), String> {
            Ok(())
        }
    }

    /// A workspace whose `a.txt` an agent changed, and a store holding its good version.
    fn workspace_with_a_backup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (ws, store_dir) = (tmp.path().join("ws"), tmp.path().join("store"));
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::write(ws.join("a.txt"), "agent wrote this").expect("write");
        let store = BackupStore::open(&store_dir, &BackupSettings::default()).expect("open");
        store.save("a.txt", &mut &b"good"[..]).expect("save");
        (tmp, ws, store_dir)
    }

    #[test]
    fn restore_command_restores_and_calls_the_audit_hook() {
        let (_tmp, ws, store_dir) = workspace_with_a_backup();
        let mut audit = Recorder(Vec::new());
        let restore = |path: &str, at: Option<&str>| BackupCommand::Restore {
            backup_dir: Some(store_dir.clone()),
            workspace: ws.clone(),
            path: path.into(),
            at: at.map(str::to_owned),
            audit_log: None,
            policy: None,
        };
        assert_eq!(run_with_audit(restore("a.txt", None), &mut audit), 0);
        assert_eq!(
            std::fs::read_to_string(ws.join("a.txt")).expect("read"),
            "good"
        );
        assert_eq!(audit.0.len(), 1);
        assert!(audit.0[0].previous.is_some());
        assert_eq!(run_with_audit(restore("missing.txt", None), &mut audit), 1);
        assert_eq!(
            run_with_audit(restore("a.txt", Some("not a time")), &mut audit),
            2
        );
        let inside = BackupCommand::Restore {
            backup_dir: Some(ws.join(".b")),
            workspace: ws.clone(),
            path: "a.txt".into(),
            at: None,
            audit_log: None,
            policy: None,
        };
        assert_eq!(
            run_with_audit(inside, &mut audit),
            2,
            "store inside the workspace refused"
        );
        assert_eq!(audit.0.len(), 1);
    }

    #[test]
    fn a_restore_without_an_audit_log_is_refused_and_leaves_the_file_alone() {
        let (_tmp, ws, store_dir) = workspace_with_a_backup();
        let cmd = BackupCommand::Restore {
            backup_dir: Some(store_dir.clone()),
            workspace: ws.clone(),
            path: "a.txt".into(),
            at: None,
            audit_log: None,
            policy: None,
        };
        assert_eq!(run(cmd), 2);
        assert_eq!(
            std::fs::read_to_string(ws.join("a.txt")).expect("read"),
            "agent wrote this"
        );
    }
}
