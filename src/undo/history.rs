//! What the log says happened: the changes a selection made, read from their intents
//! (what will change, the backups already made) once their outcome says they were made,
//! in log order; and the paths every change touched, whoever made it.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use time::OffsetDateTime;

use fsgate_audit::canonical;
use fsgate_audit::record::{ChangeOp, KIND_INTENT, KIND_RECONCILED, KIND_REQUEST};
use fsgate_base::path::RelPath;

/// Which changes to undo: those of one session, within a time range, or both.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only this session's changes.
    pub session: Option<String>,
    /// Changes recorded at or after this time.
    pub since: Option<OffsetDateTime>,
    /// Changes recorded strictly before this time.
    pub until: Option<OffsetDateTime>,
    /// The workspace whose changes these are, among several (`args.workspace`); None:
    /// the gateway served one, and its records name none.
    pub workspace: Option<String>,
    /// The other workspaces undone (in a pass of their own): their changes are left
    /// here without a word. None: every other workspace's are (they were reported in
    /// the first pass); else a change of the selection in a workspace not listed is
    /// one the undo cannot put back, and says so.
    pub elsewhere: Option<Vec<String>>,
}

impl Selection {
    fn matches(&self, session: &str, ts: &str) -> bool {
        if self.session.as_deref().is_some_and(|s| s != session) {
            return false;
        }
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        let Some(t) = canonical::parse_ts(ts) else {
            return false;
        };
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t < u)
    }
}

/// A backup a change made of what it replaced or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The backup's id, as the log names it.
    pub id: String,
    /// The SHA-256 the intent says the replaced content had (`args.oldSha256`).
    pub sha256: Option<String>,
}

/// What a content change's path held before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: the change created the file.
    Absent,
    /// A file, saved in this backup.
    Saved(Saved),
    /// A file that was changed without a backup (`[backup] on_limit`).
    Unsaved,
}

/// What a removal removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// A regular file.
    File,
    /// A directory, with everything beneath it.
    Dir,
    /// A symbolic link or special file: fsgate keeps no copy of those.
    Link,
    /// The record does not say (a log written before `args.removed` existed).
    Unknown,
}

/// One change, as its intent recorded it; paths are where the change really was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// `write_text_file`, `edit_text_file`, `restore`: `path` holds `sha256` afterwards.
    Content {
        /// The file.
        path: String,
        /// SHA-256 of the content it wrote.
        sha256: String,
        /// What the file was before.
        before: Before,
        /// Parent directories it made (`args.madeDirs`).
        made_dirs: usize,
    },
    /// `mkdir`: `path` and `made - 1` parents made.
    Mkdir {
        /// The directory.
        path: String,
        /// Directories made, the last one `path` itself.
        made: usize,
    },
    /// `rm`: `path` removed, every file in it saved in `backups`.
    Remove {
        /// What was removed.
        path: String,
        /// What it was.
        removed: Removed,
        /// The backups made of its files.
        backups: Vec<String>,
        /// Directories beneath that held neither a file nor a directory.
        leaf_dirs: Vec<String>,
        /// Files removed without a backup (`[backup] on_limit`).
        unsaved: usize,
        /// The SHA-256 of the one file removed, when it was one (`args.oldSha256`).
        sha256: Option<String>,
    },
    /// `rename`: `from` moved to `to`, replacing what `to` held (saved in `replaced`).
    Rename {
        /// The source.
        from: String,
        /// The target.
        to: String,
        /// The backup of the file the move replaced at `to`.
        replaced: Option<Before>,
    },
    /// `chmod`: `path`'s permission bits set from `old` to `new`.
    Chmod {
        /// The file or directory.
        path: String,
        /// Its bits before (`args.oldMode`).
        old: u32,
        /// The bits set (`args.mode`).
        new: u32,
    },
    /// `symlink`: the link `path` made.
    Symlink {
        /// The link.
        path: String,
    },
}

impl What {
    /// The paths the change touched.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            What::Content { path, .. }
            | What::Mkdir { path, .. }
            | What::Remove { path, .. }
            | What::Chmod { path, .. }
            | What::Symlink { path } => vec![path],
            What::Rename { from, to, .. } => vec![from, to],
        }
    }
}

/// A change that was made (its outcome `ok`, or found applied after a crash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its place among every change of the log, in the order they were made.
    pub order: usize,
    /// Which chain of the log.
    pub chain: usize,
    /// The seq of its intent.
    pub seq: u64,
    /// When its intent was recorded.
    pub ts: String,
    /// The session that made it.
    pub session: String,
    /// What it did.
    pub what: What,
    /// Later changes of the same file folded into this one (see `plan::fold`).
    pub folded: usize,
}

/// A change of a path by anyone: who, and where in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    /// Its place among every change of the log.
    pub order: usize,
    /// Which chain.
    pub chain: usize,
    /// The seq of its intent.
    pub seq: u64,
    /// The session that made it.
    pub session: String,
    /// Made by `fsgate undo` itself: recorded by the command line (transport `cli`,
    /// which no door writes) with `args.undo`. Never read from the session id, which
    /// an agent chooses.
    pub by_undo: bool,
}

/// An intent whose outcome has not been read yet.
#[derive(Debug)]
struct Open {
    ts: String,
    session: String,
    by_undo: bool,
    paths: Vec<String>,
    /// Parsed only for the selection's intents (Err: why it could not be).
    what: Option<Result<What, String>>,
}

/// Everything the undo needs from the log.
#[derive(Debug, Default)]
pub struct History {
    /// The selection's changes, in the order they were made.
    pub selected: Vec<Change>,
    /// Every change made, by each path it touched, in order.
    pub touches: BTreeMap<String, Vec<Touch>>,
    /// Whether any record named the selected session.
    pub session_seen: bool,
    /// The selection's intents without an outcome: (chain, seq, path).
    pub unsettled: Vec<(usize, u64, String)>,
    /// Changes of the selection that were made but could not be read (their seq, why).
    pub unreadable: Vec<(u64, String)>,
    /// Changes made so far, selected or not.
    made: usize,
    open: HashMap<(usize, u64), Open>,
}

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// A workspace-relative path from the log, normalised (None if it is none).
fn rel(p: &str) -> Option<String> {
    RelPath::parse_rooted(&format!("/{p}"))
        .ok()
        .filter(|r| !r.is_root())
        .map(|r| r.as_str().to_owned())
}

impl History {
    /// Takes in one record of chain `chain`, records given in log order.
    pub fn observe(&mut self, chain: usize, v: &Value, sel: &Selection) {
        let session = text(v, "session");
        if sel.session.as_deref() == Some(session) {
            self.session_seen = true;
        }
        let seq = v.get("seq").and_then(Value::as_u64).unwrap_or_default();
        match text(v, "kind") {
            KIND_INTENT => self.observe_intent(chain, seq, v, sel),
            KIND_REQUEST => {
                let intent = v["args"].get("intent").and_then(Value::as_u64);
                if let Some(n) = intent {
                    self.settle(chain, n, text(v, "outcome") == "ok");
                }
            }
            KIND_RECONCILED => {
                if let Some(n) = v["details"].get("intent").and_then(Value::as_u64) {
                    let applied = text(&v["details"], "found") == "applied";
                    // An outcome written beside its entry's sync that a crash then
                    // took from the disk: the change was not made after all.
                    if !applied && v["details"].get("outcomeSeq").is_some() {
                        self.unmake(chain, n);
                    }
                    self.settle(chain, n, applied);
                }
            }
            _ => {}
        }
    }

    fn observe_intent(&mut self, chain: usize, seq: u64, v: &Value, sel: &Selection) {
        let (session, ts) = (text(v, "session"), text(v, "ts"));
        let args = &v["args"];
        let ws = args.get("workspace").and_then(Value::as_str);
        if ws != sel.workspace.as_deref() {
            // Its path is relative to another workspace's root: not one of this pass.
            let known = sel
                .elsewhere
                .as_ref()
                .is_none_or(|e| ws.is_some_and(|w| e.iter().any(|x| x == w)));
            if !known && sel.matches(session, ts) {
                let why = format!(
                    "made in workspace `{}` of a gateway serving several; pass every --workspace NAME=DIR it was given",
                    ws.unwrap_or_default()
                );
                let open = Open {
                    ts: ts.to_owned(),
                    session: session.to_owned(),
                    by_undo: false,
                    paths: Vec::new(),
                    what: Some(Err(why)),
                };
                self.open.insert((chain, seq), open);
            }
            return;
        }
        let what = sel.matches(session, ts).then(|| what_of(v));
        let paths = [
            args.get("realPath").or(v.get("path")),
            args.get("realPath2").or(v.get("path2")),
        ]
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().and_then(rel))
        .collect();
        let open = Open {
            ts: ts.to_owned(),
            session: session.to_owned(),
            by_undo: by_undo(v),
            paths,
            what,
        };
        self.open.insert((chain, seq), open);
    }

    /// The outcome of intent `seq`: made (`applied`) or not.
    fn settle(&mut self, chain: usize, seq: u64, applied: bool) {
        let Some(open) = self.open.remove(&(chain, seq)) else {
            return;
        };
        if !applied {
            return;
        }
        let order = self.made;
        self.made += 1;
        for p in &open.paths {
            self.touches.entry(p.clone()).or_default().push(Touch {
                order,
                chain,
                seq,
                session: open.session.clone(),
                by_undo: open.by_undo,
            });
        }
        match open.what {
            None => {}
            Some(Err(why)) => self.unreadable.push((seq, why)),
            Some(Ok(what)) => self.selected.push(Change {
                order,
                chain,
                seq,
                ts: open.ts,
                session: open.session,
                what,
                folded: 0,
            }),
        }
    }

    /// Forgets a change counted as made by its outcome, which a start after a crash
    /// found not on disk.
    fn unmake(&mut self, chain: usize, seq: u64) {
        let other = |c: usize, s: u64| c != chain || s != seq;
        self.selected.retain(|c| other(c.chain, c.seq));
        for touches in self.touches.values_mut() {
            touches.retain(|t| other(t.chain, t.seq));
        }
        self.touches.retain(|_, t| !t.is_empty());
    }

    /// Takes in another workspace's history (`name`), for the report: its changes,
    /// its notes, its paths named `name:path`.
    pub fn absorb(&mut self, name: Option<&str>, other: History) {
        let shown = |p: String| match name {
            Some(n) => format!("{n}:{p}"),
            None => p,
        };
        self.session_seen |= other.session_seen;
        self.selected.extend(other.selected);
        self.unreadable.extend(other.unreadable);
        let unsettled = other.unsettled.into_iter();
        self.unsettled
            .extend(unsettled.map(|(c, s, p)| (c, s, shown(p))));
    }

    /// Ends the reading: the selection's intents still open are listed.
    pub fn finish(&mut self) {
        let mut open: Vec<_> = self
            .open
            .drain()
            .filter_map(|((chain, seq), o)| {
                let w = o.what?.ok()?;
                Some((chain, seq, w.paths().first().map(|p| p.to_string())))
            })
            .map(|(c, s, p)| (c, s, p.unwrap_or_default()))
            .collect();
        open.sort();
        self.unsettled = open;
    }
}

/// Whether record `v` was written by `fsgate undo`: transport `cli` (the command line's
/// own records; no door writes it) and `args.undo` (which `fsgate backup restore`'s
/// records lack).
pub(crate) fn by_undo(v: &Value) -> bool {
    text(v, "transport") == "cli" && v["args"].get("undo").is_some()
}

/// The change an intent record announces.
pub(crate) fn what_of(v: &Value) -> Result<What, String> {
    let args = &v["args"];
    let real = |k: &str, field: &str| {
        let p = args.get(k).or(v.get(field)).and_then(Value::as_str);
        match p {
            None => Err(format!("no `{field}` in the record")),
            Some(p) => rel(p).ok_or_else(|| format!("its `{field}` {p:?} is no workspace path")),
        }
    };
    let count = |k: &str| {
        args.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let backup = v.get("backup").and_then(Value::as_str).map(str::to_owned);
    let before = match (&backup, args.get("noBackup")) {
        (Some(id), _) => Before::Saved(Saved {
            id: id.clone(),
            sha256: args
                .get("oldSha256")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        (None, Some(_)) => Before::Unsaved,
        (None, None) => Before::Absent,
    };
    let op = text(v, "op");
    let Some(change) = ChangeOp::from_name(op) else {
        return Err(format!("`{op}` is not a change fsgate knows how to undo"));
    };
    match change {
        ChangeOp::Write | ChangeOp::Edit | ChangeOp::Restore => Ok(What::Content {
            path: real("realPath", "path")?,
            sha256: v
                .get("sha256")
                .and_then(Value::as_str)
                .ok_or("no `sha256` in the record")?
                .to_owned(),
            before,
            made_dirs: count("madeDirs").unwrap_or(0),
        }),
        ChangeOp::Mkdir => Ok(What::Mkdir {
            path: real("realPath", "path")?,
            made: count("madeDirs").unwrap_or(1).max(1),
        }),
        ChangeOp::Rm => Ok(removal(v, real("realPath", "path")?, backup)),
        ChangeOp::Rename => Ok(What::Rename {
            from: real("realPath", "path")?,
            to: real("realPath2", "path2")?,
            replaced: (before != Before::Absent).then_some(before),
        }),
        ChangeOp::Chmod => {
            let bits = |k: &str| {
                args.get(k)
                    .and_then(Value::as_str)
                    .and_then(|m| u32::from_str_radix(m, 8).ok())
                    .ok_or_else(|| format!("no octal `args.{k}` in the record"))
            };
            Ok(What::Chmod {
                path: real("realPath", "path")?,
                old: bits("oldMode")?,
                new: bits("mode")?,
            })
        }
        ChangeOp::Symlink => Ok(What::Symlink {
            path: real("realPath", "path")?,
        }),
    }
}

fn removal(v: &Value, path: String, first: Option<String>) -> What {
    let args = &v["args"];
    let strings = |k: &str| -> Vec<String> {
        args.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut backups = strings("backups");
    if backups.is_empty() {
        backups.extend(first);
    }
    let removed = match text(args, "removed") {
        "file" => Removed::File,
        "directory" => Removed::Dir,
        "link" | "other" => Removed::Link,
        _ => Removed::Unknown,
    };
    let unsaved = args
        .get("noBackup")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    What::Remove {
        path,
        removed,
        backups,
        leaf_dirs: strings("leafDirs").iter().filter_map(|p| rel(p)).collect(),
        unsaved,
        sha256: args
            .get("oldSha256")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn intent(seq: u64, session: &str, op: &str, extra: Value) -> Value {
        let mut v = json!({"seq": seq, "ts": "2026-01-01T00:00:00.000000Z", "kind": "intent",
            "session": session, "op": op, "decision": "allow"});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        v
    }

    fn outcome(seq: u64, intent: u64, outcome: &str) -> Value {
        json!({"seq": seq, "kind": "request", "args": {"intent": intent}, "outcome": outcome})
    }

    fn read(records: &[Value], sel: &Selection) -> History {
        let mut h = History::default();
        for r in records {
            h.observe(0, r, sel);
        }
        h.finish();
        h
    }

    #[test]
    fn only_the_selections_changes_that_were_made_are_kept_in_order() {
        let sel = Selection {
            session: Some("a".into()),
            ..Default::default()
        };
        let w = json!({"path": "f.txt", "sha256": "11"});
        let records = [
            intent(1, "a", "write_text_file", w.clone()),
            intent(2, "b", "write_text_file", w.clone()),
            outcome(3, 2, "ok"),
            outcome(4, 1, "ok"),
            intent(
                5,
                "a",
                "mkdir",
                json!({"path": "d", "args": {"madeDirs": 2}}),
            ),
            outcome(6, 5, "-32003"),
            intent(7, "a", "rm", json!({"path": "x"})),
        ];
        let h = read(&records, &sel);
        assert!(h.session_seen);
        assert_eq!(h.selected.len(), 1, "{:?}", h.selected);
        let c = &h.selected[0];
        assert_eq!((c.seq, c.order), (1, 1), "made after b's change");
        assert_eq!(
            c.what,
            What::Content {
                path: "f.txt".into(),
                sha256: "11".into(),
                before: Before::Absent,
                made_dirs: 0
            }
        );
        let f: Vec<_> = h.touches["f.txt"]
            .iter()
            .map(|t| t.session.as_str())
            .collect();
        assert_eq!(f, ["b", "a"]);
        assert!(
            !h.touches.contains_key("d"),
            "a refused change touched nothing"
        );
        assert_eq!(h.unsettled, vec![(0, 7, "x".to_owned())]);
    }

    #[test]
    fn a_crash_found_applied_counts_and_real_paths_win() {
        let sel = Selection::default();
        let records = [
            intent(
                1,
                "a",
                "rename",
                json!({"path": "l/a", "path2": "l/b", "backup": "l%2Fb/1",
                       "args": {"realPath": "d/a", "realPath2": "d/b"}}),
            ),
            json!({"seq": 2, "kind": "reconciled", "details": {"intent": 1, "found": "applied"}}),
        ];
        let h = read(&records, &sel);
        assert_eq!(
            h.selected[0].what,
            What::Rename {
                from: "d/a".into(),
                to: "d/b".into(),
                replaced: Some(Before::Saved(Saved {
                    id: "l%2Fb/1".into(),
                    sha256: None,
                })),
            }
        );
        assert!(h.touches.contains_key("d/b") && !h.touches.contains_key("l/b"));
    }

    /// A write whose outcome was written beside its entry's sync, then found not on disk
    /// after a crash, is not among the changes made; one found applied stays.
    #[test]
    fn an_outcome_whose_entry_a_crash_took_is_not_a_change_made() {
        let sel = Selection::default();
        let pending = |seq: u64, intent: u64| {
            json!({"seq": seq, "kind": "request", "args": {"intent": intent},
                   "outcome": "ok", "details": {"entryPending": true}})
        };
        let reconciled = |seq: u64, intent: u64, found: &str| {
            json!({"seq": seq, "kind": "reconciled",
                   "details": {"intent": intent, "found": found, "outcomeSeq": intent + 1}})
        };
        let write = |seq: u64, path: &str| {
            intent(
                seq,
                "a",
                "write_text_file",
                json!({"path": path, "sha256": "00"}),
            )
        };
        let records = [
            write(1, "kept.txt"),
            pending(2, 1),
            write(3, "lost.txt"),
            pending(4, 3),
            reconciled(5, 1, "applied"),
            reconciled(6, 3, "not-applied"),
        ];
        let h = read(&records, &sel);
        let seqs: Vec<u64> = h.selected.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [1]);
        assert!(h.touches.contains_key("kept.txt"));
        assert!(!h.touches.contains_key("lost.txt"));
    }

    #[test]
    fn removals_say_what_they_removed() {
        let v = intent(
            1,
            "a",
            "rm",
            json!({"path": "d", "backup": "d%2Fx/1", "args": {"removed": "directory",
                   "backups": ["d%2Fx/1", "d%2Fy/1"], "backupCount": 2,
                   "leafDirs": ["d/e", "../bad"]}}),
        );
        assert_eq!(
            what_of(&v).unwrap(),
            What::Remove {
                path: "d".into(),
                removed: Removed::Dir,
                backups: vec!["d%2Fx/1".into(), "d%2Fy/1".into()],
                leaf_dirs: vec!["d/e".into()],
                unsaved: 0,
                sha256: None,
            }
        );
        let link = intent(
            1,
            "a",
            "rm",
            json!({"path": "l", "args": {"removed": "link"}}),
        );
        assert!(matches!(
            what_of(&link).unwrap(),
            What::Remove {
                removed: Removed::Link,
                ..
            }
        ));
        let odd = intent(1, "a", "grep", json!({"path": "l"}));
        assert!(what_of(&odd).is_err());
        let escape = intent(1, "a", "mkdir", json!({"path": "../x"}));
        assert!(what_of(&escape).is_err());
    }

    /// With several workspaces, each pass reads its own workspace's changes; a change
    /// of a workspace no pass covers is one the undo cannot put back.
    #[test]
    fn each_workspace_reads_its_own_changes() {
        let rec = |seq: u64, ws: &str| {
            let mut v = intent(
                seq,
                "a",
                "write_text_file",
                json!({"path": "f", "sha256": "00"}),
            );
            v["args"] = json!({"workspace": ws});
            v
        };
        let records = [
            rec(1, "app"),
            outcome(2, 1, "ok"),
            rec(3, "lib"),
            outcome(4, 3, "ok"),
            rec(5, "gone"),
            outcome(6, 5, "ok"),
        ];
        let sel = |ws: &str, elsewhere: Option<Vec<String>>| Selection {
            workspace: Some(ws.into()),
            elsewhere,
            ..Default::default()
        };
        let first = read(&records, &sel("app", Some(vec!["lib".into()])));
        let seqs: Vec<u64> = first.selected.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, [1]);
        assert_eq!(first.unreadable.len(), 1, "{:?}", first.unreadable);
        assert!(first.unreadable[0].1.contains("`gone`"));
        assert_eq!(first.touches["f"].len(), 1, "lib's f is another file");
        let second = read(&records, &sel("lib", None));
        let seqs: Vec<u64> = second.selected.iter().map(|c| c.seq).collect();
        assert_eq!((seqs, second.unreadable.len()), (vec![3], 0));
    }

    #[test]
    fn a_time_range_selects_by_the_intents_time() {
        let sel = Selection {
            since: canonical::parse_ts("2026-01-01T00:00:00.000000Z"),
            until: canonical::parse_ts("2026-01-02T00:00:00.000000Z"),
            ..Default::default()
        };
        assert!(sel.matches("any", "2026-01-01T00:00:00.000000Z"));
        assert!(!sel.matches("any", "2026-01-02T00:00:00.000000Z"));
        assert!(!sel.matches("any", "2025-12-31T23:59:59.999999Z"));
        assert!(!sel.matches("any", "not a time"));
    }
}
