//! Reading a directory once for a page: whole when it is small, else each entry offered
//! to a max-heap of the page's `max` smallest kept names after the cursor, so memory is
//! bounded by the page and not by the directory.

use std::collections::BinaryHeap;

use cap_std::fs::Dir;
use rustix::fs::{OFlags, RawDir};

use super::spec::{Listed, PageSpec, WHOLE_DIR, with_meta};
use crate::error::WsError;
use crate::kind::FileKind;
use crate::walk::Entry;
use crate::walk::{DIRENT_BUF, DIRENTS, entry_from, kind_of};
use fsgate_base::path::RelPath;

/// A name in the heap (ordered by name: names in a directory are unique), with its kind
/// and inode number.
pub(super) struct Named(
    pub(super) Box<str>,
    pub(super) FileKind,
    pub(super) Option<u64>,
);

impl PartialEq for Named {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Named {}

impl PartialOrd for Named {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Named {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// What reading a directory gave: all its entries (unfiltered, unsorted) when it is
/// small, else the page's candidates.
pub(super) enum Streamed {
    Whole(Vec<Entry>),
    Heap { heap: BinaryHeap<Named>, more: bool },
}

/// The page's selection: the `max` smallest kept names after the cursor.
struct Select<'s, 'k> {
    spec: &'s PageSpec<'s>,
    keep: &'k mut dyn FnMut(&Entry) -> bool,
    heap: BinaryHeap<Named>,
    more: bool,
}

impl Select<'_, '_> {
    /// Offers the entry `name`: most entries of a large directory are before the cursor
    /// or past the page, and are passed over on their name alone, without an `Entry`.
    fn offer_name(&mut self, dir: &Dir, base: &RelPath, (name, kind, ino): Listed<'_>) {
        if self.spec.after.is_some_and(|a| name <= a) {
            return;
        }
        let full = self.heap.len() >= self.spec.max;
        let past = full && self.heap.peek().is_some_and(|top| name > &*top.0);
        if past && self.more {
            return;
        }
        self.offer(dir, base, entry_from(base, (name, kind, ino), None));
    }

    fn offer(&mut self, dir: &Dir, base: &RelPath, e: Entry) {
        if self.spec.after.is_some_and(|a| e.name.as_str() <= a) {
            return;
        }
        let full = self.heap.len() >= self.spec.max;
        // Past the page already: no need to decide it, only to know it is there.
        if full
            && self
                .heap
                .peek()
                .is_some_and(|top| e.name.as_str() > &*top.0)
        {
            self.more = self.more || self.kept(dir, base, e);
            return;
        }
        let (kind, ino) = (e.kind, e.ino);
        let name = Box::<str>::from(e.name.as_str());
        if !self.kept(dir, base, e) {
            return;
        }
        self.heap.push(Named(name, kind, ino));
        if self.heap.len() > self.spec.max {
            self.heap.pop();
            self.more = true;
        }
    }

    fn kept(&mut self, dir: &Dir, base: &RelPath, mut e: Entry) -> bool {
        if self.spec.meta_first && e.size.is_none() {
            e = with_meta(
                dir,
                base,
                &PageSpec {
                    metadata: true,
                    ..*self.spec
                },
                (&e.name, e.kind, e.ino),
            );
        }
        (self.keep)(&e)
    }
}

/// Reads `dir` once: whole if it holds at most [`WHOLE_DIR`] entries, else through
/// the page's selection.
pub(super) fn stream(
    dir: &Dir,
    base: &RelPath,
    spec: &PageSpec<'_>,
    keep: &mut dyn FnMut(&Entry) -> bool,
) -> Result<Streamed, WsError> {
    // A descriptor of its own, at the start of the directory.
    let own = rustix::fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| WsError::from_io(e.into()))?;
    let mut whole = Some(Vec::new());
    let mut sel = Select {
        spec,
        keep,
        heap: BinaryHeap::new(),
        more: false,
    };
    let mut read = |buf: &mut Vec<u8>| -> Result<(), WsError> {
        if buf.capacity() < DIRENT_BUF {
            buf.reserve_exact(DIRENT_BUF);
        }
        let mut raw = RawDir::new(&own, buf.spare_capacity_mut());
        while let Some(entry) = raw.next() {
            let entry = entry.map_err(|e| WsError::from_io(e.into()))?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(bytes) else {
                continue; // Not expressible on the wire.
            };
            let listed = (name, kind_of(entry.file_type()), Some(entry.ino()));
            match whole.as_mut() {
                Some(all) if all.len() < WHOLE_DIR => all.push(entry_from(base, listed, None)),
                Some(_) => {
                    // Too many to hold: from here on, only the page's candidates.
                    for old in whole.take().into_iter().flatten() {
                        sel.offer(dir, base, old);
                    }
                    sel.offer_name(dir, base, listed);
                }
                None => sel.offer_name(dir, base, listed),
            }
        }
        Ok(())
    };
    DIRENTS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => read(&mut buf),
        Err(_) => read(&mut Vec::new()),
    })?;
    Ok(match whole {
        Some(all) => Streamed::Whole(all),
        None => Streamed::Heap {
            heap: sel.heap,
            more: sel.more,
        },
    })
}
