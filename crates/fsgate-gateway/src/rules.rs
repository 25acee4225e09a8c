//! The rule ids of refusals the gateway makes itself (outside the policy engine), and
//! the fixed limits it keeps; a workspace failure as the request's error.

use fsgate_base::error::{GatewayError, STORAGE_ERRNOS};
use fsgate_workspace::WsError;

/// Rule id for refusals of paths outside the workspace (lexically or via symlinks).
pub(crate) const RULE_BOUNDARY: &str = "workspace-boundary";
/// Rule id for refusals of files that are not plain (FIFOs, devices, hard links).
pub(crate) const RULE_FILE_TYPE: &str = "workspace-file-type";
/// Rule id for what the operating system refused (permissions, the Landlock sandbox).
pub(crate) const RULE_OS: &str = "os-permission";
/// Rule id for the nesting limit: what the gateway will not inspect, it will not change
/// (nor create).
pub(crate) const RULE_DEPTH: &str = "workspace.max_depth";
/// Rule id for a path that leads through a symbolic link, refused to `fsgate undo`.
pub(crate) const RULE_LINK: &str = "workspace-link";
/// Rule id for a tree that changed between its inspection and its removal.
pub(crate) const RULE_UNINSPECTED: &str = "workspace-uninspected";
/// Rule id for a rename asked never to replace: its destination exists, or the
/// filesystem cannot rename without replacing.
pub const RULE_NO_REPLACE: &str = "workspace-no-replace";

/// The longest path (or pattern) a request may give, in bytes: the kernel's `PATH_MAX`.
/// A longer one is refused before any work (no path could be that long).
pub(crate) const PATH_MAX: usize = 4096;

/// The fewest backups saved between two retention passes over the whole store.
pub(crate) const PRUNE_EVERY: u64 = 100;

/// A path for an error message: long ones are cut, so a 10 KB path is not echoed whole.
pub fn clip(shown: &str) -> String {
    const MAX: usize = 200;
    if shown.len() <= MAX {
        return shown.to_string();
    }
    let mut end = MAX;
    while !shown.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &shown[..end], shown.len())
}

/// Maps a workspace failure to the contract's error, naming the request's path.
pub(crate) fn ws_error(e: WsError, shown: &str) -> GatewayError {
    ws_error_under(e, shown, "limits.max_read_bytes")
}

/// As [`ws_error`], a file too large refused under `limit` (the read limit that bound
/// it: a model's, or a process's through the view).
pub(crate) fn ws_error_under(e: WsError, shown: &str, limit: &str) -> GatewayError {
    let path = shown.to_string();
    match e {
        WsError::NotFound => GatewayError::NotFound { path },
        WsError::SymlinkEscape | WsError::Raced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_BOUNDARY.into(),
            path,
        },
        WsError::HardLink(_) | WsError::Special(_) => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_FILE_TYPE.into(),
            path,
        },
        WsError::TooLarge { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: limit.into(),
            path,
        },
        WsError::IsDir
        | WsError::NotDir
        | WsError::NotEmpty
        | WsError::Exists
        | WsError::NotUtf8
        | WsError::CrossDirRename => GatewayError::InvalidParams(format!("{shown}: {e}")),
        WsError::OsDenied => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_OS.into(),
            path,
        },
        WsError::TooDeep { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: RULE_DEPTH.into(),
            path,
        },
        WsError::Unseen(_) | WsError::Replaced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_UNINSPECTED.into(),
            path,
        },
        WsError::DestinationExists | WsError::NoReplaceUnsupported => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_NO_REPLACE.into(),
            path,
        },
        WsError::NameTooLong => GatewayError::InvalidParams(format!("{}: {e}", clip(shown))),
        WsError::Io(io) => match io.raw_os_error() {
            Some(errno) if STORAGE_ERRNOS.contains(&errno) => GatewayError::Storage {
                errno,
                message: format!("{}: {io}", clip(shown)),
            },
            _ => GatewayError::Internal(format!("{}: {io}", clip(shown))),
        },
    }
}
