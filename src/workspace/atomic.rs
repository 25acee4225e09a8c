//! The temporary file behind an atomic write, without a name an agent could imitate.
//!
//! The content goes into an unnamed `O_TMPFILE` in the target's directory; it gets a
//! name only for the instant between `linkat` and the `renameat` over the target. That
//! name, and the name of the fallback (a file created with `create_new` where
//! `O_TMPFILE` or its `linkat` is unavailable), is 128 random bits: no agent can guess
//! it in advance, and no walk or listing treats it (or any other name) specially. The
//! watcher knows the gateway's own names in flight from [`is_own_temp`], an in-memory
//! set an agent cannot write to.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

/// Names the gateway created and has not yet renamed away or removed.
static IN_FLIGHT: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// False once linking an `O_TMPFILE` failed here (no capability, no `/proc`): later
/// writes go straight to the named fallback.
static TMPFILE_LINKS: AtomicBool = AtomicBool::new(true);

/// True while `name` is one of the gateway's own temporary files in flight.
pub fn is_own_temp(name: &str) -> bool {
    IN_FLIGHT.lock().map(|s| s.contains(name)).unwrap_or(false)
}

/// A fresh random name for one write's temporary file, registered as in flight until
/// dropped. Chosen before the write's intent is recorded, so that the record can name
/// it and a start after a crash can remove exactly that file.
#[derive(Debug)]
pub struct TempName(String);

impl TempName {
    /// A new random name.
    pub fn new() -> io::Result<TempName> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
        let name = format!(".fsgate-tmp-{}", hex::encode(bytes));
        if let Ok(mut s) = IN_FLIGHT.lock() {
            s.insert(name.clone());
        }
        Ok(TempName(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        if let Ok(mut s) = IN_FLIGHT.lock() {
            s.remove(&self.0);
        }
    }
}

/// Where the content is being written.
pub(crate) enum Staged {
    /// An unnamed `O_TMPFILE`.
    Unnamed(File),
    /// A file created under its temporary name (the fallback).
    Named(File),
}

impl Staged {
    pub(crate) fn file(&mut self) -> &mut File {
        match self {
            Staged::Unnamed(f) | Staged::Named(f) => f,
        }
    }
}

/// A file to write the new content into, in `parent`, mode 0600 until set.
pub(crate) fn stage(parent: &Dir, name: &TempName) -> io::Result<Staged> {
    if TMPFILE_LINKS.load(Ordering::Relaxed)
        && let Some(f) = open_tmpfile(parent)
    {
        return Ok(Staged::Unnamed(f));
    }
    stage_named(parent, name)
}

/// The fallback: a new file under the temporary name.
pub(crate) fn stage_named(parent: &Dir, name: &TempName) -> io::Result<Staged> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).mode(0o600);
    let f = parent.open_with(name.as_str(), &opts)?.into_std();
    Ok(Staged::Named(f))
}

#[cfg(target_os = "linux")]
fn open_tmpfile(parent: &Dir) -> Option<File> {
    use rustix::fs::{Mode, OFlags, openat};
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    openat(parent, ".", flags, Mode::from_raw_mode(0o600))
        .ok()
        .map(File::from)
}

#[cfg(not(target_os = "linux"))]
fn open_tmpfile(_parent: &Dir) -> Option<File> {
    None
}

/// Gives the staged file the name `target` in `parent`, replacing what was there.
/// `Ok(false)`: an unnamed file could not be linked here (it is dropped; stage again
/// with [`stage_named`]).
pub(crate) fn publish(
    parent: &Dir,
    staged: Staged,
    name: &TempName,
    target: &str,
) -> io::Result<bool> {
    let file = match staged {
        Staged::Named(f) => f,
        Staged::Unnamed(f) => {
            if !link_unnamed(&f, parent, name.as_str()) {
                TMPFILE_LINKS.store(false, Ordering::Relaxed);
                tracing::info!(
                    "cannot link an O_TMPFILE in the workspace; atomic writes use a named temporary file"
                );
                return Ok(false);
            }
            f
        }
    };
    drop(file);
    if let Err(e) = parent.rename(name.as_str(), parent, target) {
        let _ = parent.remove_file(name.as_str());
        return Err(e);
    }
    Ok(true)
}

/// Removes a staged file that will not be published.
pub(crate) fn discard(parent: &Dir, staged: Staged, name: &TempName) {
    if let Staged::Named(f) = staged {
        drop(f);
        let _ = parent.remove_file(name.as_str());
    }
}

/// Links an `O_TMPFILE` at `name`: by its descriptor (`AT_EMPTY_PATH`, which needs
/// `CAP_DAC_READ_SEARCH` on older kernels), else through `/proc/self/fd`.
#[cfg(target_os = "linux")]
fn link_unnamed(f: &File, parent: &Dir, name: &str) -> bool {
    use rustix::fs::{AtFlags, CWD, linkat};
    use std::os::fd::AsRawFd;
    if linkat(f, "", parent, name, AtFlags::EMPTY_PATH).is_ok() {
        return true;
    }
    let proc_path = format!("/proc/self/fd/{}", f.as_raw_fd());
    linkat(
        CWD,
        proc_path.as_str(),
        parent,
        name,
        AtFlags::SYMLINK_FOLLOW,
    )
    .is_ok()
}

#[cfg(not(target_os = "linux"))]
fn link_unnamed(_f: &File, _parent: &Dir, _name: &str) -> bool {
    false
}
