//! One page of a directory's entries: those after a name (the cursor), in name order,
//! at most a page's worth, with memory bounded by the page and not by the directory.
//!
//! A directory of up to [`WHOLE_DIR`] entries is read whole and sorted as before (and
//! its names kept in the directory cache). A larger one is streamed: each entry read is
//! offered to a max-heap holding the `max` smallest names after the cursor that the
//! caller keeps, so 200,000 entries take the memory of one page. Each page costs one
//! read of the whole directory; the cursor is a name, so entries added or removed
//! between pages shift nothing.

use std::collections::BinaryHeap;

use cap_std::fs::Dir;
use rustix::fs::{OFlags, RawDir};

use super::dir_cache;
use super::kind::FileKind;
use super::open::open_dir;
use super::walk::{DIRENT_BUF, DIRENTS, Mode, entry_from, entry_meta, kind_of, sort_by_name};
use super::{Entry, Workspace, WsError};
use fsgate_base::path::RelPath;

/// Entries a directory may hold and still be read whole (and cached).
pub const WHOLE_DIR: usize = 16_384;

/// A page of entries, in name order.
#[derive(Debug)]
pub struct Page {
    /// The entries kept, after the cursor.
    pub entries: Vec<Entry>,
    /// More kept entries follow the last one.
    pub more: bool,
}

/// What a page asks for.
pub struct PageSpec<'a> {
    /// Only names after this one (bytewise), if given.
    pub after: Option<&'a str>,
    /// At most this many entries.
    pub max: usize,
    /// Entries carry metadata (`ls`); else names and kinds only.
    pub metadata: bool,
    /// The metadata is read before `keep` sees an entry (a size condition needs it).
    pub meta_first: bool,
}

/// A name in the heap (ordered by name: names in a directory are unique), with its kind.
struct Named(Box<str>, FileKind);

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

impl Workspace {
    /// The page of the directory at `real` (canonical) that `spec` asks for, of the
    /// entries `keep` accepts.
    pub fn list_page(
        &self,
        real: &RelPath,
        spec: &PageSpec<'_>,
        keep: &mut dyn FnMut(&Entry) -> bool,
    ) -> Result<Page, WsError> {
        let dir = open_dir(&self.root, real).map_err(WsError::from_io)?;
        let mode = if spec.metadata {
            Mode::Lenient
        } else {
            Mode::Names
        };
        let probe = match mode {
            Mode::Names => match dir_cache::lookup(&dir) {
                Ok(names) => {
                    let it = names.iter().map(|(n, k)| (n.as_ref(), *k));
                    return Ok(from_sorted(&dir, real, spec, it, keep));
                }
                Err(probe) => Some(probe),
            },
            _ => None,
        };
        let read = stream(&dir, real, spec, keep)?;
        match read {
            Streamed::Whole(mut all) => {
                sort_by_name(&mut all);
                if let Some(probe) = probe {
                    dir_cache::keep(probe, &dir, all.iter().map(|e| (e.name.as_str(), e.kind)));
                }
                let it = all.iter().map(|e| (e.name.as_str(), e.kind));
                Ok(from_sorted(&dir, real, spec, it, keep))
            }
            Streamed::Heap { heap, more } => {
                let mut entries: Vec<Entry> = heap
                    .into_sorted_vec()
                    .into_iter()
                    .map(|Named(n, k)| with_meta(&dir, real, spec, &n, k))
                    .collect();
                entries.shrink_to_fit();
                Ok(Page { entries, more })
            }
        }
    }
}

/// The entry `name` of `dir` at `base`, with metadata if the page asks for it.
fn with_meta(dir: &Dir, base: &RelPath, spec: &PageSpec<'_>, name: &str, kind: FileKind) -> Entry {
    let meta = if spec.metadata {
        std::ffi::CString::new(name)
            .ok()
            .and_then(|c| entry_meta(dir, &c, Mode::Lenient).ok().flatten())
    } else {
        None
    };
    entry_from(base, name, kind, meta)
}

/// The page from names already in order.
fn from_sorted<'n>(
    dir: &Dir,
    base: &RelPath,
    spec: &PageSpec<'_>,
    names: impl Iterator<Item = (&'n str, FileKind)>,
    keep: &mut dyn FnMut(&Entry) -> bool,
) -> Page {
    let mut entries = Vec::new();
    let mut more = false;
    let after = |n: &str| spec.after.is_none_or(|a| n > a);
    for (name, kind) in names.filter(|(n, _)| after(n)) {
        let e = with_meta(dir, base, spec, name, kind);
        if !keep(&e) {
            continue;
        }
        if entries.len() >= spec.max {
            more = true;
            break;
        }
        entries.push(e);
    }
    Page { entries, more }
}

/// What reading a directory gave: all its entries (unfiltered, unsorted) when it is
/// small, else the page's candidates.
enum Streamed {
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
    fn offer_name(&mut self, dir: &Dir, base: &RelPath, name: &str, kind: FileKind) {
        if self.spec.after.is_some_and(|a| name <= a) {
            return;
        }
        let full = self.heap.len() >= self.spec.max;
        let past = full && self.heap.peek().is_some_and(|top| name > &*top.0);
        if past && self.more {
            return;
        }
        self.offer(dir, base, entry_from(base, name, kind, None));
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
        let kind = e.kind;
        let name = e.name.clone().into_boxed_str();
        if !self.kept(dir, base, e) {
            return;
        }
        self.heap.push(Named(name, kind));
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
                &e.name,
                e.kind,
            );
        }
        (self.keep)(&e)
    }
}

/// Reads `dir` once: whole if it holds at most [`WHOLE_DIR`] entries, else through
/// the page's selection.
fn stream(
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
            let kind = kind_of(entry.file_type());
            match whole.as_mut() {
                Some(all) if all.len() < WHOLE_DIR => all.push(entry_from(base, name, kind, None)),
                Some(_) => {
                    // Too many to hold: from here on, only the page's candidates.
                    for old in whole.take().into_iter().flatten() {
                        sel.offer(dir, base, old);
                    }
                    sel.offer_name(dir, base, name, kind);
                }
                None => sel.offer_name(dir, base, name, kind),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(ws: &Workspace, max: usize, metadata: bool) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let spec = PageSpec {
                after: after.as_deref(),
                max,
                metadata,
                meta_first: false,
            };
            let mut keep = |e: &Entry| !e.name.ends_with(".hidden");
            let page = ws
                .list_page(&RelPath::root(), &spec, &mut keep)
                .expect("page");
            let names: Vec<String> = page.entries.iter().map(|e| e.name.clone()).collect();
            after = names.last().cloned();
            out.push(names);
            if !page.more {
                return out;
            }
        }
    }

    /// Small and large directories page alike: every kept name once, in order, none
    /// of the refused ones, and the pages at most `max` long.
    #[test]
    fn pages_cover_every_kept_name_once_in_order() {
        for n in [10, WHOLE_DIR + 500] {
            let tmp = tempfile::tempdir().expect("tmp");
            for i in 0..n {
                let name = if i % 10 == 3 {
                    format!("n{i:06}.hidden")
                } else {
                    format!("n{i:06}")
                };
                std::fs::File::create(tmp.path().join(name)).expect("create");
            }
            let ws = Workspace::open(tmp.path()).expect("ws");
            for metadata in [false, true] {
                let all = pages(&ws, 1000, metadata);
                assert!(all.iter().all(|p| p.len() <= 1000));
                let flat: Vec<String> = all.into_iter().flatten().collect();
                let want: Vec<String> = (0..n)
                    .filter(|i| i % 10 != 3)
                    .map(|i| format!("n{i:06}"))
                    .collect();
                assert_eq!(flat, want, "{n} entries, metadata {metadata}");
            }
        }
    }
}
