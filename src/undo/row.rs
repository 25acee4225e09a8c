//! What became of one change, as the report shows it: its status, action, path, the
//! diff it puts back and who changed it since.

use serde::Serialize;

use super::change::Change;

/// What became of one change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Put back as it was before the change.
    Undone,
    /// Already as it was before (an earlier undo, or someone put it back).
    Already,
    /// Left as it is: changed since by someone else (`--force` puts it back anyway).
    Skipped,
    /// Could not be put back (no backup, an error).
    Failed,
}

/// How the content of a file differs between now and after the undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Diff {
    /// Text: lines added and removed.
    Lines {
        /// Lines the undo adds.
        added: u64,
        /// Lines the undo removes.
        removed: u64,
    },
    /// Binary content (or too large to compare): sizes in bytes, now and after.
    Bytes {
        /// Size now (None: no file, or not known).
        now: Option<u64>,
        /// Size after the undo (None: no file, or not known).
        after: Option<u64>,
    },
}

/// Another change of a path since, by someone the selection does not cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangedBy {
    /// Their session.
    pub session: String,
    /// The seq of their change's intent.
    pub seq: u64,
    /// Which chain of the log.
    #[serde(skip)]
    pub chain: usize,
    /// Theirs was an earlier `fsgate undo` (see `Touch::by_undo`).
    #[serde(skip)]
    pub by_undo: bool,
}

/// One line of the undo's report: one change (with the rewrites folded into it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// What became of it.
    pub status: Status,
    /// What the undo does: `restore`, `remove`, `re-create`, `move back`, ...
    pub action: &'static str,
    /// The workspace among several the path lies in (None: the gateway served one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The path put back.
    pub path: String,
    /// For `move back`: where it moves back from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// How its content changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    /// Why it was skipped or failed, or what else was done.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Who changed it since (when that is why it was skipped or forced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<ChangedBy>,
    /// Put back although changed since (`--force`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    /// The session whose change this was.
    pub session: String,
    /// The seq of the change's intent.
    pub seq: u64,
    /// How many later rewrites of the same file were folded into it.
    #[serde(skip_serializing_if = "is_zero")]
    pub folded: usize,
}

impl Row {
    /// The row of change `c`, before anything is known.
    pub fn of(c: &Change) -> Row {
        let path = c.what.paths().first().map(|p| p.to_string());
        Row {
            status: Status::Undone,
            action: "",
            workspace: None,
            path: path.unwrap_or_default(),
            from: None,
            diff: None,
            note: String::new(),
            changed_by: None,
            forced: false,
            session: c.session.clone(),
            seq: c.seq,
            folded: c.folded,
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

pub(super) fn push_note(row: &mut Row, note: &str) {
    if !row.note.is_empty() {
        row.note.push_str("; ");
    }
    row.note.push_str(note);
}
