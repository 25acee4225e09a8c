//! Undoing one change: is the path still as the change left it (else someone changed it
//! since, and it is left alone unless forced), what puts it back as it was before, and
//! doing that in a [`World`].

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::history::{Before, Change, Removed, Saved, Touch, What};
use super::plan::{ancestors, changed_since};
use super::world::{Action, Content, Node, World};
use fsgate_backup::BackupRef;

/// Content larger than this is not compared line by line.
pub const MAX_DIFF_BYTES: u64 = 4 << 20;

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

/// Why a change is not undone.
enum Stop {
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
struct Plan {
    actions: Vec<Action>,
    /// Directories the change made above `path` (removed if empty afterwards).
    prune: Option<(String, usize)>,
}

impl Plan {
    fn of(actions: Vec<Action>) -> Plan {
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
            What::Rename { from, to, replaced } => {
                self.rename(w, (from, to), replaced.as_ref(), c.order, &mut row)
            }
            What::Chmod { path, old, new } => self.chmod(w, path, (*old, *new), &mut row),
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
    fn who(&self, c: &Change, row: &Row) -> Option<ChangedBy> {
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
    fn unless_forced(&self, why: String, can: bool, row: &mut Row) -> Result<(), Stop> {
        if self.force && can {
            row.forced = true;
            row.note = why;
            Ok(())
        } else {
            Err(Stop::Conflict(why))
        }
    }

    /// A link made: removed, unless something else has its name now.
    fn unlink(w: &mut dyn World, path: &str, row: &mut Row) -> Result<Plan, Stop> {
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
    fn chmod(
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

    fn content(
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

    fn mkdir(
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

    fn removal(&self, w: &mut dyn World, what: &What, row: &mut Row) -> Result<Plan, Stop> {
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
                return self.refile(w, path, &now, r.id, row);
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
            actions.push(Action::Put {
                path: r.rel_path,
                id: r.id,
            });
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
        id: String,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        let saved = Content::Saved(id.clone());
        if let Node::File(c) = now
            && w.sha(c)? == w.sha(&saved)?
        {
            return Err(Stop::Already("already as it was".into()));
        }
        row.action = "re-create";
        if *now != Node::Absent {
            let can = matches!(now, Node::File(_));
            self.unless_forced(since(now, "made again since"), can, row)?;
            row.action = "restore";
        }
        row.diff = Some(diff(w, now, Some(saved))?);
        Ok(Plan::of(vec![Action::Put {
            path: path.to_owned(),
            id,
        }]))
    }

    fn rename(
        &self,
        w: &mut dyn World,
        (from, to): (&str, &str),
        replaced: Option<&Before>,
        order: usize,
        row: &mut Row,
    ) -> Result<Plan, Stop> {
        row.action = "move back";
        row.path = from.to_owned();
        row.from = Some(to.to_owned());
        let (at_to, at_from) = (w.node(to)?, w.node(from)?);
        if matches!(at_to, Node::Absent | Node::Other) {
            return Err(Stop::Conflict(since(&at_to, "moved or removed since")));
        }
        if at_from != Node::Absent {
            let can = matches!((&at_from, &at_to), (Node::File(_), Node::File(_)));
            self.unless_forced(format!("{from} was made again since"), can, row)?;
        }
        if changed_since(self.touches, &self.selected, to, order).is_some() {
            self.unless_forced(format!("{to} was changed since"), true, row)?;
        }
        let mut actions = vec![Action::Move {
            from: to.to_owned(),
            to: from.to_owned(),
        }];
        match replaced {
            Some(Before::Saved(s)) => {
                let r = backup_of(w, s)?;
                push_note(row, &format!("{to} restored"));
                actions.push(Action::Put {
                    path: to.to_owned(),
                    id: r.id,
                });
            }
            Some(Before::Unsaved) => {
                return Err(Stop::Fail(format!(
                    "the file it replaced at {to} was not saved ([backup] on_limit)"
                )));
            }
            Some(Before::Absent) | None => {}
        }
        Ok(Plan::of(actions))
    }
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

/// The directories the changes made that are still there and empty once every change
/// is undone, removed deepest first; how many. (Changes made at once record the made
/// directory on whichever created it, not always the oldest: its undo may come while
/// another change's file still holds it.)
pub fn prune_left(w: &mut dyn World, changes: &[Change]) -> usize {
    let mut dirs: Vec<String> = changes
        .iter()
        .flat_map(|c| match &c.what {
            What::Content {
                path, made_dirs, ..
            } => ancestors(path)
                .take(*made_dirs)
                .map(str::to_owned)
                .collect(),
            What::Mkdir { path, made } => std::iter::once(path.as_str())
                .chain(ancestors(path))
                .take(*made)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    dirs.sort_by(|a, b| {
        let depth = |d: &str| d.matches('/').count();
        depth(b).cmp(&depth(a)).then_with(|| a.cmp(b))
    });
    dirs.dedup();
    let mut done = 0;
    for dir in dirs {
        let empty =
            matches!(w.node(&dir), Ok(Node::Dir)) && matches!(w.is_empty_dir(&dir), Ok(true));
        let remove = Action::Remove {
            path: dir,
            tree: false,
        };
        if empty && w.act(&remove).is_ok() {
            done += 1;
        }
    }
    done
}

/// Removes the directories a change made above `path`, nearest first, while empty.
fn prune(w: &mut dyn World, path: &str, made: usize) -> Result<usize, String> {
    let mut done = 0;
    for dir in ancestors(path).take(made) {
        if w.node(dir)? != Node::Dir || !w.is_empty_dir(dir)? {
            break;
        }
        w.act(&Action::Remove {
            path: dir.to_owned(),
            tree: false,
        })?;
        done += 1;
    }
    Ok(done)
}

fn push_note(row: &mut Row, note: &str) {
    if !row.note.is_empty() {
        row.note.push_str("; ");
    }
    row.note.push_str(note);
}

/// Whether `node` is a file holding content with SHA-256 `sha256`.
fn holds(w: &mut dyn World, node: &Node, sha256: &str) -> Result<bool, String> {
    match node {
        Node::File(c) => Ok(w.sha(c)? == sha256),
        _ => Ok(false),
    }
}

/// How a path differs from what the change left, for the report.
fn since(now: &Node, changed: &str) -> String {
    match now {
        Node::Absent => "removed since".into(),
        Node::Dir => format!("{changed}: a directory now"),
        Node::Other => format!("{changed}: a link or special file now"),
        Node::File(_) => changed.into(),
    }
}

/// How the content at a path changes from `now` to `after`.
fn diff(w: &mut dyn World, now: &Node, after: Option<Content>) -> Result<Diff, String> {
    let now = match now {
        Node::File(c) => Some(w.bytes(c, MAX_DIFF_BYTES)?),
        _ => None,
    };
    let after = match &after {
        Some(c) => Some(w.bytes(c, MAX_DIFF_BYTES)?),
        None => None,
    };
    Ok(diffstat(now.as_ref(), after.as_ref()))
}

/// Lines added and removed between two contents (None: no file; Some(None): too large
/// to compare), or their sizes when either is binary.
pub fn diffstat(now: Option<&Option<Vec<u8>>>, after: Option<&Option<Vec<u8>>>) -> Diff {
    match (as_text(now), as_text(after)) {
        (Some(old), Some(new)) => {
            let (added, removed) = line_counts(old, new);
            Diff::Lines { added, removed }
        }
        _ => {
            let size =
                |b: Option<&Option<Vec<u8>>>| b.and_then(|b| b.as_ref()).map(|b| b.len() as u64);
            Diff::Bytes {
                now: size(now),
                after: size(after),
            }
        }
    }
}

/// The text of content (no file: empty), None if binary or too large to compare.
fn as_text(b: Option<&Option<Vec<u8>>>) -> Option<&str> {
    match b {
        None => Some(""),
        Some(None) => None,
        Some(Some(bytes)) if bytes.contains(&0) => None,
        Some(Some(bytes)) => std::str::from_utf8(bytes).ok(),
    }
}

fn line_counts(old: &str, new: &str) -> (u64, u64) {
    use similar::{DiffTag, TextDiff};
    let diff = TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old, new);
    let (mut added, mut removed) = (0u64, 0u64);
    for op in diff.ops() {
        let (tag, o, n) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {}
            DiffTag::Delete => removed += o.len() as u64,
            DiffTag::Insert => added += n.len() as u64,
            DiffTag::Replace => {
                removed += o.len() as u64;
                added += n.len() as u64;
            }
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_counts_lines_and_binary_counts_bytes() {
        let some = |s: &str| Some(s.as_bytes().to_vec());
        assert_eq!(
            diffstat(Some(&some("a\nb\nc\n")), Some(&some("a\nB\nc\nd\n"))),
            Diff::Lines {
                added: 2,
                removed: 1
            }
        );
        assert_eq!(
            diffstat(None, Some(&some("x\ny\n"))),
            Diff::Lines {
                added: 2,
                removed: 0
            }
        );
        assert_eq!(
            diffstat(Some(&Some(vec![0, 1, 2])), None),
            Diff::Bytes {
                now: Some(3),
                after: None
            }
        );
        assert_eq!(
            diffstat(Some(&None), Some(&some("x"))),
            Diff::Bytes {
                now: None,
                after: Some(1)
            }
        );
    }
}
