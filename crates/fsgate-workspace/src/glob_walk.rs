//! A glob's walk on up to one thread per core, with the answer a single walk gives.
//!
//! The base directory's entries are decided here in name order; each directory among
//! them that the walk enters is walked apart (depth-first in name order, as the single
//! walk does), by whichever thread is free, and its matches are put in its place in
//! the base's order. The answer is then the single walk's, path for path.
//!
//! The matches held here never exceed about twice the answer's room: the base's own
//! matches at most the room (past it, the single walk answers); a directory's walk stops
//! once its own matches fill the room, and with it every walk of a directory after it
//! (the cut lies in it or before it); every walk stops once all hold twice the room.
//! The answer is cut where the single walk would cut it, if every directory before that
//! point was walked to its end or to its own full room. Each directory is opened when
//! its walk starts, as the single walk opens it (never all at once: a base may hold
//! more directories than the process may hold descriptors).
//!
//! What the single walk does differently is left to it: a cut this walk cannot place,
//! any directory's walk that fails (it answers what it found before), no helper thread
//! free (see `search_pool::Permits`, shared with grep), a base with fewer than two
//! directories to enter.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use cap_std::fs::Dir;
use globset::GlobMatcher;

use super::open::open_dir;
use super::search_pool::Permits;
use super::walk::{Entry, MAX_DEPTH, Mode, Plain, Visit, open_readable, read_entries, walk_dir};
use super::{FileKind, Workspace, WsError};
use fsgate_base::path::RelPath;

use super::search::path_cost;

/// One place in the base's order: a match among its entries, or a directory walked apart.
enum Item {
    Match(RelPath),
    Sub(usize),
}

/// What one directory's walk found.
struct Chunk {
    paths: Vec<RelPath>,
    /// The depth limit cut it.
    cut: bool,
    /// Walked to its end (not stopped because the answer's room was spent).
    whole: bool,
}

type Found = Result<Chunk, WsError>;

/// A directory of the base to walk apart: its name there and its path.
type Sub = (String, RelPath);

/// Matches held at most, in answer bytes, against the answer's room: one directory's
/// walk may fill the room alone (the cut then lies in it or before it) while the others
/// go on.
const HELD_ROOMS: u64 = 2;

/// The matches and room shared by the threads of one glob.
struct Shared<'g> {
    glob: &'g GlobMatcher,
    /// Bytes the answer may hold, and the extra bytes per path.
    room: (u64, u64),
    /// Answer bytes of the matches every thread holds.
    used: AtomicU64,
    /// Past [`HELD_ROOMS`] rooms: every thread stops.
    over: AtomicBool,
    /// The first directory (in the base's order) whose own matches filled the room: the
    /// cut lies in it or before it, so no directory after it is needed.
    cut_at: AtomicUsize,
}

impl Shared<'_> {
    /// Counts a match of directory `idx` in, to its `own` bytes and to all; false once
    /// that directory alone fills the room (it and those after it stop) or all hold more
    /// than they may (all stop).
    fn admit(&self, path: &RelPath, own: &mut u64, idx: usize) -> bool {
        let bytes = path_cost(path, self.room.1);
        *own += bytes;
        let used = self.used.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if used > self.room.0.saturating_mul(HELD_ROOMS) {
            self.over.store(true, Ordering::Release);
        }
        if *own > self.room.0 {
            self.cut_at.fetch_min(idx, Ordering::AcqRel);
            return false;
        }
        !self.over.load(Ordering::Acquire)
    }

    /// Whether directory `idx` is still needed (see `cut_at`, `over`).
    fn needed(&self, idx: usize) -> bool {
        !self.over.load(Ordering::Acquire) && idx <= self.cut_at.load(Ordering::Acquire)
    }

    /// The visit of one entry of directory `idx`: as the single walk's, with its own
    /// `visible`; `own`: the answer bytes of that directory's matches so far.
    fn visit(
        &self,
        visible: &mut dyn FnMut(&Entry) -> bool,
        e: &Entry,
        (out, own, idx): (&mut Vec<RelPath>, &mut u64, usize),
    ) -> Visit {
        if !self.needed(idx) {
            return Visit::Stop;
        }
        if !visible(e) {
            return Visit::Skip;
        }
        if self.glob.is_match(e.path.as_str()) {
            // The match that spends the room is kept too: it shows where to cut.
            out.push(e.path.clone());
            if !self.admit(&e.path, own, idx) {
                return Visit::Stop;
            }
        }
        Visit::Descend
    }
}

/// The glob's matches under `base` as [`Workspace::glob`] gives them without metadata,
/// walked on several threads; None: the single walk must answer (see the module's
/// comment).
pub(crate) fn parallel<V: FnMut(&Entry) -> bool>(
    ws: &Workspace,
    glob: &GlobMatcher,
    base: &RelPath,
    room: (u64, u64),
    new_visible: &(dyn Fn() -> V + Sync),
) -> Option<(Vec<RelPath>, bool)> {
    let permits = Permits::take();
    if permits.count() == 0 {
        tracing::debug!("glob: no helper thread free");
        return None;
    }
    on_threads(ws, (glob, base, room), new_visible, permits.count())
}

/// [`parallel`] on this thread and up to `helpers` more.
fn on_threads<V: FnMut(&Entry) -> bool>(
    ws: &Workspace,
    (glob, base, room): (&GlobMatcher, &RelPath, (u64, u64)),
    new_visible: &(dyn Fn() -> V + Sync),
    helpers: usize,
) -> Option<(Vec<RelPath>, bool)> {
    if MAX_DEPTH < 2 {
        return None;
    }
    let dir = open_dir(&ws.root, base).ok()?;
    let entries = read_entries(&dir, base, Mode::LenientNames).ok()?;
    let shared = Shared {
        glob,
        room,
        used: AtomicU64::new(0),
        over: AtomicBool::new(false),
        cut_at: AtomicUsize::new(usize::MAX),
    };
    let (items, subs) = base_items(entries, &shared, &mut new_visible())?;
    if subs.len() < 2 {
        return None;
    }
    let found = walk_apart((&dir, &subs), &shared, new_visible, helpers);
    let all = assemble(items, found, shared.room);
    if all.is_none() {
        tracing::debug!(
            "glob: a directory's walk failed or stopped early; walked again on one thread"
        );
    }
    all
}

/// The base's entries decided in order: matches, and the directories to walk apart;
/// None once the base's own matches fill the room (the single walk cuts them).
/// [`assemble`] counts every match in order.
fn base_items(
    entries: Vec<Entry>,
    shared: &Shared<'_>,
    visible: &mut dyn FnMut(&Entry) -> bool,
) -> Option<(Vec<Item>, Vec<Sub>)> {
    let mut items = Vec::new();
    let mut subs = Vec::new();
    let mut own = 0u64;
    for e in entries {
        if !visible(&e) {
            continue;
        }
        if shared.glob.is_match(e.path.as_str()) {
            own += path_cost(&e.path, shared.room.1);
            if own > shared.room.0 {
                return None;
            }
            items.push(Item::Match(e.path.clone()));
        }
        if e.kind == FileKind::Directory {
            items.push(Item::Sub(subs.len()));
            subs.push((e.name, e.path));
        }
    }
    Some((items, subs))
}

/// Walks each directory of `subs` (depth-first in name order, one level less deep than
/// the base's own walk may go) on this thread and up to `helpers` more.
fn walk_apart<V: FnMut(&Entry) -> bool>(
    (base, subs): (&Dir, &[Sub]),
    shared: &Shared<'_>,
    new_visible: &(dyn Fn() -> V + Sync),
    helpers: usize,
) -> Vec<Option<Found>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Found>>> = subs.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        let mut visible = new_visible();
        loop {
            let i = next.fetch_add(1, Ordering::AcqRel);
            let Some((name, path)) = subs.get(i) else {
                break;
            };
            // Directories are started in order: none after the cut is needed.
            if !shared.needed(i) {
                break;
            }
            let found = walk_one((base, name, path, i), shared, &mut visible);
            *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(found);
        }
    };
    std::thread::scope(|s| {
        for _ in 0..helpers.min(subs.len() - 1) {
            // A helper that cannot start leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("fsgate-glob".into())
                .spawn_scoped(s, work);
        }
        work();
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .collect()
}

/// One directory's walk (`name` in `base`, at `path`), as the single walk would go on
/// beneath it; one that cannot be opened is passed over, as the single walk passes it.
fn walk_one(
    (base, name, path, idx): (&Dir, &str, &RelPath, usize),
    shared: &Shared<'_>,
    visible: &mut dyn FnMut(&Entry) -> bool,
) -> Found {
    let Ok(start) = open_readable(base, name) else {
        return Ok(Chunk {
            paths: Vec::new(),
            cut: false,
            whole: true,
        });
    };
    let mut out = Vec::new();
    let (mut whole, mut own) = (true, 0u64);
    let mut visit = |e: &Entry| {
        let v = shared.visit(visible, e, (&mut out, &mut own, idx));
        whole &= v != Visit::Stop;
        v
    };
    let walked = walk_dir(
        start,
        path,
        MAX_DEPTH - 1,
        Mode::LenientNames,
        &mut Plain(&mut visit),
    )?;
    Ok(Chunk {
        paths: out,
        cut: walked.truncated(),
        whole,
    })
}

/// The matches in the base's order, cut where the single walk would cut them (past
/// `room`: the answer's bytes, the extra bytes per path); None if any directory's walk
/// before that point failed, did not run, or was stopped before its end.
fn assemble(
    items: Vec<Item>,
    found: Vec<Option<Found>>,
    (room, extra): (u64, u64),
) -> Option<(Vec<RelPath>, bool)> {
    let mut found: Vec<Option<Chunk>> = found.into_iter().map(|f| f.and_then(Result::ok)).collect();
    let mut out = Vec::new();
    let (mut cut, mut used) = (false, 0u64);
    for item in items {
        let chunk = match item {
            Item::Match(p) => Chunk {
                paths: vec![p],
                cut: false,
                whole: true,
            },
            Item::Sub(i) => found.get_mut(i)?.take()?,
        };
        cut |= chunk.cut;
        for p in chunk.paths {
            used += path_cost(&p, extra);
            if used > room {
                return Some((out, true));
            }
            out.push(p);
        }
        if !chunk.whole {
            return None;
        }
    }
    Some((out, cut))
}

#[cfg(test)]
mod tests {
    use super::*;
    use globset::Glob;

    /// A tree with matches at the base and beneath it, a hidden directory, a hidden
    /// file, and more directories than threads.
    fn tree() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let p = tmp.path();
        for d in ["a/v", "a/x/y", "b", "c/deep/er", "hidden/z", "e", "f/g"] {
            std::fs::create_dir_all(p.join(d)).expect("mkdir");
        }
        for f in [
            "top.rs",
            "a/1.rs",
            "a/v/0.rs",
            "a/x/2.rs",
            "a/x/y/3.rs",
            "a/x/y/skip.rs",
            "b/4.txt",
            "c/deep/er/5.rs",
            "hidden/6.rs",
            "hidden/z/7.rs",
            "e/8.rs",
            "f/g/9.rs",
            "zz.rs",
        ] {
            std::fs::write(p.join(f), "x").expect("write");
        }
        let ws = Workspace::open(p).expect("open");
        (tmp, ws)
    }

    fn visible() -> impl FnMut(&Entry) -> bool {
        |e: &Entry| !e.path.as_str().starts_with("hidden") && e.name != "skip.rs"
    }

    /// Where a glob walks from, what it matches, its room and extra bytes per path.
    struct Case<'a> {
        base: &'a str,
        pattern: &'a str,
        room: (u64, u64),
    }

    impl Case<'_> {
        fn of(pattern: &str, room: u64) -> Case<'_> {
            Case {
                base: "",
                pattern,
                room: (room, 0),
            }
        }

        fn base(&self) -> RelPath {
            if self.base.is_empty() {
                RelPath::root()
            } else {
                RelPath::parse_rooted(self.base).expect("base")
            }
        }

        fn glob(&self) -> GlobMatcher {
            Glob::new(self.pattern).expect("glob").compile_matcher()
        }
    }

    /// The single walk's answer: `Workspace::glob` asked for metadata never walks on
    /// threads.
    fn single(ws: &Workspace, c: &Case<'_>) -> (Vec<RelPath>, bool) {
        ws.glob(&c.glob(), &c.base(), c.room, (&visible, true))
            .expect("single walk")
    }

    fn threaded(ws: &Workspace, c: &Case<'_>, helpers: usize) -> Option<(Vec<RelPath>, bool)> {
        on_threads(ws, (&c.glob(), &c.base(), c.room), &visible, helpers)
    }

    /// On one helper or three, the answer is the single walk's, path for path and in
    /// its order: matches at the base between the directories walked apart, hidden
    /// entries left out, hidden directories not entered.
    #[test]
    fn the_threaded_walk_answers_what_the_single_walk_does() {
        let (_tmp, ws) = tree();
        for pattern in ["**/*.rs", "**", "*.rs", "**/nothing"] {
            let c = Case::of(pattern, u64::MAX);
            let want = single(&ws, &c);
            for helpers in [1, 3] {
                let got = threaded(&ws, &c, helpers).expect("threaded");
                assert_eq!(got, want, "{pattern} on {helpers} helpers");
            }
        }
        // From a base other than the root, with extra bytes per path.
        let c = Case {
            base: "a",
            pattern: "a/**/*",
            room: (u64::MAX / 2, 100),
        };
        assert_eq!(threaded(&ws, &c, 1), Some(single(&ws, &c)));
        let (paths, _) = single(&ws, &Case::of("**/*.rs", u64::MAX));
        let shown: Vec<&str> = paths.iter().map(RelPath::as_str).collect();
        assert_eq!(
            shown,
            [
                "a/1.rs",
                "a/v/0.rs",
                "a/x/2.rs",
                "a/x/y/3.rs",
                "c/deep/er/5.rs",
                "e/8.rs",
                "f/g/9.rs",
                "top.rs",
                "zz.rs"
            ]
        );
    }

    /// Past the answer's room the answer is cut where the single walk cuts it: always
    /// when the directories are walked in turn (no helper), and on helpers whenever the
    /// directories before the cut were walked whole (else the single walk answers).
    /// With fewer than two directories to walk apart, the single walk answers.
    #[test]
    fn a_full_answer_is_cut_where_the_single_walk_cuts_it() {
        let (_tmp, ws) = tree();
        let one_path = path_cost(&RelPath::parse_rooted("a/x/y/3.rs").expect("path"), 0);
        let mut answered = 0;
        for n in 0..10 {
            let c = Case::of("**/*.rs", n * one_path);
            let want = single(&ws, &c);
            assert_eq!(want.1, n < 9, "the single walk is cut below 9 paths");
            // Below two paths the base's own two matches fill the room: the single walk
            // answers.
            let alone = threaded(&ws, &c, 0);
            let extra = Case {
                room: (n * (one_path + 7), 7),
                ..Case::of("**/*.rs", 0)
            };
            if n >= 2 {
                assert_eq!(alone.as_ref(), Some(&want), "room for {n} paths, no helper");
                assert_eq!(threaded(&ws, &extra, 0), Some(single(&ws, &extra)));
            } else {
                assert_eq!(alone, None, "room for {n} paths, no helper");
            }
            for _ in 0..20 {
                if let Some(got) = threaded(&ws, &c, 3) {
                    assert_eq!(got, want, "room for {n} paths, 3 helpers");
                    answered += 1;
                }
            }
        }
        assert!(answered > 0, "the threaded walk placed no cut on helpers");
        let lone = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(lone.path().join("only/sub")).expect("mkdir");
        std::fs::write(lone.path().join("only/sub/a.rs"), "x").expect("write");
        let ws = Workspace::open(lone.path()).expect("open");
        assert!(threaded(&ws, &Case::of("**/*.rs", u64::MAX), 1).is_none());
    }

    /// A tree deeper than the walk goes is cut where the single walk cuts it.
    #[test]
    fn the_depth_limit_cuts_as_in_the_single_walk() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let deep: String = (0..MAX_DEPTH + 2).map(|_| "d/").collect();
        std::fs::create_dir_all(tmp.path().join(&deep)).expect("mkdir");
        std::fs::create_dir_all(tmp.path().join("other")).expect("mkdir");
        std::fs::write(tmp.path().join("other/a.rs"), "x").expect("write");
        let ws = Workspace::open(tmp.path()).expect("open");
        let c = Case::of("**", u64::MAX);
        let want = single(&ws, &c);
        assert!(want.1, "the single walk was cut");
        assert_eq!(threaded(&ws, &c, 1), Some(want));
    }
}
