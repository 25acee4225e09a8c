//! One page of a directory's entries: those after a name (the cursor), in name order,
//! at most a page's worth, with memory bounded by the page and not by the directory.
//!
//! A directory of up to [`WHOLE_DIR`](spec::WHOLE_DIR) entries is read whole and sorted
//! as before (and its names kept in the directory cache). A larger one is streamed: each
//! entry read is offered to a max-heap holding the `max` smallest names after the cursor
//! that the caller keeps, so 200,000 entries take the memory of one page. Each page
//! costs one read of the whole directory; the cursor is a name, so entries added or
//! removed between pages shift nothing. The one read of a directory is in `stream`; what
//! a page asks for, in `spec`.

pub(crate) mod spec;
mod stream;

use cap_std::fs::Dir;

use super::dir_cache;
use super::open::open_dir;
use super::walk::Entry;
use super::walk::{Mode, sort_by_name};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;
use spec::{PageSpec, with_meta};
use stream::{Named, Streamed, stream};

/// A page of entries, in name order.
#[derive(Debug)]
pub struct Page {
    /// The entries kept, after the cursor.
    pub entries: Vec<Entry>,
    /// More kept entries follow the last one.
    pub more: bool,
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
                    let it = names.iter().map(|(n, k, i)| (n.as_ref(), *k, *i));
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
                    let listed = all.iter().map(|e| (e.name.as_str(), e.kind, e.ino));
                    dir_cache::keep(probe, &dir, listed);
                }
                let it = all.iter().map(|e| (e.name.as_str(), e.kind, e.ino));
                Ok(from_sorted(&dir, real, spec, it, keep))
            }
            Streamed::Heap { heap, more } => {
                let mut entries: Vec<Entry> = heap
                    .into_sorted_vec()
                    .into_iter()
                    .map(|Named(n, k, i)| with_meta(&dir, real, spec, (&n, k, i)))
                    .collect();
                entries.shrink_to_fit();
                Ok(Page { entries, more })
            }
        }
    }
}

/// The page from names already in order.
fn from_sorted<'n>(
    dir: &Dir,
    base: &RelPath,
    spec: &PageSpec<'_>,
    names: impl Iterator<Item = spec::Listed<'n>>,
    keep: &mut dyn FnMut(&Entry) -> bool,
) -> Page {
    let mut entries = Vec::new();
    let mut more = false;
    let after = |n: &str| spec.after.is_none_or(|a| n > a);
    for listed in names.filter(|(n, ..)| after(n)) {
        let e = with_meta(dir, base, spec, listed);
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

#[cfg(test)]
mod tests {
    use super::spec::WHOLE_DIR;
    use super::*;
    use crate::kind::FileKind;

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
            let names: Vec<String> = page.entries.iter().map(|e| e.name.to_string()).collect();
            after = names.last().cloned();
            out.push(names);
            if !page.more {
                return out;
            }
        }
    }

    /// A page without metadata gives each entry the inode number and kind its
    /// directory gives: read, and again from the names kept of the unchanged directory
    /// (on a filesystem whose directory times are trusted).
    #[test]
    fn a_page_without_metadata_carries_each_inode_number_read_or_kept() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tmp");
        for i in 0..100 {
            std::fs::write(tmp.path().join(format!("f{i:03}")), "x").expect("create");
        }
        std::fs::create_dir(tmp.path().join("sub")).expect("mkdir");
        // Settled before it is read, so that its names may be kept (a second more
        // where the filesystem keeps whole seconds).
        std::thread::sleep(std::time::Duration::from_millis(1_200));
        let ws = Workspace::open(tmp.path()).expect("ws");
        let spec = PageSpec {
            after: None,
            max: 1000,
            metadata: false,
            meta_first: false,
        };
        let real = |e: &Entry| {
            let m = std::fs::symlink_metadata(tmp.path().join(e.name.as_str())).expect("lstat");
            (Some(m.ino()), m.is_dir())
        };
        for round in 0..2 {
            let page = ws
                .list_page(&RelPath::root(), &spec, &mut |_| true)
                .expect("page");
            assert_eq!(page.entries.len(), 101);
            for e in &page.entries {
                assert_eq!(
                    (e.ino, e.kind == FileKind::Directory),
                    real(e),
                    "{round}: {e:?}"
                );
                assert_eq!((e.size, e.id), (None, None), "no metadata read");
            }
        }
        let dir = std::fs::File::open(tmp.path()).expect("open");
        let trusted = dir_cache::trusted_fs(&dir);
        assert_eq!(
            dir_cache::lookup(&dir).is_ok(),
            trusted,
            "kept where trusted"
        );
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
