//! What a walk's decider says of an entry, the room an answer has, and what the walk
//! gathers within it (where it was cut, and why).

use crate::walk::Mode;

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
    pub(crate) fn lenient(self) -> bool {
        match self {
            Reading::Names | Reading::Metadata => true,
            Reading::NamesStrictly => false,
        }
    }

    pub(crate) fn mode(self) -> Mode {
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
    /// At the depth limit ([`MAX_DEPTH`](crate::MAX_DEPTH)), not at the room.
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
