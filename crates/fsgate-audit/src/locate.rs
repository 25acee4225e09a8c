//! Where the `audit` commands find a log: the paths given, a workspace's default log
//! (`--workspace`), or a per-workspace state directory standing for its `audit/` inside.

use std::path::{Path, PathBuf};

/// The subdirectory of a workspace's state directory that holds its default log.
const AUDIT_SUBDIR: &str = "audit";

/// The paths an `audit` command reads: each of `paths` (a state directory replaced by
/// the `audit/` directory in it), then the default log directory of `workspace`.
pub(crate) fn log_paths(
    paths: &[PathBuf],
    workspace: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = paths.iter().map(|p| audit_dir_of(p)).collect();
    if let Some(ws) = workspace {
        out.push(workspace_log_dir(ws)?);
    }
    Ok(out)
}

/// The directory holding `workspace`'s default audit log; an error naming where it
/// was looked for if there is none.
pub(crate) fn workspace_log_dir(workspace: &Path) -> Result<PathBuf, String> {
    let dir = fsgate_base::state::workspace_state_dir(workspace)
        .map_err(|e| e.to_string())?
        .join(AUDIT_SUBDIR);
    if dir.is_dir() {
        return Ok(dir);
    }
    Err(format!(
        "no audit log for the workspace {} at {}: fsgate has not served it with the default \
         log (name a log chosen with --audit-log or the policy's [audit] path instead)",
        workspace.display(),
        dir.display()
    ))
}

/// A workspace's state directory (`.../fsgate/<name>-<hash>/`, which holds `audit/`
/// and `backups/` but no log file itself) stands for its `audit/` directory.
fn audit_dir_of(path: &Path) -> PathBuf {
    let sub = path.join(AUDIT_SUBDIR);
    if !sub.is_dir() || holds_log_files(path) {
        return path.to_path_buf();
    }
    sub
}

fn holds_log_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_type().is_ok_and(|t| t.is_file())
            && !super::series::is_sidecar(&e.file_name().to_string_lossy())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_directory_stands_for_its_audit_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let state = tmp.path().join("ws-0123");
        std::fs::create_dir_all(state.join("audit")).expect("mkdir");
        std::fs::create_dir_all(state.join("backups")).expect("mkdir");
        assert_eq!(audit_dir_of(&state), state.join("audit"));
        assert_eq!(audit_dir_of(&state.join("audit")), state.join("audit"));
        // A directory with log files of its own is read as it is.
        std::fs::write(state.join("audit.jsonl"), "").expect("write");
        assert_eq!(audit_dir_of(&state), state);
        let file = state.join("audit.jsonl");
        assert_eq!(audit_dir_of(&file), file);
    }
}
