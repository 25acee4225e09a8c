//! Turning raw, bursty filesystem notifications into debounced `create` / `modify` /
//! `delete` changes: a pure state machine, driven by the watcher thread.
//!
//! Raw events only say "look at this path again". Which change it was comes from
//! comparing what the path was when last seen (`known`) with what it is when its quiet
//! period ends. That is what makes an atomic replace (temp file renamed over the target,
//! one `moved_to` event) a `modify` rather than a `create`, and a file created and
//! removed within one burst no event at all.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::watch::known::Known;
use fsgate_base::path::RelPath;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// It did not exist and now does.
    Create,
    /// It existed and still does, with different content or metadata.
    Modify,
    /// It existed and no longer does.
    Delete,
}

/// One debounced change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// Workspace-relative path.
    pub path: RelPath,
    /// A directory (for a delete: what it was).
    pub is_dir: bool,
}

/// A path with raw events waiting for its quiet period to end.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Arrival order of the first event, so changes come out in the order they began
    /// (a directory's creation before its files').
    seq: u64,
    /// First raw event: bounds the delay of a path that never goes quiet.
    first: Instant,
    /// Last raw event.
    last: Instant,
}

/// The debouncer and what it knows of the tree.
#[derive(Debug)]
pub(crate) struct Coalescer {
    /// Paths seen to exist, and whether each is a directory.
    known: Known,
    /// Paths with raw events not yet settled.
    pending: HashMap<RelPath, Pending>,
    /// Next arrival number.
    seq: u64,
    /// Quiet time before a path settles.
    debounce: Duration,
    /// Longest a busy path waits before it settles anyway.
    max_delay: Duration,
}

impl Coalescer {
    /// A coalescer with the given quiet time.
    pub(crate) fn new(debounce: Duration) -> Coalescer {
        Coalescer {
            known: Known::default(),
            pending: HashMap::new(),
            seq: 0,
            debounce,
            max_delay: (debounce * 10).max(Duration::from_secs(1)),
        }
    }

    /// Records an existing path without an event (initial scan).
    pub(crate) fn record(&mut self, path: &RelPath, is_dir: bool) {
        self.known.record(path, is_dir);
    }

    /// Gives back what the initial scan's records held spare.
    pub(crate) fn compact(&mut self) {
        self.known.compact();
    }

    /// Whether `path` is known to exist.
    pub(crate) fn knows(&mut self, path: &RelPath) -> bool {
        self.known.get(path).is_some()
    }

    /// The known paths that are `start` or lie beneath it (for a rescan's comparison).
    pub(crate) fn known_beneath(&self, start: &RelPath) -> Vec<RelPath> {
        self.known.beneath(start)
    }

    /// A raw event touched `path` at `now`.
    pub(crate) fn note(&mut self, path: RelPath, now: Instant) {
        let seq = self.seq;
        self.seq += 1;
        self.pending
            .entry(path)
            .and_modify(|p| p.last = now)
            .or_insert(Pending {
                seq,
                first: now,
                last: now,
            });
    }

    /// When the next pending path settles, if any.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|p| self.deadline(p)).min()
    }

    fn deadline(&self, p: &Pending) -> Instant {
        (p.last + self.debounce).min(p.first + self.max_delay)
    }

    /// Removes and returns the paths whose quiet period has ended, in arrival order.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<RelPath> {
        let mut due: Vec<(u64, RelPath)> = self
            .pending
            .iter()
            .filter(|(_, p)| self.deadline(p) <= now)
            .map(|(path, p)| (p.seq, path.clone()))
            .collect();
        due.sort_unstable_by_key(|(seq, _)| *seq);
        for (_, path) in &due {
            self.pending.remove(path);
        }
        due.into_iter().map(|(_, p)| p).collect()
    }

    /// Settles `path` given what it is now (`Some(is_dir)`, or `None` if gone), updating
    /// what is known. A path that changed type gives a delete and a create.
    pub(crate) fn settle(&mut self, path: &RelPath, now: Option<bool>) -> Vec<Change> {
        let before = self.known.get(path);
        let change = |kind, is_dir| Change {
            kind,
            path: path.clone(),
            is_dir,
        };
        match (before, now) {
            (None, None) => Vec::new(),
            (None, Some(d)) => {
                self.known.insert(path, d);
                vec![change(ChangeKind::Create, d)]
            }
            (Some(b), None) => {
                // Moved away whole, a directory's entries get no events of their own.
                self.known.remove(path);
                vec![change(ChangeKind::Delete, b)]
            }
            (Some(b), Some(d)) if b == d => vec![change(ChangeKind::Modify, d)],
            (Some(b), Some(d)) => {
                self.known.remove(path);
                self.known.insert(path, d);
                vec![change(ChangeKind::Delete, b), change(ChangeKind::Create, d)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::watch::*;

    fn p(s: &str) -> RelPath {
        RelPath::parse_rooted(s).expect("path")
    }

    #[test]
    fn a_burst_on_one_path_settles_once_after_the_quiet_time() {
        let mut c = Coalescer::new(Duration::from_millis(100));
        let t0 = Instant::now();
        c.note(p("a.txt"), t0);
        c.note(p("a.txt"), t0 + Duration::from_millis(50));
        assert!(c.due(t0 + Duration::from_millis(120)).is_empty());
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_millis(150)));
        assert_eq!(c.due(t0 + Duration::from_millis(150)), vec![p("a.txt")]);
        assert_eq!(c.next_deadline(), None);
        assert_eq!(
            c.settle(&p("a.txt"), Some(false)),
            vec![Change {
                kind: ChangeKind::Create,
                path: p("a.txt"),
                is_dir: false
            }]
        );
    }

    #[test]
    fn a_busy_path_settles_after_the_maximum_delay() {
        let mut c = Coalescer::new(Duration::from_millis(100));
        let t0 = Instant::now();
        for i in 0..30 {
            c.note(p("log"), t0 + Duration::from_millis(i * 50));
        }
        assert_eq!(c.next_deadline(), Some(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn replace_of_a_known_file_is_a_modify_and_removal_a_delete() {
        let mut c = Coalescer::new(Duration::ZERO);
        c.record(&p("src/a.rs"), false);
        let m = c.settle(&p("src/a.rs"), Some(false));
        assert_eq!(m[0].kind, ChangeKind::Modify);
        let d = c.settle(&p("src/a.rs"), None);
        assert_eq!(
            d,
            vec![Change {
                kind: ChangeKind::Delete,
                path: p("src/a.rs"),
                is_dir: false
            }]
        );
        assert!(
            c.settle(&p("src/a.rs"), None).is_empty(),
            "gone twice is nothing"
        );
    }

    #[test]
    fn created_and_removed_within_a_burst_is_nothing() {
        let mut c = Coalescer::new(Duration::ZERO);
        assert!(c.settle(&p("tmp"), None).is_empty());
    }

    #[test]
    fn deleting_a_directory_forgets_its_entries_and_type_changes_split() {
        let mut c = Coalescer::new(Duration::ZERO);
        c.record(&p("d"), true);
        c.record(&p("d/x"), false);
        c.record(&p("dx"), false);
        let d = c.settle(&p("d"), None);
        assert_eq!(d[0].kind, ChangeKind::Delete);
        assert!(d[0].is_dir);
        assert!(!c.knows(&p("d/x")));
        assert!(c.knows(&p("dx")), "a sibling sharing the prefix stays");
        let t = c.settle(&p("dx"), Some(true));
        assert_eq!(
            t.iter().map(|c| c.kind).collect::<Vec<_>>(),
            vec![ChangeKind::Delete, ChangeKind::Create]
        );
    }

    #[test]
    fn due_paths_come_out_in_arrival_order() {
        let mut c = Coalescer::new(Duration::ZERO);
        let t0 = Instant::now();
        c.note(p("b"), t0);
        c.note(p("a"), t0);
        c.note(p("b"), t0);
        assert_eq!(c.due(t0), vec![p("b"), p("a")]);
    }
}
