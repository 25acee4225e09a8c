//! What puts back each kind of change (content, a directory, a removal, a rename, a
//! mode, a link), or why it cannot be: planned from the path as it is now.

use super::change::{Before, Removed, Saved, What};
use super::diff::diff;
use super::plan::{changed_since, written_before};
use super::row::{Row, push_note};
use super::steps::{Plan, Stop, Undoer};
use super::world::{Action, Content, Node, World};
use fsgate_backup::BackupRef;

impl Undoer<'_> {
    /// A link made: removed, unless something else has its name now.
    pub(super) fn unlink(w: &mut dyn World, path: &str, row: &mut Row) -> Result<Plan, Stop> {
        row.action = "remove link";
        match w.node(path)? {
            Node::Absent => Err(Stop::Already("already gone".into())),
            Node::Other => Ok(Plan::of(vec![Action::Remove {
                path: path.to_owned(),
                tree: false,
            }])),
            now @ (Node::Dir | Node::File(_)) => Err(Stop::Conflict(since(&now, "replaced"))),
        }
    }

    /// A chmod: the old bits put back, unless the bits were changed since.
    pub(super) fn chmod(
        &self,
        w: &mut dyn World,
        path: &str,
        (old, new): (u32, u32),
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        row.action = "mode back";
        match w.mode(path)? {
            None => return Err(Stop::Conflict("removed since".into())),
            Some(now) if now == old => return Err(Stop::Already("already as it was".into())),
            Some(now) if now != new => {
                let why = format!("its mode changed since (now {now:04o})");
                self.unless_forced(why, true, row)?;
            }
            Some(_) => {}
        }
        Ok(Plan::of(vec![Action::Chmod {
            path: path.to_owned(),
            mode: old,
        }]))
    }

    /// A utimes: the old times put back, unless the path is gone or is no longer a
    /// file or directory (times changed since are not told from the undo's own).
    pub(super) fn utimes(
        w: &mut dyn World,
        path: &str,
        (atime, mtime): (i64, i64),
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        row.action = "times back";
        match w.node(path)? {
            Node::Absent => Err(Stop::Conflict("removed since".into())),
            Node::Other => Err(Stop::Conflict("no longer a file or directory".into())),
            Node::Dir | Node::File(_) => Ok(Plan::of(vec![Action::Utimes {
                path: path.to_owned(),
                atime,
                mtime,
            }])),
        }
    }

    pub(super) fn content(
        &self,
        w: &mut dyn World,
        (path, sha256): (&str, &str),
        before: &Before,
        made_dirs: usize,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        row.action = if matches!(before, Before::Absent) {
            "remove"
        } else {
            "restore"
        };
        let now = w.node(path)?;
        let was = match before {
            Before::Saved(s) => Some(backup_of(w, s)?),
            Before::Absent => None,
            Before::Unsaved => {
                return Err(Stop::Fail(
                    "what it replaced was not saved ([backup] on_limit let it go ahead without a backup)"
                        .into(),
                ));
            }
        };
        match (&was, &now) {
            (None, Node::Absent) => return Err(Stop::Already("already gone".into())),
            (Some(r), Node::File(c)) if w.sha(c)? == r.sha256 => {
                return Err(Stop::Already("already as it was".into()));
            }
            _ => {}
        }
        if !holds(w, &now, sha256)? {
            let can = matches!(now, Node::File(_) | Node::Absent);
            self.unless_forced(since(&now, "changed since"), can, row)?;
        }
        row.diff = Some(diff(
            w,
            &now,
            was.as_ref().map(|r| Content::Saved(r.id.clone())),
        )?);
        match was {
            Some(r) => {
                row.action = if now == Node::Absent {
                    "re-create"
                } else {
                    "restore"
                };
                if now == Node::Absent {
                    return Ok(Plan::of(made_again(path.to_owned(), r.id, r.mode)));
                }
                Ok(Plan::of(vec![Action::Put {
                    path: path.to_owned(),
                    id: r.id,
                }]))
            }
            None => {
                row.action = "remove";
                let mut plan = Plan::of(vec![Action::Remove {
                    path: path.to_owned(),
                    tree: false,
                }]);
                if now == Node::Absent {
                    plan.actions.clear();
                }
                plan.prune = Some((path.to_owned(), made_dirs));
                Ok(plan)
            }
        }
    }

    pub(super) fn mkdir(
        &self,
        w: &mut dyn World,
        path: &str,
        made: usize,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        row.action = "remove directory";
        let tree = match w.node(path)? {
            Node::Absent => return Err(Stop::Already("already gone".into())),
            Node::Dir if w.is_empty_dir(path)? => false,
            Node::Dir => {
                let why = "holds entries made since".to_owned();
                self.unless_forced(why, true, row)?;
                true
            }
            now => return Err(Stop::Conflict(since(&now, "not a directory now"))),
        };
        let mut plan = Plan::of(vec![Action::Remove {
            path: path.to_owned(),
            tree,
        }]);
        plan.prune = Some((path.to_owned(), made.saturating_sub(1)));
        Ok(plan)
    }

    pub(super) fn removal(
        &self,
        w: &mut dyn World,
        what: &What,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        let What::Remove {
            path,
            removed,
            backups,
            leaf_dirs,
            unsaved,
            sha256,
        } = what
        else {
            return Err(Stop::Fail("not a removal".into()));
        };
        row.action = "re-create";
        let now = w.node(path)?;
        if *removed == Removed::Link {
            return Err(Stop::Fail(
                "it was a symbolic link or special file: fsgate keeps no copy of those".into(),
            ));
        }
        if let [only] = backups.as_slice() {
            let saved = Saved {
                id: only.clone(),
                sha256: sha256.clone(),
            };
            let r = backup_of(w, &saved)?;
            if r.rel_path == *path {
                return self.refile(w, path, &now, (r.id, r.mode), row);
            }
        }
        if *removed == Removed::File {
            return Err(Stop::Fail("its content was not saved".into()));
        }
        if backups.is_empty() && leaf_dirs.is_empty() && *removed == Removed::Unknown {
            return Err(Stop::Fail(
                "the record does not say what was removed (a log written before fsgate said)"
                    .into(),
            ));
        }
        row.action = "re-create directory";
        match now {
            Node::Absent => {}
            Node::Dir => self.unless_forced("made again since".into(), true, row)?,
            now => return Err(Stop::Conflict(since(&now, "made again since"))),
        }
        let mut actions = vec![Action::Mkdir { path: path.clone() }];
        actions.extend(leaf_dirs.iter().map(|d| Action::Mkdir { path: d.clone() }));
        for id in backups {
            let r = w.saved(id)?;
            if !r.rel_path.starts_with(&format!("{path}/")) {
                return Err(Stop::Fail(format!(
                    "backup {id} is of {}, not of a file beneath it",
                    r.rel_path
                )));
            }
            actions.extend(made_again(r.rel_path, r.id, r.mode));
        }
        if !backups.is_empty() {
            push_note(row, &format!("{} files", backups.len()));
        }
        if *unsaved > 0 {
            return Err(Stop::Fail(format!(
                "{unsaved} of its files were removed without a backup ([backup] on_limit); nothing was put back"
            )));
        }
        Ok(Plan::of(actions))
    }

    /// A removed file, put back from its backup.
    fn refile(
        &self,
        w: &mut dyn World,
        path: &str,
        now: &Node,
        (id, mode): (String, Option<u32>),
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        let saved = Content::Saved(id.clone());
        if let Node::File(c) = now
            && w.sha(c)? == w.sha(&saved)?
        {
            // Made again by an undo stopped before its mode was set back: that is left.
            if let Some(m) = mode.map(|m| m & 0o777)
                && w.mode(path)?.is_some_and(|now| now & 0o777 != m)
            {
                row.action = "mode back";
                return Ok(Plan::of(vec![Action::Chmod {
                    path: path.to_owned(),
                    mode: m,
                }]));
            }
            return Err(Stop::Already("already as it was".into()));
        }
        row.action = "re-create";
        if *now != Node::Absent {
            let can = matches!(now, Node::File(_));
            self.unless_forced(since(now, "made again since"), can, row)?;
            row.action = "restore";
        }
        row.diff = Some(diff(w, now, Some(saved))?);
        if *now != Node::Absent {
            // Written over the file there now, which keeps its own mode.
            return Ok(Plan::of(vec![Action::Put {
                path: path.to_owned(),
                id,
            }]));
        }
        Ok(Plan::of(made_again(path.to_owned(), id, mode)))
    }

    pub(super) fn rename(
        &self,
        w: &mut dyn World,
        what: &What,
        order: usize,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        let What::Rename {
            from,
            to,
            replaced,
            link,
            replaced_link,
        } = what
        else {
            return Err(Stop::Fail("not a rename".into()));
        };
        row.action = "move back";
        row.path.clone_from(from);
        row.from = Some(to.clone());
        let (at_to, at_from) = (w.node(to)?, w.node(from)?);
        // What moved must still be there: a link where a link moved, else a file or
        // directory.
        let gone = match link {
            Some(_) => at_to != Node::Other,
            None => matches!(at_to, Node::Absent | Node::Other),
        };
        if gone {
            return Err(Stop::Conflict(since(&at_to, "moved or removed since")));
        }
        if at_from != Node::Absent {
            let can = matches!((&at_from, &at_to), (Node::File(_), Node::File(_)));
            self.unless_forced(format!("{from} was made again since"), can, row)?;
        }
        // Changed by a change the log names, or by hand: what moved was written by the
        // selection, and the file there now is not what it wrote.
        let by_hand = match (
            &at_to,
            written_before(self.changes, self.touches, from, order),
        ) {
            (Node::File(c), Some(sha)) => w.sha(c)? != sha,
            _ => false,
        };
        if by_hand || changed_since(self.touches, &self.selected, to, order).is_some() {
            self.unless_forced(format!("{to} was changed since"), true, row)?;
        }
        let mut actions = vec![Action::Move {
            from: to.clone(),
            to: from.clone(),
            or_copy: matches!(replaced, Some(Before::Saved(_))),
        }];
        match replaced {
            Some(Before::Saved(s)) => {
                let r = backup_of(w, s)?;
                push_note(row, &format!("{to} restored"));
                actions.extend(made_again(to.clone(), r.id, r.mode));
            }
            Some(Before::Unsaved) => {
                return Err(Stop::Fail(format!(
                    "the file it replaced at {to} was not saved ([backup] on_limit)"
                )));
            }
            Some(Before::Absent) | None => {}
        }
        if let Some(target) = replaced_link {
            push_note(row, &format!("{to} linked to {target} again"));
            actions.push(Action::Link {
                path: to.clone(),
                target: target.clone(),
            });
        }
        Ok(Plan::of(actions))
    }
}

/// The mode a file made by a write gets.
const NEW_FILE_MODE: u32 = 0o644;

/// A removed file made again from backup `id`, with the permission bits `mode` it had
/// when it was saved (when its version records them): a 0600 file does not come back
/// readable by everyone, nor a script without its `x` bit.
fn made_again(path: String, id: String, mode: Option<u32>) -> Vec<Action> {
    let chmod = mode
        .map(|m| m & 0o777)
        .filter(|m| *m != NEW_FILE_MODE)
        .map(|mode| Action::Chmod {
            path: path.clone(),
            mode,
        });
    std::iter::once(Action::Put { path, id })
        .chain(chmod)
        .collect()
}

/// The record of the backup a change made, which must hold what its intent says the
/// change replaced.
fn backup_of(w: &mut dyn World, s: &Saved) -> Result<BackupRef, Stop> {
    let r = w.saved(&s.id)?;
    match &s.sha256 {
        Some(sha) if *sha != r.sha256 => Err(Stop::Fail(format!(
            "backup {} does not hold what the log says was replaced (SHA-256 {sha})",
            s.id
        ))),
        _ => Ok(r),
    }
}

/// Whether `node` is a file holding content with SHA-256 `sha256`.
pub(super) fn holds(w: &mut dyn World, node: &Node, sha256: &str) -> Result<bool, String> {
    match node {
        Node::File(c) => Ok(w.sha(c)? == sha256),
        _ => Ok(false),
    }
}

/// How a path differs from what the change left, for the report.
pub(super) fn since(now: &Node, changed: &str) -> String {
    match now {
        Node::Absent => "removed since".into(),
        Node::Dir => format!("{changed}: a directory now"),
        Node::Other => format!("{changed}: a link or special file now"),
        Node::File(_) => changed.into(),
    }
}
