//! Undoing one change: is the path still as the change left it (else someone changed it
//! since, and it is left alone unless forced), then doing what puts it back in a
//! [`World`]. What puts back each kind of change is in `restore.rs`.

use std::collections::{BTreeMap, HashSet};

use super::change::{Change, Touch, What};
use super::plan::changed_since;
use super::prune::prune;
use super::row::{ChangedBy, Row, Status, push_note};
use super::world::{Action, World};

/// Why a change is not undone.
pub(super) enum Stop {
    /// Someone changed it since: left alone (listed).
    Conflict(String),
    /// It cannot be put back.
    Fail(String),
    /// Nothing to do: it is as it was before.
    Already(String),
}

impl From<String> for Stop {
    fn from(e: String) -> Stop {
        Stop::Fail(e)
    }
}

/// What undoing one change takes, decided before anything is done.
pub(super) struct Plan {
    pub(super) actions: Vec<Action>,
    /// Directories the change made above `path` (removed if empty afterwards).
    pub(super) prune: Option<(String, usize)>,
}

impl Plan {
    pub(super) fn of(actions: Vec<Action>) -> Plan {
        Plan {
            actions,
            prune: None,
        }
    }
}

/// Undoes changes, one at a time.
pub struct Undoer<'h> {
    /// Put back what was changed since, too.
    pub force: bool,
    /// Every change of the log by path.
    pub touches: &'h BTreeMap<String, Vec<Touch>>,
    /// The orders of the selection's changes.
    pub selected: HashSet<usize>,
    /// The selection's changes in the log's order (none folded).
    pub changes: &'h [Change],
}

impl Undoer<'_> {
    /// Undoes `c` in `w`, as far as it can, and says what became of it.
    pub fn undo(&self, w: &mut dyn World, c: &Change) -> Row {
        let mut row = Row::of(c);
        let planned = match &c.what {
            What::Content {
                path,
                sha256,
                before,
                made_dirs,
            } => self.content(w, (path, sha256), before, *made_dirs, &mut row),
            What::Mkdir { path, made } => self.mkdir(w, path, *made, &mut row),
            What::Remove { .. } => self.removal(w, &c.what, &mut row),
            What::Rename { .. } => self.rename(w, &c.what, c.order, &mut row),
            What::Chmod { path, old, new } => self.chmod(w, path, (*old, *new), &mut row),
            What::Utimes { path, atime, mtime } => {
                Self::utimes(w, path, (*atime, *mtime), &mut row)
            }
            What::Symlink { path } => Self::unlink(w, path, &mut row),
        };
        if row.action.is_empty() {
            row.action = "undo";
        }
        match planned {
            Ok(plan) => Self::carry_out(w, plan, &mut row),
            Err(Stop::Already(note)) => {
                row.status = Status::Already;
                row.note = note;
            }
            Err(Stop::Fail(why)) => {
                row.status = Status::Failed;
                row.note = why;
            }
            Err(Stop::Conflict(why)) => self.conflict(c, why, &mut row),
        }
        if row.forced && row.changed_by.is_none() {
            row.changed_by = self.who(c, &row);
        }
        row
    }

    /// Who changed the row's paths since (a rename's target first).
    pub(super) fn who(&self, c: &Change, row: &Row) -> Option<ChangedBy> {
        let paths = row.from.iter().chain(std::iter::once(&row.path));
        paths
            .filter_map(|p| changed_since(self.touches, &self.selected, p, c.order))
            .max_by_key(|t| t.order)
            .map(|t| ChangedBy {
                session: t.session.clone(),
                seq: t.seq,
                chain: t.chain,
                by_undo: t.by_undo,
            })
    }

    /// A change someone else changed since: skipped, naming them; or already undone by
    /// an earlier `fsgate undo`.
    fn conflict(&self, c: &Change, why: String, row: &mut Row) {
        row.changed_by = self.who(c, row);
        match &row.changed_by {
            Some(by) if by.by_undo => {
                row.status = Status::Already;
                row.note = format!("undone already ({}, record {})", by.session, by.seq);
            }
            _ => {
                row.status = Status::Skipped;
                row.note = why;
            }
        }
    }

    fn carry_out(w: &mut dyn World, plan: Plan, row: &mut Row) {
        let total = plan.actions.len();
        for (i, a) in plan.actions.iter().enumerate() {
            if let Err(e) = w.act(a) {
                row.status = Status::Failed;
                let done = if i > 0 {
                    format!(" ({i} of its {total} steps done)")
                } else {
                    String::new()
                };
                row.note = format!("{e}{done}");
                return;
            }
        }
        if let Some((path, n)) = plan.prune {
            match prune(w, &path, n) {
                Ok(0) => {}
                Ok(k) => push_note(row, &format!("and {k} directories it made")),
                Err(e) => push_note(row, &format!("its directories stay: {e}")),
            }
        }
    }

    /// Refuses a path someone changed since, unless forced and the undo can still act.
    pub(super) fn unless_forced(&self, why: String, can: bool, row: &mut Row) -> Result<(), Stop> {
        if self.force && can {
            row.forced = true;
            row.note = why;
            Ok(())
        } else {
            Err(Stop::Conflict(why))
        }
    }
}
