//! The start's entries decided before the walks apart, split level by level until there
//! are enough directories to walk apart.

use std::borrow::Cow;

use cap_std::fs::Dir;

use super::answer::{Reading, Take};
use super::shared::{Own, Shared};
use crate::kind::FileKind;
use crate::open::open_dir;
use crate::root::Workspace;
use crate::walk::{Entry, open_readable, read_entries, read_opened};
use fsgate_base::path::RelPath;

/// Levels below the start whose entries may be decided here, before the walks apart.
pub(super) const SPLIT_LEVELS: usize = 3;

/// One place in the start's order: an item kept among the entries decided before the
/// walks apart, or a directory walked apart.
pub(super) enum Item<T> {
    Kept(T, u64),
    Sub(usize),
}

/// A directory to walk apart: the directory holding it (an index in [`Plan::dirs`]),
/// its name there, its path, and how deep it is below the start (its entries: one more).
pub(super) struct Sub {
    pub(super) parent: usize,
    pub(super) name: compact_str::CompactString,
    pub(super) path: RelPath,
    pub(super) level: usize,
}

/// The start's entries decided here, the directories to walk apart split until there
/// are `units` of them (or [`SPLIT_LEVELS`] are decided here); None: the single walk
/// must answer.
pub(super) fn plan<T, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
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
pub(super) struct Plan<T> {
    pub(super) dirs: Vec<Dir>,
    pub(super) items: Vec<Item<T>>,
    pub(super) subs: Vec<Sub>,
    /// The share of the room the items decided here take.
    pub(super) own: Own,
}

impl<T> Plan<T> {
    /// Decides `entries`, those of directory `dirs[dir]` at `level` below the start,
    /// in order; None once the items decided here fill the room (the single walk cuts
    /// them). [`assemble`] counts every item in order.
    pub(super) fn decide<D: FnMut(Cow<'_, Entry>) -> Take<T>>(
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
    pub(super) fn split<D: FnMut(Cow<'_, Entry>) -> Take<T>>(
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
