//! Backup store: previous versions of files, outside the workspace (issue 3, points 11-13).
//!
//! # Layer
//!
//! Owns: the store of previous versions and the `backup` commands. Depends on
//! `fsgate-base`, `fsgate-workspace` (reading what it saves) and `fsgate-audit` (the
//! records of a `backup restore`). May not touch: the policy or the doors.
//!
//! # Layout
//!
//! - [`config`]: the `[backup]` policy section ([`BackupSettings`]).
//! - `layout`: directory names, timestamps and records on disk.
//! - `packed`: one file per version, the content with its record as a trailer.
//! - [`store`]: [`BackupStore`] — open once at start-up, then `save`, `list`.
//! - `scan`: finding versions (`open_version`, `list`), of both layouts.
//! - `retention`: [`BackupStore::prune`], keep-N / max-age / byte budget.
//! - `counts`: what the store counts in memory between saves (its quota, its last sweep).
//! - `restore`: [`restore`], which backs up the current content first.
//! - [`cli`]: `fsgate backup list|restore`.
//!
//! The gateway calls [`BackupStore::save`] with the current content before any write,
//! edit, rm or replacing rename, and refuses the operation if it returns an error (fail
//! closed). After [`BackupStore::open`] every access goes through the store's directory
//! handle, so Landlock may confine the process to that directory afterwards.

pub mod audit;
pub mod cli;
pub mod config;
mod counts;
mod error;
mod init;
mod layout;
mod packed;
/// Entry points for the fuzz targets in `fuzz/` (crate feature `fuzzing` only).
#[cfg(feature = "fuzzing")]
pub mod fuzz {
    /// Reads `bytes` as a one-file version through the store's trailer parser: Some
    /// (content length, record's content size, record length) if it reads as complete.
    pub fn version_trailer(bytes: &[u8]) -> Option<(u64, u64, usize)> {
        use std::os::fd::AsFd;
        let fd = rustix::fs::memfd_create("fsgate-fuzz", rustix::fs::MemfdFlags::CLOEXEC).ok()?;
        super::sparse::write_all_at(fd.as_fd(), bytes, 0).ok()?;
        let (meta, len) = super::packed::read_record(&fd).ok()?;
        let record = serde_json::to_vec(&meta).ok()?.len();
        Some((len, meta.size, record))
    }
}
mod quota;
mod restore;
mod retention;
mod scan;
mod sparse;
pub mod store;

pub use cli::BackupCommand;
pub use cli::paths::workspace_state_dir;
pub use config::{BackupSettings, OnLimit};
pub use error::{BackupError, BackupRef};
pub use restore::{RestoreReport, restore};
pub use retention::report::{PruneReason, PruneReport, PrunedVersion, Sink};
pub use store::BackupStore;
pub use store::durable::Saving;
