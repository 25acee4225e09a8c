//! A glob's walk on up to one thread per core, with the answer a single walk gives.
//!
//! The base directory's entries are decided here in name order; each directory among
//! them that the walk enters is walked apart (depth-first in name order, as the single
//! walk does), by whichever thread is free, and its matches are put in its place in
//! the base's order. The answer is then the single walk's, path for path.
//!
//! What the single walk does differently is left to it: when the matches outgrow the
//! answer's room (it cuts the answer where the room ends), when any directory's walk
//! fails (it answers what it found before), when no helper thread may start (see
//! `search_pool::Permits`, shared with grep), or when the base holds fewer than two
//! directories to enter. The matches held here never exceed the answer's room: past it,
//! every thread stops and the single walk starts over.

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

/// What one directory's walk found: its matches, and whether the depth limit cut it.
type Found = Result<(Vec<RelPath>, bool), WsError>;

/// A directory of the base to walk apart: its handle and its path.
type Sub = (Dir, RelPath);

/// The matches and room shared by the threads of one glob.
struct Shared<'g> {
    glob: &'g GlobMatcher,
    /// Bytes the answer may hold, and the extra bytes per path.
    room: (u64, u64),
    used: AtomicU64,
    over: AtomicBool,
}

impl Shared<'_> {
    /// Counts a match in; false once the answer's room is spent (every thread stops).
    fn admit(&self, path: &RelPath) -> bool {
        let bytes = json_string_len(path.as_str()) + PER_ITEM + self.room.1;
        let used = self.used.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if used > self.room.0 {
            self.over.store(true, Ordering::Release);
        }
        !self.over.load(Ordering::Acquire)
    }

    /// The visit of one entry: as the single walk's, with its own `visible`.
    fn visit(
        &self,
        visible: &mut dyn FnMut(&Entry) -> bool,
        e: &Entry,
        out: &mut Vec<RelPath>,
    ) -> Visit {
        if self.over.load(Ordering::Relaxed) {
            return Visit::Stop;
        }
        if !visible(e) {
            return Visit::Skip;
        }
        if self.glob.is_match(e.path.as_str()) {
            if !self.admit(&e.path) {
                return Visit::Stop;
            }
            out.push(e.path.clone());
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
    let (items, subs) = base_items(&dir, entries, &shared, &mut new_visible())?;
    if subs.len() < 2 {
        return None;
    }
    let found = walk_apart(&subs, &shared, new_visible, helpers);
    if shared.over.load(Ordering::Acquire) {
        tracing::debug!("glob: past the answer's room; walked again on one thread");
        return None;
    }
    let all = assemble(items, found);
    if all.is_none() {
        tracing::debug!("glob: a directory's walk failed; walked again on one thread");
    }
    all
}

/// The base's entries decided in order: matches, and the directories to walk apart
/// (opened as the single walk opens them; one that cannot be opened is passed over).
/// None: the room was spent.
fn base_items(
    dir: &Dir,
    entries: Vec<Entry>,
    shared: &Shared<'_>,
    visible: &mut dyn FnMut(&Entry) -> bool,
) -> Option<(Vec<Item>, Vec<Sub>)> {
    let mut items = Vec::new();
    let mut subs = Vec::new();
    for e in entries {
        let mut matched = Vec::new();
        match shared.visit(visible, &e, &mut matched) {
            Visit::Stop => return None,
            Visit::Skip => continue,
            Visit::Descend => {}
        }
        items.extend(matched.into_iter().map(Item::Match));
        if e.kind == FileKind::Directory
            && let Ok(sub) = open_readable(dir, &e.name)
        {
            items.push(Item::Sub(subs.len()));
            subs.push((sub, e.path));
        }
    }
    Some((items, subs))
}

/// Walks each directory of `subs` (depth-first in name order, one level less deep than
/// the base's own walk may go) on this thread and up to `helpers` more.
fn walk_apart<V: FnMut(&Entry) -> bool>(
    subs: &[Sub],
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
            let Some((dir, path)) = subs.get(i) else {
                break;
            };
            if shared.over.load(Ordering::Acquire) {
                break;
            }
            let found = walk_one(dir, path, shared, &mut visible);
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

/// One directory's walk, as the single walk would go on beneath it.
fn walk_one(
    dir: &Dir,
    path: &RelPath,
    shared: &Shared<'_>,
    visible: &mut dyn FnMut(&Entry) -> bool,
) -> Found {
    let start = dir.try_clone().map_err(WsError::from_io)?;
    let mut out = Vec::new();
    let mut visit = |e: &Entry| shared.visit(visible, e, &mut out);
    let walked = walk_dir(
        start,
        path,
        MAX_DEPTH - 1,
        Mode::LenientNames,
        &mut Plain(&mut visit),
    )?;
    Ok((out, walked.truncated()))
}

/// The matches in the base's order; None if any directory's walk failed or did not run.
fn assemble(items: Vec<Item>, found: Vec<Option<Found>>) -> Option<(Vec<RelPath>, bool)> {
    let mut found: Vec<Option<(Vec<RelPath>, bool)>> =
        found.into_iter().map(|f| f.and_then(Result::ok)).collect();
    if found.iter().any(Option::is_none) {
        return None;
    }
    let mut out = Vec::new();
    let mut cut = false;
    for item in items {
        match item {
            Item::Match(p) => out.push(p),
            Item::Sub(i) => {
                let (paths, truncated) = found.get_mut(i)?.take()?;
                out.extend(paths);
                cut |= truncated;
            }
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

    /// Past the answer's room the single walk answers (it cuts where the room ends);
    /// so it does with fewer than two directories to walk apart.
    #[test]
    fn a_full_answer_or_a_lone_directory_is_left_to_the_single_walk() {
        let (_tmp, ws) = tree();
        let one_path = json_string_len("a/x/y/3.rs") + PER_ITEM;
        assert!(threaded(&ws, "**/*.rs", 3 * one_path, 1).is_none());
        let (cut, truncated) = single(&ws, "**/*.rs", 3 * one_path);
        assert!(truncated && cut.len() < 8, "{cut:?}");
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
