//! Change notes: what a door, the change watch and git staging are told of a change
//! once its record is durable.

use std::sync::Arc;
use std::time::Instant;

use super::{Facts, Gateway, ask};
use crate::ops::{Op, RequestCtx};
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

impl Gateway {
    /// From now on `watch` is told of every change this gateway makes, after its
    /// record is durable. False if a watch was set already (there is one at most).
    pub fn watch_changes(&self, watch: Arc<dyn ChangeWatch>) -> bool {
        self.change_watch.set(watch).is_ok()
    }

    /// Stages a change in git (`[vcs] stage`) and records what was done; a failure is
    /// logged and recorded, never the request's (the change is made and recorded).
    pub(crate) fn stage(&self, note: &ChangeNote) {
        let Some(vcs) = &self.vcs else { return };
        let started = Instant::now();
        let staged = vcs.stage(note.op, &note.path, note.path2.as_ref());
        if staged == crate::vcs::Staged::default() {
            return;
        }
        if let Some(e) = &staged.error {
            tracing::warn!(op = note.op.name(), path = %note.path, "git staging failed: {e}");
        }
        let mut details = staged.details(note.op.name(), &note.session, note.seq);
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        details.insert("duration_us".into(), took.into());
        self.record("vcs-stage", details);
    }
}

/// `note` naming the entries that really changed (a symlink on the way followed):
/// git stages those, not a link that did not change.
pub(crate) fn at_real(
    mut note: ChangeNote,
    (real, real2): (Option<String>, Option<String>),
) -> ChangeNote {
    let parse = |p: String| RelPath::parse_rooted(&format!("/{p}")).ok();
    if let Some(p) = real.and_then(parse) {
        note.path = p;
    }
    if let Some(p) = real2.and_then(parse).filter(|_| note.path2.is_some()) {
        note.path2 = Some(p);
    }
    note
}

/// The note of a change just made in the workspace at `root`, for the door's notifier.
pub(crate) fn change_note(
    root: &std::path::Path,
    ctx: &RequestCtx,
    op: &Op,
    facts: &Facts,
) -> Option<ChangeNote> {
    let parse = |p: &str| RelPath::parse_rooted(&format!("/{p}")).ok();
    Some(ChangeNote {
        op: op.id().change()?,
        session: ctx.session.clone(),
        path: facts.path.as_deref().and_then(parse)?,
        path2: facts.path2.as_deref().and_then(parse),
        root: root.to_path_buf(),
        proposed: ctx
            .notifier
            .as_ref()
            .filter(|n| n.wants_text())
            .and_then(|_| op.proposed()),
        replaced: facts.replaced.clone(),
        seq: None,
    })
}
