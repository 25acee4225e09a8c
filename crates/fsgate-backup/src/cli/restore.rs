//! `fsgate backup restore`: a saved version put back, the current content backed up
//! first, and the restore recorded in the audit log (refused without one).

use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use fsgate_base::text::{Esc, eprint_line};

use super::paths::{default_backup_dir, ensure_outside_workspace, to_rel_path};
use crate::config::BackupSettings;
use crate::error::{BackupError, BackupRef};
use crate::restore::{RestoreReport, restore};
use crate::store::BackupStore;

/// Receives the outcome of `fsgate backup restore` for the audit log.
///
/// `fsgate backup restore` implements it with the workspace's audit log;
/// [`run`](super::run) uses `NoAudit`, which refuses a restore.
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
pub(crate) struct NoAudit;

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

pub(super) fn restore_cmd(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{BackupCommand, run, run_with_audit};

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
            workspace_name: None,
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
            workspace_name: None,
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
            workspace_name: None,
        };
        assert_eq!(run(cmd), 2);
        assert_eq!(
            std::fs::read_to_string(ws.join("a.txt")).expect("read"),
            "agent wrote this"
        );
    }
}
