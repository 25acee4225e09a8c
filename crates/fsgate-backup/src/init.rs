//! A store's layout on disk: `FORMAT` and `versions/`, made when a store is first
//! opened and made durable before a process's first version is saved into it.
//!
//! Opening a store costs no sync (every gateway's first start makes one): each process
//! syncs `FORMAT` and the store's directory at its first backup, before that version
//! can count, whoever made the store (a `FORMAT` that reads back whole may be in the
//! page cache only, left by a process that ended before its first backup). A crash
//! before any backup was made can leave the store's directory holding only an empty,
//! zeroed or cut-short `FORMAT` and an empty `versions/`; such a store never held a
//! version, and is made again. Anything else without a valid `FORMAT` is not a store
//! and is refused, so a mistyped directory is never taken for one.

use std::io::{self, Read, Write};

use cap_std::fs::{Dir, OpenOptions};

use super::layout::{FORMAT_FILE, FORMAT_TEXT, FORMAT_TEXT_1, TMP_SUFFIX, VERSIONS_DIR};
use crate::error::BackupError;
use fsgate_workspace::sync_dir_shared as sync_dir;

/// Creates `FORMAT` and `versions/` in a new store (not synced: see the module), or
/// checks an existing one; a store of layout 1 is upgraded (its versions stay where
/// they are and are still read), durably at once.
pub(crate) fn init_layout(root: &Dir, shown: &str) -> Result<(), BackupError> {
    let unsafe_dir = |reason: String| BackupError::UnsafeDir {
        path: shown.to_owned(),
        reason,
    };
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
        }
        Err(e) => return Err(BackupError::io("read", format!("{shown}/{FORMAT_FILE}"))(e)),
    }
    match root.create_dir(VERSIONS_DIR) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(BackupError::io("create", format!("{shown}/{VERSIONS_DIR}"))(e)),
    }
    Ok(())
}

/// Makes the store's layout durable: `FORMAT`'s content, then the directory holding
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
        // No longer than the text a crash can have cut: a long file of zeros is data.
        let zeros = text.len() <= FORMAT_TEXT.len() && text.iter().all(|&b| b == 0);
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
