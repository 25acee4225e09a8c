//! What the threads of one walk share: the answer's room and what they hold of it, and
//! what a walk does once an entry is kept.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::answer::{Room, Take};
use crate::walk::Visit;

/// What is held at most, in answer bytes and in items, against the answer's room: one
/// directory's walk may fill the room alone (the cut then lies in it or before it)
/// while the others go on.
const HELD_ROOMS: u64 = 2;

/// What the threads of one walk share: the room, and what they hold.
pub(super) struct Shared {
    pub(super) room: Room,
    /// Answer bytes and items every thread holds.
    pub(super) used: AtomicU64,
    pub(super) held: AtomicU64,
    /// Past [`HELD_ROOMS`] rooms: every thread stops.
    pub(super) over: AtomicBool,
    /// The first directory (in the start's order) whose own items filled the room: the
    /// cut lies in it or before it, so no directory after it is needed.
    cut_at: AtomicUsize,
}

/// A share of the room so far: bytes and items.
pub(super) type Own = (u64, u64);

impl Shared {
    pub(super) fn new(room: Room) -> Shared {
        Shared {
            room,
            used: AtomicU64::new(0),
            held: AtomicU64::new(0),
            over: AtomicBool::new(false),
            cut_at: AtomicUsize::new(usize::MAX),
        }
    }

    /// Whether `own` (bytes, items) is past the room.
    pub(super) fn past_room(&self, own: Own) -> bool {
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
    pub(super) fn needed(&self, idx: usize) -> bool {
        !self.over.load(Ordering::Acquire) && idx <= self.cut_at.load(Ordering::Acquire)
    }

    /// What the walk of directory `idx` does after `take`; `own`: its share so far.
    pub(super) fn step<T>(
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

/// What a walk does after keeping an entry: stop once the room is spent (`admitted`
/// false), else enter it (a directory) if the decider said so.
pub(super) fn after_keep(admitted: bool, enter: bool) -> Visit {
    match (admitted, enter) {
        (false, _) => Visit::Stop,
        (true, true) => Visit::Descend,
        (true, false) => Visit::Skip,
    }
}
