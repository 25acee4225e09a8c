//! A glob's walk on up to one thread per core, with the answer a single walk gives.
//!
//! The base directory's entries are decided here in name order; each directory among
//! them that the walk enters is walked apart (depth-first in name order, as the single
//! walk does), by whichever thread is free, and its matches are put in its place in
//! the base's order. The answer is then the single walk's, path for path.
//!
//! The matches held here never exceed twice the answer's room (a directory's walk stops
//! once its own matches fill the room, every walk once all hold twice the room), and
//! the answer is cut where the single walk would cut it, if every directory before that
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

/// Bytes a path adds to the answer besides its JSON string (see `search::PER_ITEM`).
use super::search::{PER_ITEM, json_string_len};

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
}

impl Shared<'_> {
    /// Counts a match in, to its directory's `own` bytes and to all; false once its
    /// directory alone fills the room (it stops) or all hold more than they may (all
    /// stop).
    fn admit(&self, path: &RelPath, own: &mut u64) -> bool {
        let bytes = json_string_len(path.as_str()) + PER_ITEM + self.room.1;
        *own += bytes;
        let used = self.used.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if used > self.room.0.saturating_mul(HELD_ROOMS) {
            self.over.store(true, Ordering::Release);
        }
        *own <= self.room.0 && !self.over.load(Ordering::Acquire)
    }

    /// The visit of one entry: as the single walk's, with its own `visible`; `own`: the
    /// answer bytes of its directory's matches so far.
    fn visit(
        &self,
        visible: &mut dyn FnMut(&Entry) -> bool,
        e: &Entry,
        (out, own): (&mut Vec<RelPath>, &mut u64),
    ) -> Visit {
        if self.over.load(Ordering::Relaxed) {
            return Visit::Stop;
        }
        if !visible(e) {
            return Visit::Skip;
        }
        if self.glob.is_match(e.path.as_str()) {
            // The match that spends the room is kept too: it shows where to cut.
            out.push(e.path.clone());
            if !self.admit(&e.path, own) {
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
    };
    let (items, subs) = base_items(entries, glob, &mut new_visible());
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

/// The base's entries decided in order: matches, and the directories to walk apart.
/// The base's own matches are not counted against the room here (its listing is in
/// memory already): [`assemble`] counts every match in order.
fn base_items(
    entries: Vec<Entry>,
    glob: &GlobMatcher,
    visible: &mut dyn FnMut(&Entry) -> bool,
) -> (Vec<Item>, Vec<Sub>) {
    let mut items = Vec::new();
    let mut subs = Vec::new();
    for e in entries {
        if !visible(&e) {
            continue;
        }
        if glob.is_match(e.path.as_str()) {
            items.push(Item::Match(e.path.clone()));
        }
        if e.kind == FileKind::Directory {
            items.push(Item::Sub(subs.len()));
            subs.push((e.name, e.path));
        }
    }
    (items, subs)
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
            // Directories are started in order: once those started hold more than the
            // room, the cut lies before this one.
            if shared.over.load(Ordering::Acquire)
                || shared.used.load(Ordering::Acquire) > shared.room.0
            {
                break;
            }
            let found = walk_one((base, name, path), shared, &mut visible);
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
    (base, name, path): (&Dir, &str, &RelPath),
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
        let v = shared.visit(visible, e, (&mut out, &mut own));
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
            used += json_string_len(p.as_str()) + PER_ITEM + extra;
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
        for d in ["a/x/y", "b", "c/deep/er", "hidden/z", "e", "f/g"] {
            std::fs::create_dir_all(p.join(d)).expect("mkdir");
        }
        for f in [
            "top.rs",
            "a/1.rs",
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

    /// The single walk's answer, as `Workspace::glob` makes it.
    fn single(ws: &Workspace, pattern: &str, room: u64) -> (Vec<RelPath>, bool) {
        let glob = Glob::new(pattern).expect("glob").compile_matcher();
        let mut vis = visible();
        let mut out = Vec::new();
        let mut used = 0;
        let mut cut = false;
        let mut visit = |e: &Entry| {
            if !vis(e) {
                return Visit::Skip;
            }
            if glob.is_match(e.path.as_str()) {
                used += json_string_len(e.path.as_str()) + PER_ITEM;
                if used > room {
                    cut = true;
                    return Visit::Stop;
                }
                out.push(e.path.clone());
            }
            Visit::Descend
        };
        let walked = ws.walk_light(&RelPath::root(), &mut visit).expect("walk");
        (out, cut || walked.truncated())
    }

    fn threaded(
        ws: &Workspace,
        pattern: &str,
        room: u64,
        helpers: usize,
    ) -> Option<(Vec<RelPath>, bool)> {
        let glob = Glob::new(pattern).expect("glob").compile_matcher();
        on_threads(ws, (&glob, &RelPath::root(), (room, 0)), &visible, helpers)
    }

    /// On one helper or three, the answer is the single walk's, path for path and in
    /// its order: matches at the base between the directories walked apart, hidden
    /// entries left out, hidden directories not entered.
    #[test]
    fn the_threaded_walk_answers_what_the_single_walk_does() {
        let (_tmp, ws) = tree();
        for pattern in ["**/*.rs", "**", "*.rs", "a/**/*.rs", "**/nothing"] {
            let want = single(&ws, pattern, u64::MAX);
            for helpers in [1, 3] {
                let got = threaded(&ws, pattern, u64::MAX, helpers).expect("threaded");
                assert_eq!(got, want, "{pattern} on {helpers} helpers");
            }
        }
        let (paths, _) = single(&ws, "**/*.rs", u64::MAX);
        let shown: Vec<&str> = paths.iter().map(RelPath::as_str).collect();
        assert_eq!(
            shown,
            [
                "a/1.rs",
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
        let one_path = json_string_len("a/x/y/3.rs") + PER_ITEM;
        for n in 0..9 {
            let room = n * one_path;
            let want = single(&ws, "**/*.rs", room);
            assert_eq!(want.1, n < 8, "the single walk is cut below 8 paths");
            let alone = threaded(&ws, "**/*.rs", room, 0);
            assert_eq!(alone.as_ref(), Some(&want), "room for {n} paths, no helper");
            for _ in 0..20 {
                if let Some(got) = threaded(&ws, "**/*.rs", room, 3) {
                    assert_eq!(got, want, "room for {n} paths, 3 helpers");
                }
            }
        }
        let lone = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(lone.path().join("only/sub")).expect("mkdir");
        std::fs::write(lone.path().join("only/sub/a.rs"), "x").expect("write");
        let ws = Workspace::open(lone.path()).expect("open");
        assert!(threaded(&ws, "**/*.rs", u64::MAX, 1).is_none());
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
        let want = single(&ws, "**", u64::MAX);
        assert!(want.1, "the single walk was cut");
        assert_eq!(threaded(&ws, "**", u64::MAX, 1), Some(want));
    }
}
