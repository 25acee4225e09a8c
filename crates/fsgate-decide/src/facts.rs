//! What the caller knows about a path besides its name.

/// What kind of entry a path names, when the caller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file (or a file about to be created).
    File,
    /// A directory: extension conditions of allow rules do not apply to it.
    Dir,
    /// Not known yet (checked before touching the filesystem); allow rules' extension
    /// conditions are deferred to the second check, deny rules apply in full.
    Unknown,
}

/// What the caller knows about a path besides its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathFacts {
    /// File, directory, or not known yet.
    pub kind: EntryKind,
    /// A file's size in bytes (for a write, the larger of its current and new size);
    /// None before it is known: rules with a size condition are then deferred (an
    /// allow's condition counts as met, a deny does not apply yet), and the caller
    /// decides again once it knows the size.
    pub size: Option<u64>,
}

impl PathFacts {
    /// `kind`, size unknown.
    pub fn kind(kind: EntryKind) -> PathFacts {
        PathFacts { kind, size: None }
    }

    /// A file of `size` bytes.
    pub fn file(size: u64) -> PathFacts {
        PathFacts {
            kind: EntryKind::File,
            size: Some(size),
        }
    }
}
