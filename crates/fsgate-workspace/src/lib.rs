//! The workspace: every filesystem operation, through one `cap_std::fs::Dir` on the root.
//!
//! # Layer
//!
//! Owns: every filesystem operation on a workspace, beneath one root handle. Depends on
//! `fsgate-base` only. May not touch: the policy (it never decides what is allowed:
//! the gateway asks before it calls), the audit log, the backups.
//!
//! No `std::fs` call here ever receives a path from a request: paths are resolved
//! beneath the root handle (cap-std, openat2 `RESOLVE_BENEATH`), and what was opened is
//! checked by type (regular file, one hard link) on the open descriptor.

mod atomic;
mod chmod;
mod dir_cache;
mod dir_sync;
mod error;
mod gather;
mod kind;
mod open;
mod page;
mod permits;
mod read;
mod remove;
mod resolve;
mod root;
mod search;
mod search_pool;
pub mod spare;
mod symlink;
pub mod sync_pool;
mod temp_name;
mod unnamed;
mod utimes;
mod walk;
mod write;

/// For the fuzz targets in `fuzz/` (crate feature `fuzzing` only).
#[cfg(feature = "fuzzing")]
pub mod fuzz {
    /// Waits until no helper thread runs a job (a spare being made, a sync). The leak
    /// check after each input then never meets memory a helper holds mid-job: the
    /// sanitizer, not seeing a helper's stack, reported such memory lost (docs/fuzzing.md).
    pub fn settle() {
        // Bounded: a job that never ends shows as the input's hang, not here.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !crate::sync_pool::settled() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

pub use atomic::move_into_place;
pub use dir_sync::{cannot_sync_dirs, sync_dir_shared};
pub use error::WsError;
pub use gather::answer::{Cut, Gathered, Reading, Room, Take, Tally};
pub use kind::FileKind;
pub use open::open_dir_no_links;
pub use page::Page;
pub use page::spec::PageSpec;
pub use read::{FileContent, StatInfo, format_permissions, is_binary, text_window_range};
pub use resolve::{Follow, Resolved};
pub use root::Workspace;
pub use search::{ContentGate, GrepMatch, GrepOptions, GrepOutcome, IncludeGlob, json_string_len};
pub use symlink::MAX_TARGET_BYTES;
pub use temp_name::{TempName, is_own_temp};
pub use utimes::Times;
pub use walk::{Entry, MAX_DEPTH, Visit, Walked, height};
pub use write::entries::Removal;
pub use write::{EntrySync, EntrySyncing, Replace, StagedWrite};
