//! Where fsgate keeps a workspace's state by default (its audit log and backups):
//! one directory per workspace under the XDG state directory, outside the workspace.

use std::path::{Path, PathBuf};

use crate::sha256::hex_digest;

/// Neither `XDG_STATE_HOME` nor `HOME` is an absolute path, so there is no default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no state directory: neither XDG_STATE_HOME nor HOME is set to an absolute path")]
pub struct NoStateDir;

/// `<state dir>/fsgate/<name>-<hash>`: the per-workspace directory that also holds the
/// default audit log and the default backup store.
pub fn workspace_state_dir(workspace: &Path) -> Result<PathBuf, NoStateDir> {
    let state = state_home(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
        .ok_or(NoStateDir)?;
    let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let hash = hex_digest(canonical.as_os_str().as_encoded_bytes());
    let name: String = canonical
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    Ok(state.join("fsgate").join(format!("{name}-{}", &hash[..16])))
}

/// `<state dir>/fsgate`: where every workspace's state directory is.
pub fn state_root() -> Result<PathBuf, NoStateDir> {
    state_home(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
        .map(|s| s.join("fsgate"))
        .ok_or(NoStateDir)
}

/// XDG state dir: `$XDG_STATE_HOME` if absolute, else `$HOME/.local/state`.
fn state_home(
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(x) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(x);
    }
    home.map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".local/state"))
}

/// A name that can be one component of a WebSocket path (`/<name>/...`) and a
/// directory name: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub fn valid_workspace_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_rules() {
        assert_eq!(
            state_home(Some("/xdg".into()), Some("/home/u".into())),
            Some("/xdg".into())
        );
        assert_eq!(
            state_home(Some("rel".into()), Some("/home/u".into())),
            Some("/home/u/.local/state".into())
        );
        assert_eq!(
            state_home(None, Some("/home/u".into())),
            Some("/home/u/.local/state".into())
        );
        assert_eq!(state_home(None, None), None);
    }
}
