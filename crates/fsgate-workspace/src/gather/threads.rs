//! The walk on several threads: the directories left to enter walked apart, each by
//! whichever thread is free, and what they kept put in its place in the start's order.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use cap_std::fs::Dir;

use super::answer::{Gathered, Reading, Room, Take, Tally};
use super::plan::{Item, SPLIT_LEVELS, Sub, plan};
use super::shared::Shared;
use crate::error::WsError;
use crate::root::Workspace;
use crate::walk::{Entry, Keeping, MAX_DEPTH, Visit, open_readable, walk_from};
use fsgate_base::path::RelPath;

/// Directories to walk apart a thread, below which the directories to walk apart are
/// split into their own (their entries decided here, in order): a start with a few large
/// directories would leave a thread idle while another walks the last of them.
pub(super) const UNITS_PER_THREAD: usize = 8;

/// Directories to walk apart below which they are split, whatever the threads: the
/// directories split stay open until the walks end.
pub(super) const MAX_UNITS: usize = 64;

/// Directories to walk apart, below which they are split, with `helpers` helpers.
pub(super) fn units(helpers: usize) -> usize {
    UNITS_PER_THREAD.saturating_mul(helpers + 1).min(MAX_UNITS)
}

/// What one directory's walk kept, with each item's cost.
pub(super) struct Chunk<T> {
    pub(super) items: Vec<(T, u64)>,
    /// The depth limit cut it.
    pub(super) deep: bool,
    /// Walked to its end (not stopped because the answer's room was spent).
    whole: bool,
}

impl<T> Chunk<T> {
    pub(super) fn of(items: Vec<(T, u64)>) -> Chunk<T> {
        Chunk {
            items,
            deep: false,
            whole: true,
        }
    }
}

type Found<T> = Result<Chunk<T>, WsError>;

/// The walk on this thread and up to `helpers` more (none when one directory or none
/// is left to walk apart), the directories to walk apart split until there are `units`
/// of them (or [`SPLIT_LEVELS`] are decided here); None: the single walk must answer
/// (see the module's comment).
pub(super) fn on_threads<T: Send, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    ws: &Workspace,
    (start, reading, room): (&RelPath, Reading, Room),
    new_decider: &(dyn Fn() -> D + Sync),
    (helpers, units): (usize, usize),
) -> Option<Gathered<T>> {
    if MAX_DEPTH <= SPLIT_LEVELS + 1 {
        return None;
    }
    let shared = Shared::new(room);
    let plan = plan(ws, (start, reading), &shared, &mut new_decider(), units)?;
    let found = match plan.subs.is_empty() {
        // Every entry was decided here: the items are the answer.
        true => Vec::new(),
        false => walk_apart(
            (&plan.dirs, &plan.subs, reading),
            &shared,
            new_decider,
            helpers,
        ),
    };
    let all = assemble(plan.items, found, room);
    if all.is_none() {
        tracing::debug!(
            "walk: a directory's walk failed or stopped early; walked again on one thread"
        );
    }
    all
}

/// Walks each directory of `subs` (depth-first in name order, as deep as the single
/// walk would go on beneath it) on this thread and up to `helpers` more.
fn walk_apart<T: Send, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    (dirs, subs, reading): (&[Dir], &[Sub], Reading),
    shared: &Shared,
    new_decider: &(dyn Fn() -> D + Sync),
    helpers: usize,
) -> Vec<Option<Found<T>>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Found<T>>>> = subs.iter().map(|_| Mutex::new(None)).collect();
    let work = || {
        let mut decide = new_decider();
        loop {
            let i = next.fetch_add(1, Ordering::AcqRel);
            let Some(sub) = subs.get(i) else {
                break;
            };
            // Directories are started in order: none after the cut is needed.
            if !shared.needed(i) {
                break;
            }
            let found = match dirs.get(sub.parent) {
                Some(parent) => walk_one((parent, sub, i), reading, shared, &mut decide),
                None => Err(WsError::NotFound),
            };
            *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(found);
        }
    };
    std::thread::scope(|s| {
        // A helper that cannot start leaves its share to the others.
        let started: Vec<_> = (0..helpers.min(subs.len() - 1))
            .filter_map(|_| {
                let helper = std::thread::Builder::new().name("fsgate-walk".into());
                helper.spawn_scoped(s, work).ok()
            })
            .collect();
        work();
        // Joined, not only finished: a helper's thread-locals (its listing buffer) are
        // freed before the answer is given. A helper that panicked left its directory's
        // slot empty: the single walk answers.
        for h in started {
            if h.join().is_err() {
                tracing::error!("walk: a helper thread panicked; walked again on one thread");
            }
        }
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .collect()
}

/// One directory's walk (`sub`, in `parent`), as the single walk would go on beneath
/// it; one that cannot be opened is passed over if the single walk passes it over.
fn walk_one<T, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    (parent, sub, idx): (&Dir, &Sub, usize),
    reading: Reading,
    shared: &Shared,
    decide: &mut D,
) -> Found<T> {
    let dir = match open_readable(parent, &sub.name) {
        Ok(dir) => dir,
        Err(_) if reading.lenient() => return Ok(Chunk::of(Vec::new())),
        Err(e) => return Err(WsError::from_io(e)),
    };
    let mut out = Vec::new();
    let (mut whole, mut own) = (true, (0, 0));
    let mut visit = |e: Cow<'_, Entry>| {
        if !shared.needed(idx) {
            whole = false;
            return Visit::Stop;
        }
        let v = shared.step(decide(e), (&mut out, &mut own, idx));
        whole &= v != Visit::Stop;
        v
    };
    let walked = walk_from(
        (dir, true),
        &sub.path,
        MAX_DEPTH - sub.level,
        reading.mode(),
        &mut Keeping(&mut visit),
    )?;
    Ok(Chunk {
        items: out,
        deep: walked.truncated(),
        whole,
    })
}

/// What was kept, in the start's order, cut where the single walk would cut it; None if
/// any directory's walk before that point failed, did not run, or was stopped before
/// its end.
pub(super) fn assemble<T>(
    items: Vec<Item<T>>,
    found: Vec<Option<Found<T>>>,
    room: Room,
) -> Option<Gathered<T>> {
    let mut found: Vec<Option<Chunk<T>>> =
        found.into_iter().map(|f| f.and_then(Result::ok)).collect();
    let mut tally = Tally::new(room);
    let mut deep = false;
    for item in items {
        let chunk = match item {
            Item::Kept(item, cost) => {
                if !tally.add(item, cost) {
                    return Some(tally.finish(deep));
                }
                continue;
            }
            Item::Sub(i) => found.get_mut(i)?.take()?,
        };
        deep |= chunk.deep;
        for (item, cost) in chunk.items {
            if !tally.add(item, cost) {
                return Some(tally.finish(deep));
            }
        }
        if !chunk.whole {
            return None;
        }
    }
    Some(tally.finish(deep))
}

#[cfg(test)]
mod tests {
    use super::super::answer::Cut;
    use super::super::single;
    use super::*;
    use crate::open::open_dir;
    use globset::{Glob, GlobMatcher};

    /// A tree with files at the start and beneath it, a hidden directory, a hidden
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

    fn visible(e: &Entry) -> bool {
        !e.path.as_str().starts_with("hidden") && e.name != "skip.rs"
    }

    /// What any item costs: [`ONE`] and `extra`.
    fn cost(_: &Entry, extra: u64) -> u64 {
        ONE + extra
    }

    const ONE: u64 = 10;

    /// One thread's decider.
    type Decider<'g, T> = Box<dyn FnMut(Cow<'_, Entry>) -> Take<T> + 'g>;

    /// A glob's decider: visible matches kept, every visible directory entered.
    fn globbing<'g>(
        glob: &'g GlobMatcher,
        extra: u64,
    ) -> impl Fn() -> Decider<'g, RelPath> + Sync + 'g {
        move || {
            Box::new(
                move |e: Cow<'_, Entry>| match (visible(&e), glob.is_match(e.path.as_str())) {
                    (false, _) => Take::Skip,
                    (true, false) => Take::Enter,
                    (true, true) => Take::Keep {
                        cost: cost(&e, extra),
                        item: e.into_owned().path,
                        enter: true,
                    },
                },
            )
        }
    }

    /// A tree's decider: every visible entry kept, entered down to `depth` levels below
    /// `start`.
    fn listing(start: usize, depth: usize) -> impl Fn() -> Decider<'static, Entry> + Sync {
        move || {
            Box::new(move |e: Cow<'_, Entry>| {
                if !visible(&e) {
                    return Take::Skip;
                }
                let level = e.path.components().count() - start;
                Take::Keep {
                    cost: cost(&e, 0),
                    item: e.into_owned(),
                    enter: level < depth,
                }
            })
        }
    }

    fn rel(s: &str) -> RelPath {
        if s.is_empty() {
            RelPath::root()
        } else {
            RelPath::parse_rooted(s).expect("path")
        }
    }

    fn glob(pattern: &str) -> GlobMatcher {
        Glob::new(pattern).expect("glob").compile_matcher()
    }

    fn room(bytes: u64, items: usize) -> Room {
        Room { bytes, items }
    }

    fn paths(g: &Gathered<Entry>) -> Vec<&str> {
        g.items.iter().map(|e| e.path.as_str()).collect()
    }

    /// Directories to walk apart before the split (none) and after it.
    const SPLITS: [usize; 2] = [0, 64];

    /// On one helper or three, split or not, a glob's answer is the single walk's, path
    /// for path and in its order: matches at the start between the directories walked
    /// apart, hidden entries left out, hidden directories not entered.
    #[test]
    fn the_threaded_walk_answers_what_the_single_walk_does() {
        let (_tmp, ws) = tree();
        let all = room(u64::MAX, usize::MAX);
        for pattern in ["**/*.rs", "**", "*.rs", "**/nothing"] {
            let g = glob(pattern);
            let how = (&rel(""), Reading::Names, all);
            let want = single(&ws, how, &mut globbing(&g, 0)()).expect("single walk");
            for (helpers, units) in [1, 3].into_iter().flat_map(|h| SPLITS.map(|u| (h, u))) {
                let got = on_threads(&ws, how, &globbing(&g, 0), (helpers, units));
                assert_eq!(
                    got,
                    Some(want.clone()),
                    "{pattern} on {helpers}, split to {units}"
                );
            }
        }
        // From a start other than the root, with extra bytes per path.
        let g = glob("a/**/*");
        let how = (&rel("a"), Reading::Names, room(u64::MAX / 2, usize::MAX));
        let want = single(&ws, how, &mut globbing(&g, 100)()).expect("single walk");
        assert_eq!(on_threads(&ws, how, &globbing(&g, 100), (1, 0)), Some(want));
        let g = glob("**/*.rs");
        let all_rs = single(&ws, (&rel(""), Reading::Names, all), &mut globbing(&g, 0)());
        let all_rs = all_rs.expect("single walk");
        let shown: Vec<&str> = all_rs.items.iter().map(RelPath::as_str).collect();
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
        assert_eq!(all_rs.cut, Cut::None);
    }

    /// A tree's answer: directories kept and entered, down to its depth, the same on
    /// threads, split or not.
    #[test]
    fn a_tree_is_gathered_as_the_single_walk_gathers_it() {
        let (_tmp, ws) = tree();
        for (start, depth) in [("", 2), ("", 9), ("a", 1), ("a", 5)] {
            let base = rel(start);
            let how = (&base, Reading::NamesStrictly, room(u64::MAX, usize::MAX));
            let decider = listing(base.components().count(), depth);
            let want = single(&ws, how, &mut decider()).expect("single walk");
            assert!(paths(&want).iter().all(|p| !p.starts_with("hidden")));
            // Split or not; with no directory, one, or several left to walk apart.
            for (helpers, units) in [1, 3].into_iter().flat_map(|h| SPLITS.map(|u| (h, u))) {
                let got = on_threads(&ws, how, &decider, (helpers, units));
                assert_eq!(got.as_ref(), Some(&want), "{start:?} to {depth}, {units}");
            }
        }
        let how = (&rel(""), Reading::Names, room(u64::MAX, 99));
        let two = single(&ws, how, &mut listing(0, 2)()).expect("single walk");
        assert!(paths(&two).contains(&"a/x") && !paths(&two).contains(&"a/x/2.rs"));
    }

    /// A start with a few large directories is split into theirs, in order, down to
    /// [`SPLIT_LEVELS`]; the answer is the same.
    #[test]
    fn a_few_large_directories_are_split_into_their_own() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for d in 0..12 {
            for s in 0..3 {
                let dir = tmp.path().join(format!("big/d{d:02}/s{s}/t"));
                std::fs::create_dir_all(&dir).expect("mkdir");
                std::fs::write(dir.join("f.rs"), "x").expect("write");
            }
        }
        std::fs::create_dir_all(tmp.path().join("small")).expect("mkdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        let g = glob("**");
        let shared = Shared::new(room(u64::MAX, usize::MAX));
        let subs = |units| {
            let plan = plan(
                &ws,
                (&rel(""), Reading::Names),
                &shared,
                &mut globbing(&g, 0)(),
                units,
            );
            let plan = plan.expect("planned");
            plan.subs
                .iter()
                .map(|s| s.path.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(subs(2), ["big", "small"]);
        // Split twice: the levels below `big` are decided here.
        let split = subs(16);
        assert_eq!(split.len(), 36, "{split:?}");
        assert_eq!(split.first().map(String::as_str), Some("big/d00/s0"));
        assert_eq!(split.last().map(String::as_str), Some("big/d11/s2"));
        let how = (&rel(""), Reading::Names, room(u64::MAX, usize::MAX));
        let want = single(&ws, how, &mut globbing(&g, 0)()).expect("single walk");
        assert_eq!(want.items.len(), 12 * (1 + 3 * 3) + 2);
        for units in [2, 16, 64] {
            assert_eq!(
                on_threads(&ws, how, &globbing(&g, 0), (1, units)),
                Some(want.clone())
            );
        }
        // Cut within what was decided before the walks apart: the single walk answers.
        let how = (&rel(""), Reading::Names, room(u64::MAX, 5));
        assert_eq!(on_threads(&ws, how, &globbing(&g, 0), (1, 64)), None);
    }

    /// Past the answer's room, in bytes or in items, the answer is cut where the single
    /// walk cuts it: always when the directories are walked in turn (no helper, no
    /// split), and on helpers or split whenever the directories before the cut were
    /// walked whole (else the single walk answers): each way of walking places a cut.
    /// With one directory, the walk answers on this thread.
    #[test]
    fn a_full_answer_is_cut_where_the_single_walk_cuts_it() {
        let (_tmp, ws) = tree();
        let g = glob("**/*.rs");
        let one_path = ONE;
        // Cuts placed on helpers, split or not, and split on this thread alone.
        let ways = [(3, 0), (3, 64), (0, 64)];
        let mut answered = [0; 3];
        for n in 0..10 {
            let how = (&rel(""), Reading::Names, room(n * one_path, usize::MAX));
            let want = single(&ws, how, &mut globbing(&g, 0)()).expect("single walk");
            assert_eq!(
                want.cut == Cut::Room,
                n < 9,
                "the single walk is cut below 9 paths"
            );
            // By items: the tree's decider, room for n entries.
            let by_items = (&rel(""), Reading::Names, room(u64::MAX, n as usize * 3));
            let want_items = single(&ws, by_items, &mut listing(0, 99)()).expect("single walk");
            // 21 entries are visible, 7 of them at the start.
            assert_eq!(want_items.cut == Cut::Room, n * 3 < 21);
            // Below two paths the start's own two matches fill the room: the single
            // walk answers.
            let alone = on_threads(&ws, how, &globbing(&g, 0), (0, 0));
            if n >= 2 {
                assert_eq!(alone.as_ref(), Some(&want), "room for {n} paths, no helper");
                let extra = (
                    &rel(""),
                    Reading::Names,
                    room(n * (one_path + 7), usize::MAX),
                );
                let want = single(&ws, extra, &mut globbing(&g, 7)()).expect("single walk");
                assert_eq!(on_threads(&ws, extra, &globbing(&g, 7), (0, 0)), Some(want));
            } else {
                assert_eq!(alone, None, "room for {n} paths, no helper");
            }
            let alone = on_threads(&ws, by_items, &listing(0, 99), (0, 0));
            if n * 3 >= 7 {
                assert_eq!(
                    alone,
                    Some(want_items.clone()),
                    "room for {} entries",
                    n * 3
                );
            } else {
                assert_eq!(alone, None, "room for {} entries, no helper", n * 3);
            }
            for (way, (helpers, units)) in ways.into_iter().enumerate().cycle().take(30) {
                let cut = want.cut == Cut::Room;
                if let Some(got) = on_threads(&ws, how, &globbing(&g, 0), (helpers, units)) {
                    assert_eq!(got, want, "room for {n} paths, {helpers} helpers, {units}");
                    answered[way] += usize::from(cut);
                }
                let cut = want_items.cut == Cut::Room;
                if let Some(got) = on_threads(&ws, by_items, &listing(0, 99), (helpers, units)) {
                    assert_eq!(got, want_items, "room for {} entries, {helpers}", n * 3);
                    answered[way] += usize::from(cut);
                }
            }
        }
        assert!(
            answered.iter().all(|&a| a > 0),
            "cuts placed {answered:?} by {ways:?}"
        );
        let lone = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(lone.path().join("only/sub")).expect("mkdir");
        std::fs::write(lone.path().join("only/sub/a.rs"), "x").expect("write");
        let ws = Workspace::open(lone.path()).expect("open");
        let how = (&rel(""), Reading::Names, room(u64::MAX, usize::MAX));
        let want = single(&ws, how, &mut globbing(&g, 0)()).expect("single walk");
        assert_eq!(want.items.len(), 1);
        for units in SPLITS {
            let got = on_threads(&ws, how, &globbing(&g, 0), (1, units));
            assert_eq!(got.as_ref(), Some(&want), "one directory, split to {units}");
        }
    }

    /// A tree deeper than the walk goes is cut where the single walk cuts it.
    #[test]
    fn the_depth_limit_cuts_as_in_the_single_walk() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let deep: String = (0..MAX_DEPTH + 2).map(|_| "d/").collect();
        std::fs::create_dir_all(tmp.path().join(&deep)).expect("mkdir");
        std::fs::create_dir_all(tmp.path().join("other/x/y/z")).expect("mkdir");
        std::fs::write(tmp.path().join("other/a.rs"), "x").expect("write");
        let ws = Workspace::open(tmp.path()).expect("open");
        let g = glob("**");
        let how = (&rel(""), Reading::Names, room(u64::MAX, usize::MAX));
        let want = single(&ws, how, &mut globbing(&g, 0)()).expect("single walk");
        assert_eq!(want.cut, Cut::Depth, "the single walk was cut");
        for units in SPLITS {
            assert_eq!(
                on_threads(&ws, how, &globbing(&g, 0), (1, units)),
                Some(want.clone())
            );
        }
    }

    /// A directory that cannot be opened (here: gone since it was listed) is passed
    /// over when reading leniently, and is an error (the single walk's, which then
    /// answers) when reading strictly.
    #[test]
    fn a_directory_that_cannot_be_opened_is_treated_as_the_single_walk_treats_it() {
        let (_tmp, ws) = tree();
        let start = open_dir(&ws.root, &rel("")).expect("open");
        let shared = Shared::new(room(u64::MAX, usize::MAX));
        let all = glob("**");
        let mut decide = globbing(&all, 0)();
        let sub = |name: &str| Sub {
            parent: 0,
            name: name.into(),
            path: rel(name),
            level: 1,
        };
        let gone = sub("gone");
        let lenient = walk_one((&start, &gone, 0), Reading::Names, &shared, &mut decide);
        let chunk = lenient.expect("passed over");
        assert!(chunk.items.is_empty() && chunk.whole && !chunk.deep);
        let strict = walk_one(
            (&start, &gone, 0),
            Reading::NamesStrictly,
            &shared,
            &mut decide,
        );
        assert!(
            matches!(strict, Err(WsError::NotFound)),
            "{:?}",
            strict.err()
        );
        let a = sub("a");
        let here = walk_one(
            (&start, &a, 0),
            Reading::NamesStrictly,
            &shared,
            &mut decide,
        );
        let kept: Vec<String> = here
            .expect("walked")
            .items
            .into_iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(
            kept,
            [
                "a/1.rs",
                "a/v",
                "a/v/0.rs",
                "a/x",
                "a/x/2.rs",
                "a/x/y",
                "a/x/y/3.rs"
            ]
        );
    }

    /// A start that is gone: nothing, when reading leniently (as a glob answers); the
    /// error when reading strictly (as a tree answers).
    #[test]
    fn a_start_that_is_gone_is_nothing_or_the_error() {
        let (_tmp, ws) = tree();
        let g = glob("**");
        let lenient = (&rel("gone"), Reading::Names, room(u64::MAX, usize::MAX));
        let got = ws.gather(lenient.0, (lenient.1, lenient.2), &globbing(&g, 0));
        assert_eq!(got.expect("nothing").items, Vec::<RelPath>::new());
        let strict = (Reading::NamesStrictly, room(u64::MAX, usize::MAX));
        let got = ws.gather(&rel("gone"), strict, &globbing(&g, 0));
        assert!(matches!(got, Err(WsError::NotFound)), "{got:?}");
    }

    /// A directory that cannot be opened when its entries are to be decided before the
    /// walks apart (here: gone since it was listed) is passed over when reading
    /// leniently; reading strictly, the single walk answers (with its error).
    #[test]
    fn a_directory_gone_before_its_split_is_treated_as_the_single_walk_treats_it() {
        let (tmp, ws) = tree();
        let g = glob("**");
        for (reading, kept) in [(Reading::Names, true), (Reading::NamesStrictly, false)] {
            let shared = Shared::new(room(u64::MAX, usize::MAX));
            let mut decide = globbing(&g, 0)();
            let plan = plan(&ws, (&rel(""), reading), &shared, &mut decide, 0).expect("plan");
            let subs: Vec<String> = plan.subs.iter().map(|s| s.path.to_string()).collect();
            assert_eq!(subs, ["a", "b", "c", "e", "f"]);
            std::fs::rename(tmp.path().join("c"), tmp.path().join("c-moved")).expect("move");
            let split = plan.split(reading, &shared, &mut decide);
            std::fs::rename(tmp.path().join("c-moved"), tmp.path().join("c")).expect("back");
            let Some(split) = split else {
                assert!(!kept, "a lenient split passes the directory over");
                continue;
            };
            assert!(kept, "a strict split gives way to the single walk");
            let subs: Vec<String> = split.subs.iter().map(|s| s.path.to_string()).collect();
            assert_eq!(subs, ["a/v", "a/x", "f/g"], "c/deep passed over");
        }
    }
}
