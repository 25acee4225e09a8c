//! What one change asks of git's index (each change's own file says it, see
//! `Operation::staging`).

use fsgate_base::path::RelPath;

/// What one change asks of the index, in workspace paths.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step<'a> {
    /// The path was written: add it (or, for a directory, the files beneath it).
    Add(&'a RelPath),
    /// The path is gone: remove its entry and the entries beneath it.
    Remove(&'a RelPath),
}
