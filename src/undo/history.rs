//! What the log says happened: the changes a selection made, read from their intents
//! (what will change, the backups already made) once their outcome says they were made,
//! in log order; and the paths every change touched, whoever made it.
//! A change as the log tells it is in `change.rs`; what an intent record says, in
//! `intent.rs`.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use time::OffsetDateTime;

use fsgate_audit::canonical;
use fsgate_audit::record::{KIND_INTENT, KIND_RECONCILED, KIND_REQUEST};

use super::change::{Change, Touch, What};
use super::intent::{by_undo, rel, text, what_of};

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
    /// Changes of the selection the log may no longer hold (it was pruned): why.
    pub lost: Vec<String>,
    /// Changes made so far, selected or not.
    made: usize,
    open: HashMap<(usize, u64), Open>,
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
        self.lost.extend(other.lost);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::change::{Before, Saved};
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
                link: None,
                replaced_link: None,
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
