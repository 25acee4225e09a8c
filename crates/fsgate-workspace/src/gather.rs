//! A walk that gathers what a decider keeps of each entry (a glob's matches, a tree's
//! entries) up to an answer's room, on up to one thread per core, with the answer a
//! single walk gives.
//!
//! The start directory's entries are decided here in name order, and with them, while
//! there are fewer directories to walk apart than [`UNITS_PER_THREAD`] a thread, the
//! entries of those directories (up to [`SPLIT_LEVELS`] levels): a start with a few large
//! directories would leave a thread idle while another walks the last of them. Each
//! directory left to enter is then walked apart (depth-first in name order, as the single
//! walk does), by whichever thread is free, and what it keeps is put in its place in the
//! start's order. The answer is then the single walk's, item for item.
//!
//! What is held here stays under about three times the answer's room (in bytes and in
//! items): the items decided before the walks apart at most the room (past it, the single
//! walk answers); a directory's walk stops once its own items fill the room, and with it
//! every walk of a directory after it (the cut lies in it or before it); every walk stops
//! once the walks apart hold twice the room. The answer is cut where the single walk
//! would cut it, if every directory before that point was walked to its end or to its own
//! full room. The directories whose entries were decided here stay open until the walks
//! end (at most [`MAX_UNITS`]); each directory walked apart is opened when its walk
//! starts, as the single walk opens it (never all at once: a start may hold more
//! directories than the process may hold descriptors).
//!
//! What the single walk does differently is left to it: a cut this walk cannot place,
//! any directory's walk that fails (it answers what it found before, or the error), no
//! helper thread free (see `search_pool::Permits`, shared with grep), a walk that reads
//! metadata.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use cap_std::fs::Dir;

use super::kind::FileKind;
use super::open::open_dir;
use super::permits::Permits;
use super::walk::{
    Entry, Keeping, MAX_DEPTH, Mode, Visit, open_readable, read_entries, read_opened, walk_dir,
    walk_from,
};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// What a gathering walk does with one entry.
#[derive(Debug)]
pub enum Take<T> {
    /// Neither kept nor entered.
    Skip,
    /// Not kept; entered if it is a directory.
    Enter,
    /// Kept.
    Keep {
        /// What the answer holds of the entry.
        item: T,
        /// The bytes it adds to the answer.
        cost: u64,
        /// Whether it is entered, if it is a directory.
        enter: bool,
    },
}

/// How much one answer may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Answer bytes, as the items' costs add up.
    pub bytes: u64,
    /// Items.
    pub items: usize,
}

/// How a gathering walk reads directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Names and kinds; a directory that cannot be opened is passed over.
    Names,
    /// Names and kinds; a directory that cannot be opened is an error.
    NamesStrictly,
    /// Names, kinds and metadata (one `statx` an entry); a directory that cannot be
    /// opened is passed over. Walked on one thread.
    Metadata,
}

impl Reading {
    /// Whether a directory that cannot be opened is passed over.
    fn lenient(self) -> bool {
        match self {
            Reading::Names | Reading::Metadata => true,
            Reading::NamesStrictly => false,
        }
    }

    fn mode(self) -> Mode {
        match self {
            Reading::Names => Mode::LenientNames,
            Reading::NamesStrictly => Mode::Names,
            Reading::Metadata => Mode::Lenient,
        }
    }
}

/// Where a gathered answer was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Nowhere: it is everything kept beneath the start.
    None,
    /// At the answer's room (the depth limit may have cut it too).
    Room,
    /// At the depth limit ([`MAX_DEPTH`]), not at the room.
    Depth,
}

/// A gathering walk's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gathered<T> {
    /// What was kept, in the walk's order.
    pub items: Vec<T>,
    /// Their cost in answer bytes (when cut at the room: at most the room's bytes).
    pub used: u64,
    /// Where it was cut.
    pub cut: Cut,
}

/// An answer being filled, item by item, up to its room.
#[derive(Debug)]
pub struct Tally<T> {
    room: Room,
    items: Vec<T>,
    used: u64,
    full: bool,
}

impl<T> Tally<T> {
    /// An empty answer with `room`.
    pub fn new(room: Room) -> Tally<T> {
        Tally {
            room,
            items: Vec::new(),
            used: 0,
            full: false,
        }
    }

    /// Adds `item`, costing `cost` bytes, if the answer has room for it; false (the
    /// answer is full, cut before it) if not.
    pub fn add(&mut self, item: T, cost: u64) -> bool {
        let used = self.used.saturating_add(cost);
        if self.items.len() >= self.room.items || used > self.room.bytes {
            self.used = used.min(self.room.bytes);
            self.full = true;
            return false;
        }
        self.used = used;
        self.items.push(item);
        true
    }

    /// The answer; `deep`: the depth limit cut the walk.
    pub fn finish(self, deep: bool) -> Gathered<T> {
        let cut = match (self.full, deep) {
            (true, _) => Cut::Room,
            (false, true) => Cut::Depth,
            (false, false) => Cut::None,
        };
        Gathered {
            items: self.items,
            used: self.used,
            cut,
        }
    }
}

impl Workspace {
    /// Walks beneath the directory `start` (canonical) depth-first in name order, at
    /// most [`MAX_DEPTH`] levels down, gathering what each entry's decider keeps until
    /// the answer's `room` is full. Symlinks are reported, never followed. Each
    /// `new_decider()` decides entries for one thread of the walk (see the module's
    /// comment); the answer is the same on one thread or several.
    pub fn gather<T, D>(
        &self,
        start: &RelPath,
        (reading, room): (Reading, Room),
        new_decider: &(dyn Fn() -> D + Sync),
    ) -> Result<Gathered<T>, WsError>
    where
        T: Send,
        D: FnMut(Cow<'_, Entry>) -> Take<T>,
    {
        if reading != Reading::Metadata {
            let permits = Permits::take();
            if permits.count() == 0 {
                tracing::debug!("walk: no helper thread free");
            } else if let Some(found) = on_threads(
                self,
                (start, reading, room),
                new_decider,
                (permits.count(), units(permits.count())),
            ) {
                return Ok(found);
            }
        }
        single(self, (start, reading, room), &mut new_decider())
    }
}

/// Directories to walk apart, below which they are split, with `helpers` helpers.
fn units(helpers: usize) -> usize {
    UNITS_PER_THREAD.saturating_mul(helpers + 1).min(MAX_UNITS)
}

/// The walk on this thread alone.
fn single<T, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    ws: &Workspace,
    (start, reading, room): (&RelPath, Reading, Room),
    decide: &mut D,
) -> Result<Gathered<T>, WsError> {
    let mut tally = Tally::new(room);
    let mut visit = |e: Cow<'_, Entry>| match decide(e) {
        Take::Skip => Visit::Skip,
        Take::Enter => Visit::Descend,
        Take::Keep { item, cost, enter } => after_keep(tally.add(item, cost), enter),
    };
    let walked = open_dir(&ws.root, start)
        .map_err(WsError::from_io)
        .and_then(|dir| {
            walk_dir(
                dir,
                start,
                MAX_DEPTH,
                reading.mode(),
                &mut Keeping(&mut visit),
            )
        });
    let deep = match walked {
        Ok(walked) => walked.truncated(),
        // The start, or a directory as it was read, gone or no longer a directory: a
        // lenient walk answers what it found before.
        Err(WsError::NotFound | WsError::NotDir) if reading.lenient() => false,
        Err(e) => return Err(e),
    };
    Ok(tally.finish(deep))
}

/// What a walk does after keeping an entry: stop once the room is spent (`admitted`
/// false), else enter it (a directory) if the decider said so.
fn after_keep(admitted: bool, enter: bool) -> Visit {
    match (admitted, enter) {
        (false, _) => Visit::Stop,
        (true, true) => Visit::Descend,
        (true, false) => Visit::Skip,
    }
}

/// One place in the start's order: an item kept among the entries decided before the
/// walks apart, or a directory walked apart.
enum Item<T> {
    Kept(T, u64),
    Sub(usize),
}

/// What one directory's walk kept, with each item's cost.
struct Chunk<T> {
    items: Vec<(T, u64)>,
    /// The depth limit cut it.
    deep: bool,
    /// Walked to its end (not stopped because the answer's room was spent).
    whole: bool,
}

impl<T> Chunk<T> {
    fn of(items: Vec<(T, u64)>) -> Chunk<T> {
        Chunk {
            items,
            deep: false,
            whole: true,
        }
    }
}

type Found<T> = Result<Chunk<T>, WsError>;

/// A directory to walk apart: the directory holding it (an index in [`Plan::dirs`]),
/// its name there, its path, and how deep it is below the start (its entries: one more).
struct Sub {
    parent: usize,
    name: compact_str::CompactString,
    path: RelPath,
    level: usize,
}

/// What is held at most, in answer bytes and in items, against the answer's room: one
/// directory's walk may fill the room alone (the cut then lies in it or before it)
/// while the others go on.
const HELD_ROOMS: u64 = 2;

/// Directories to walk apart a thread, below which the directories to walk apart are
/// split into their own (their entries decided here, in order): a start with a few large
/// directories would leave a thread idle while another walks the last of them.
const UNITS_PER_THREAD: usize = 8;

/// Directories to walk apart below which they are split, whatever the threads: the
/// directories split stay open until the walks end.
const MAX_UNITS: usize = 64;

/// Levels below the start whose entries may be decided here, before the walks apart.
const SPLIT_LEVELS: usize = 3;

/// What the threads of one walk share: the room, and what they hold.
struct Shared {
    room: Room,
    /// Answer bytes and items every thread holds.
    used: AtomicU64,
    held: AtomicU64,
    /// Past [`HELD_ROOMS`] rooms: every thread stops.
    over: AtomicBool,
    /// The first directory (in the start's order) whose own items filled the room: the
    /// cut lies in it or before it, so no directory after it is needed.
    cut_at: AtomicUsize,
}

/// A share of the room so far: bytes and items.
type Own = (u64, u64);

impl Shared {
    fn new(room: Room) -> Shared {
        Shared {
            room,
            used: AtomicU64::new(0),
            held: AtomicU64::new(0),
            over: AtomicBool::new(false),
            cut_at: AtomicUsize::new(usize::MAX),
        }
    }

    /// Whether `own` (bytes, items) is past the room.
    fn past_room(&self, own: Own) -> bool {
        own.0 > self.room.bytes || own.1 > self.room.items as u64
    }

    /// Counts an item of directory `idx` costing `cost` in, to its `own` share and to
    /// all; false once that directory alone fills the room (it and those after it
    /// stop) or all hold more than they may (all stop).
    fn admit(&self, cost: u64, own: &mut Own, idx: usize) -> bool {
        own.0 = own.0.saturating_add(cost);
        own.1 += 1;
        let used = self
            .used
            .fetch_add(cost, Ordering::AcqRel)
            .saturating_add(cost);
        let held = self.held.fetch_add(1, Ordering::AcqRel) + 1;
        let items = self.room.items as u64;
        if used > self.room.bytes.saturating_mul(HELD_ROOMS)
            || held > items.saturating_mul(HELD_ROOMS)
        {
            self.over.store(true, Ordering::Release);
        }
        if self.past_room(*own) {
            self.cut_at.fetch_min(idx, Ordering::AcqRel);
            return false;
        }
        !self.over.load(Ordering::Acquire)
    }

    /// Whether directory `idx` is still needed (see `cut_at`, `over`).
    fn needed(&self, idx: usize) -> bool {
        !self.over.load(Ordering::Acquire) && idx <= self.cut_at.load(Ordering::Acquire)
    }

    /// What the walk of directory `idx` does after `take`; `own`: its share so far.
    fn step<T>(
        &self,
        take: Take<T>,
        (out, own, idx): (&mut Vec<(T, u64)>, &mut Own, usize),
    ) -> Visit {
        match take {
            Take::Skip => Visit::Skip,
            Take::Enter => Visit::Descend,
            Take::Keep { item, cost, enter } => {
                // The item that spends the room is kept too: it shows where to cut.
                out.push((item, cost));
                after_keep(self.admit(cost, own, idx), enter)
            }
        }
    }
}

/// The walk on this thread and up to `helpers` more (none when one directory or none
/// is left to walk apart), the directories to walk apart split until there are `units`
/// of them (or [`SPLIT_LEVELS`] are decided here); None: the single walk must answer
/// (see the module's comment).
fn on_threads<T: Send, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
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

/// The start's entries decided here, the directories to walk apart split until there
/// are `units` of them (or [`SPLIT_LEVELS`] are decided here); None: the single walk
/// must answer.
fn plan<T, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    ws: &Workspace,
    (start, reading): (&RelPath, Reading),
    shared: &Shared,
    decide: &mut D,
    units: usize,
) -> Option<Plan<T>> {
    let dir = open_dir(&ws.root, start).ok()?;
    let entries = read_entries(&dir, start, reading.mode()).ok()?;
    let mut plan = Plan {
        dirs: vec![dir],
        items: Vec::new(),
        subs: Vec::new(),
        own: (0, 0),
    };
    plan.decide(entries, (0, 1), shared, decide)?;
    for _ in 1..SPLIT_LEVELS {
        if plan.subs.is_empty() || plan.subs.len() >= units {
            break;
        }
        plan = plan.split(reading, shared, decide)?;
    }
    Some(plan)
}

/// How the walk is split: the items decided here and the directories to walk apart, in
/// the start's order, with the directories that hold those.
struct Plan<T> {
    dirs: Vec<Dir>,
    items: Vec<Item<T>>,
    subs: Vec<Sub>,
    /// The share of the room the items decided here take.
    own: Own,
}

impl<T> Plan<T> {
    /// Decides `entries`, those of directory `dirs[dir]` at `level` below the start,
    /// in order; None once the items decided here fill the room (the single walk cuts
    /// them). [`assemble`] counts every item in order.
    fn decide<D: FnMut(Cow<'_, Entry>) -> Take<T>>(
        &mut self,
        entries: Vec<Entry>,
        (dir, level): (usize, usize),
        shared: &Shared,
        decide: &mut D,
    ) -> Option<()> {
        for e in entries {
            // As the single walk gives them: what is not a directory owned, directories
            // borrowed (they are entered after).
            if e.kind != FileKind::Directory {
                if let Take::Keep { item, cost, .. } = decide(Cow::Owned(e)) {
                    self.keep(item, cost, shared)?;
                }
                continue;
            }
            match decide(Cow::Borrowed(&e)) {
                Take::Skip => continue,
                Take::Enter => {}
                Take::Keep { item, cost, enter } => {
                    self.keep(item, cost, shared)?;
                    if !enter {
                        continue;
                    }
                }
            }
            self.items.push(Item::Sub(self.subs.len()));
            let (name, path) = (e.name, e.path);
            self.subs.push(Sub {
                parent: dir,
                name,
                path,
                level,
            });
        }
        Some(())
    }

    fn keep(&mut self, item: T, cost: u64, shared: &Shared) -> Option<()> {
        self.own = (self.own.0.saturating_add(cost), self.own.1 + 1);
        self.items.push(Item::Kept(item, cost));
        (!shared.past_room(self.own)).then_some(())
    }

    /// Each directory to walk apart opened and its entries decided here, in its place:
    /// its own directories are walked apart instead. None: the single walk must answer.
    fn split<D: FnMut(Cow<'_, Entry>) -> Take<T>>(
        self,
        reading: Reading,
        shared: &Shared,
        decide: &mut D,
    ) -> Option<Plan<T>> {
        let mut next = Plan {
            dirs: Vec::with_capacity(self.subs.len()),
            items: Vec::with_capacity(self.items.len()),
            subs: Vec::new(),
            own: self.own,
        };
        for item in self.items {
            let sub = match item {
                Item::Kept(item, cost) => {
                    next.items.push(Item::Kept(item, cost));
                    continue;
                }
                Item::Sub(i) => self.subs.get(i)?,
            };
            let dir = match open_readable(self.dirs.get(sub.parent)?, &sub.name) {
                Ok(dir) => dir,
                // Passed over, as the single walk passes it over.
                Err(_) if reading.lenient() => continue,
                Err(_) => return None,
            };
            let entries = read_opened(&dir, &sub.path, reading.mode()).ok()?;
            next.dirs.push(dir);
            next.decide(
                entries,
                (next.dirs.len() - 1, sub.level + 1),
                shared,
                decide,
            )?;
        }
        Some(next)
    }
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
fn assemble<T>(
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
    use super::*;
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
