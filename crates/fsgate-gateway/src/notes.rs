//! Change notes: what a door, the change watch and git staging are told of a change
//! once its record is durable.

use crate::ask;

use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;

/// A change the gateway made for a client, told to that client's door after its
/// audit record is durable.
#[derive(Debug, Clone)]
pub struct ChangeNote {
    /// The request's operation (`write`, `edit`, `mkdir`, `rm`, `rename`...).
    pub op: fsgate_audit::ChangeOp,
    /// The session the request came in.
    pub session: String,
    /// The changed path (workspace-relative).
    pub path: RelPath,
    /// The second path of a rename (its destination).
    pub path2: Option<RelPath>,
    /// The workspace root, to make absolute paths.
    pub root: std::path::PathBuf,
    /// For a text write or edit small enough to show, when the door shows diffs: its text.
    pub proposed: Option<ask::Proposed>,
    /// For such a write over an existing file: what it replaced.
    pub replaced: Option<ask::Replaced>,
    /// The audit record's seq, when there is a log.
    pub seq: Option<u64>,
}

impl ChangeNote {
    /// The changed path, absolute.
    pub fn abs_path(&self) -> std::path::PathBuf {
        self.root.join(self.path.as_str())
    }

    /// The rename destination, absolute.
    pub fn abs_path2(&self) -> Option<std::path::PathBuf> {
        self.path2.as_ref().map(|p| self.root.join(p.as_str()))
    }
}

/// A door that tells its client of the changes the gateway made for it.
pub trait ChangeSink: Send + Sync + std::fmt::Debug {
    /// Called on the request's thread after the change's record is durable; must not
    /// block (queue, bounded).
    fn changed(&self, note: &ChangeNote);

    /// Whether notes should carry the text of a write or edit (a copy of up to
    /// `ask::MAX_SHOWN_TEXT` per change): only a door that shows a diff wants it.
    fn wants_text(&self) -> bool {
        false
    }
}

/// Told of every change a gateway makes, whichever door asked for it: the filesystem
/// view takes back what the kernel holds of a path another door (an agent's file tool)
/// changed, so the agent's shell does not read the file as it was.
pub trait ChangeWatch: Send + Sync + std::fmt::Debug {
    /// Called on the request's thread after the change's record is durable, with the
    /// name of the door (`RequestCtx::door`) that asked; must not block for long.
    fn changed(&self, note: &ChangeNote, door: &str);
}

/// The part of the workspace a change-event subscription names (`/`, `/src`, with
/// several workspaces `/<name>/...`): a rooted path, normalised. No policy applies: it
/// only narrows the events a connection gets, each of which the watcher has already
/// let through.
pub fn subscription(path: &str) -> Result<RelPath, GatewayError> {
    RelPath::parse_rooted(path)
        .map_err(|e| GatewayError::InvalidParams(format!("path {path:?}: {e}")))
}
