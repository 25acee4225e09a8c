//! Listing and walking directories beneath the root, never following symlinks.

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use super::kind::FileKind;
use super::open::open_dir;
use super::read::format_time;
use super::{Workspace, WsError};
use crate::path::RelPath;

/// Prefix of fsgate's own temporary files (atomic writes); never listed.
pub const TEMP_PREFIX: &str = ".fsgate-tmp-";

/// Deepest directory nesting a walk descends into.
const MAX_DEPTH: usize = 256;

/// One directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's name.
    pub name: String,
    /// Its workspace-relative path.
    pub path: RelPath,
    /// What it is (symlinks not followed).
    pub kind: FileKind,
    /// Size in bytes.
    pub size: Option<u64>,
    /// Modification time, RFC 3339.
    pub modified: Option<String>,
}

/// What a walk does after visiting an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Continue, descending into this entry if it is a directory.
    Descend,
    /// Continue, but do not descend into it.
    Skip,
    /// End the walk.
    Stop,
}

fn read_entries(dir: &Dir, base: &RelPath) -> Result<Vec<Entry>, WsError> {
    let mut out = Vec::new();
    for entry in dir.entries()? {
        let entry = entry?;
        let os_name = entry.file_name();
        let Some(name) = os_name.to_str() else {
            continue; // Not expressible on the wire.
        };
        if name.starts_with(TEMP_PREFIX) {
            continue;
        }
        let ft = entry.file_type()?;
        let kind = FileKind::from_predicates(ft.is_file(), ft.is_dir(), ft.is_symlink());
        // One fstatat on the directory's descriptor, not following symlinks.
        let meta = entry.metadata().ok();
        out.push(Entry {
            name: name.to_string(),
            path: base.join(name),
            kind,
            size: meta.as_ref().map(|m| m.len()),
            modified: meta
                .as_ref()
                .and_then(|m| m.modified().ok())
                .map(|t| format_time(t.into_std())),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

impl Workspace {
    /// The entries of the directory at `real` (canonical), sorted by name.
    pub fn list_dir(&self, real: &RelPath) -> Result<Vec<Entry>, WsError> {
        let dir = open_dir(&self.root, real).map_err(WsError::from_io)?;
        read_entries(&dir, real)
    }

    /// Walks the tree under `start` (canonical) depth-first in name order, calling
    /// `visit` on every entry. Symlinks are reported, never followed.
    pub fn walk(
        &self,
        start: &RelPath,
        visit: &mut dyn FnMut(&Entry) -> Visit,
    ) -> Result<(), WsError> {
        let dir = open_dir(&self.root, start).map_err(WsError::from_io)?;
        let mut stack: Vec<(Dir, RelPath, usize)> = vec![(dir, start.clone(), 0)];
        while let Some((dir, base, depth)) = stack.pop() {
            let entries = read_entries(&dir, &base)?;
            let mut subdirs = Vec::new();
            for e in entries {
                match visit(&e) {
                    Visit::Stop => return Ok(()),
                    Visit::Skip => {}
                    Visit::Descend => {
                        if e.kind == FileKind::Directory && depth < MAX_DEPTH {
                            // A directory swapped for a symlink since listing fails here.
                            if let Ok(sub) = dir.open_dir_nofollow(&e.name) {
                                subdirs.push((sub, e.path.clone(), depth + 1));
                            }
                        }
                    }
                }
            }
            // Reverse so that popping visits subdirectories in name order.
            stack.extend(subdirs.into_iter().rev());
        }
        Ok(())
    }
}
