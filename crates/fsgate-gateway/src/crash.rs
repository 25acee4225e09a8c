//! What a crash in the middle of a change may leave on disk, as each change's own file
//! judges it (see `Operation::found_after_crash`) and start-up reconciliation records it.

use fsgate_audit::Intent;

/// What the disk shows for one intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The disk holds what the intent announced.
    Applied,
    /// The disk holds what was there before.
    NotApplied,
    /// Neither (changed again since, partly done, or unknowable).
    Neither,
}

impl Found {
    /// The word in the record.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Found::Applied => "applied",
            Found::NotApplied => "not-applied",
            Found::Neither => "neither",
        }
    }
}

/// One path as the disk has it now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum OnDisk {
    /// Nothing by that name.
    Missing,
    /// A regular file, with the SHA-256 of its content.
    File(String),
    /// A directory.
    Dir,
    /// A symbolic link, with its target.
    Link(std::path::PathBuf),
    /// Anything else, or what could not be read.
    Other,
}

/// An open intent, and what the disk holds at its paths now.
pub(crate) struct Disk<'a> {
    /// The intent, as the log holds it.
    pub intent: &'a Intent,
    /// Its path (the real one, when it recorded where a symlink led).
    pub path: OnDisk,
    /// Its second path, for an intent that names one (a rename's destination).
    pub path2: OnDisk,
    /// Its path's permission bits, for an intent that names a mode (a chmod).
    pub mode: Option<u32>,
    /// Its path's modification time, for an intent that names one (a utimes).
    pub mtime: Option<i64>,
}
