//! A store's layout on disk: `FORMAT` and `versions/`, made when a store is first
//! opened and made durable before the first version is saved into it.
//!
//! A new store costs no sync when it is opened (every gateway's first start opens one):
//! its `FORMAT` and `versions/` are synced by the first backup, before that version
//! can be durable. A crash before then can leave the store's directory holding only an
//! empty or partly written `FORMAT` and an empty `versions/`; such a store held nothing
//! yet, and is made again. Anything else without a `FORMAT` is not a store and is
//! refused, so a mistyped directory is never taken for one.

use std::io::{self, Read, Write};

use cap_std::fs::{Dir, OpenOptions};

use super::BackupError;
use super::layout::{FORMAT_FILE, FORMAT_TEXT, FORMAT_TEXT_1, TMP_SUFFIX, VERSIONS_DIR};
use super::store::sync_dir;

/// What opening a store's layout left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// On disk as it is: nothing to sync.
    Durable,
    /// Made by this open: `FORMAT` and the store directory are to be synced before the
    /// first version is saved.
    Unsynced,
}

/// Creates `FORMAT` and `versions/` in a new store (not synced: see [`Layout`]), or
/// checks an existing one; a store of layout 1 is upgraded (its versions stay where
/// they are and are still read), durably at once.
pub(crate) fn init_layout(root: &Dir, shown: &str) -> Result<Layout, BackupError> {
    let unsafe_dir = |reason: String| BackupError::UnsafeDir {
        path: shown.to_owned(),
        reason,
    };
    let mut layout = Layout::Durable;
    match read_format(root) {
        Ok(text) if text == FORMAT_TEXT.as_bytes() => {}
        Ok(text) if text == FORMAT_TEXT_1.as_bytes() => {
            upgrade_format(root).map_err(BackupError::io("upgrade", shown))?;
        }
        Ok(text)
            if torn_new_store(root, Some(&text)).map_err(BackupError::io("list", shown))? =>
        {
            write_format(root)
                .map_err(BackupError::io("write", format!("{shown}/{FORMAT_FILE}")))?;
            layout = Layout::Unsynced;
        }
        Ok(text) => {
            let text = String::from_utf8_lossy(&text);
            return Err(unsafe_dir(format!(
                "unknown store format {:?}",
                text.trim()
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !torn_new_store(root, None).map_err(BackupError::io("list", shown))? {
                return Err(unsafe_dir(
                    "directory is not empty and is not an fsgate backup store (no FORMAT file)"
                        .into(),
                ));
            }
            write_format(root)
                .map_err(BackupError::io("write", format!("{shown}/{FORMAT_FILE}")))?;
            layout = Layout::Unsynced;
        }
        Err(e) => return Err(BackupError::io("read", format!("{shown}/{FORMAT_FILE}"))(e)),
    }
    match root.create_dir(VERSIONS_DIR) {
        Ok(()) => layout = Layout::Unsynced,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(BackupError::io("create", format!("{shown}/{VERSIONS_DIR}"))(e)),
    }
    Ok(layout)
}

/// Makes a new store's layout durable: `FORMAT`'s content, then the directory holding
/// it and `versions/`.
pub(crate) fn sync_layout(root: &Dir) -> io::Result<()> {
    root.open(FORMAT_FILE)?.sync_data()?;
    sync_dir(root)
}

/// `FORMAT`'s bytes (a few; more is not a store's).
fn read_format(root: &Dir) -> io::Result<Vec<u8>> {
    let mut text = Vec::new();
    root.open(FORMAT_FILE)?.take(256).read_to_end(&mut text)?;
    Ok(text)
}

/// Whether the directory is empty, or is what a crash can leave of a new store before
/// its first version: a `FORMAT` that is empty, zeros or the start of the current
/// text (`format`, None if there is none), and nothing else but an empty `versions/`.
fn torn_new_store(root: &Dir, format: Option<&[u8]>) -> io::Result<bool> {
    if let Some(text) = format {
        let zeros = text.iter().all(|&b| b == 0);
        if !zeros && !FORMAT_TEXT.as_bytes().starts_with(text) {
            return Ok(false);
        }
    }
    for entry in root.entries()? {
        let name = entry?.file_name();
        if name == FORMAT_FILE {
            continue;
        }
        if name != VERSIONS_DIR || root.open_dir(VERSIONS_DIR)?.entries()?.next().is_some() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Writes `FORMAT` in a new store (or over a torn one), not synced.
fn write_format(root: &Dir) -> io::Result<()> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    root.open_with(FORMAT_FILE, &opts)?
        .write_all(FORMAT_TEXT.as_bytes())
}

/// Replaces an old store's `FORMAT` by a rename (a reader sees one format or the
/// other, never a torn file), durably.
fn upgrade_format(root: &Dir) -> io::Result<()> {
    let name = format!(".{FORMAT_FILE}{TMP_SUFFIX}");
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    let mut f = root.open_with(&name, &opts)?;
    f.write_all(FORMAT_TEXT.as_bytes())?;
    f.sync_all()?;
    root.rename(&name, root, FORMAT_FILE)?;
    sync_dir(root)
}
