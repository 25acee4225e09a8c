//! What a page asks for, and an entry as the page shows it: shared by the page and by
//! the one read of its directory.

use cap_std::fs::Dir;

use crate::kind::FileKind;
use crate::walk::{Entry, Mode, entry_from, entry_meta};
use fsgate_base::path::RelPath;

/// Entries a directory may hold and still be read whole (and cached).
pub(crate) const WHOLE_DIR: usize = 16_384;

/// What a page asks for.
pub struct PageSpec<'a> {
    /// Only names after this one (bytewise), if given.
    pub after: Option<&'a str>,
    /// At most this many entries.
    pub max: usize,
    /// Entries carry metadata (`ls`); else names, kinds and inode numbers only (the
    /// view's listings).
    pub metadata: bool,
    /// The metadata is read before `keep` sees an entry (a size condition needs it).
    pub meta_first: bool,
}

/// An entry as its directory gives it: name, kind and inode number.
pub(super) type Listed<'n> = (&'n str, FileKind, Option<u64>);

/// The entry `name` of `dir` at `base`, with metadata if the page asks for it.
pub(super) fn with_meta(
    dir: &Dir,
    base: &RelPath,
    spec: &PageSpec<'_>,
    listed: Listed<'_>,
) -> Entry {
    let name = listed.0;
    let meta = if spec.metadata {
        std::ffi::CString::new(name)
            .ok()
            .and_then(|c| entry_meta(dir, &c, Mode::Lenient).ok().flatten())
    } else {
        None
    };
    entry_from(base, listed, meta)
}
