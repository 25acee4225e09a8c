//! The filesystem view: the workspace presented to a command, and to every process it
//! starts, as a FUSE filesystem served by the gateway (`fsgate run`).
//!
//! # Layer
//!
//! Owns: FUSE requests mapped onto the gateway's operations (`fs.rs`): a lookup or a
//! `getattr` is a `stat`, a directory read an `ls`, an open for reading the read's
//! decision (`open`), a file opened for writing a private copy applied at close as one
//! `write` (`writes.rs`), and create, unlink, mkdir, rmdir, rename and chmod (`attrs.rs`) the gateway's own changes; the
//! inodes the kernel holds (`nodes.rs`); the open files (`handles.rs`); who asked, a
//! process named from `/proc` (`peer.rs`); a confined agent's own devpts instance
//! (`terminals.rs`); and the child that shows the view at the
//! workspace's own path in a private mount namespace ([`child`]). Depends on the
//! gateway and the base; not on the audit log, the workspace or the backups: every
//! request goes through [`fsgate_gateway::Gateway::serve`], which decides, records and
//! executes it as it does for every door.

pub mod asks;
mod attrs;
mod cache;
pub mod child;
mod errno;
mod fs;
mod handles;
pub mod handoff;
mod links;
mod nodes;
mod outside;
mod passthrough;
mod peer;
mod requests;
mod standing;
mod terminals;
mod waits;
mod writes;

use std::os::fd::OwnedFd;
use std::sync::Arc;

pub use fs::{Counts, View};

/// Threads serving the view's requests at once (a build's processes do not wait for
/// each other's lookups, nor reads for a change waiting on its durable records).
pub const THREADS: usize = 8;

// Two threads are always left to serve what the others wait for (`waits.rs`).
const _: () = assert!(waits::AT_MOST + 2 == THREADS);

/// Serves `view` on the FUSE connection `fd` (a `/dev/fuse` the child mounted): waits
/// for the kernel's first message, then serves on [`THREADS`] threads until the mount
/// is gone. The returned thread ends with the connection.
pub fn serve(
    view: View,
    fd: OwnedFd,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<()>>> {
    let mut config = fuser::Config::default();
    config.n_threads = Some(THREADS);
    let invalidator = std::sync::Arc::clone(&view.invalidator);
    let session = fuser::Session::from_fd(view, fd, fuser::SessionACL::All, config)?;
    invalidator.connect(session.notifier());
    std::thread::Builder::new()
        .name("fsgate-view".into())
        .spawn(move || session.run())
}

/// What a run did, for the line that ends it.
pub fn counts(view: &View) -> Arc<Counts> {
    view.counts()
}
