//! What the store counts in memory between saves: the bytes it holds and is saving,
//! for `max_total_bytes` ([`Quota`], see `quota`), and its last pass over the whole
//! store ([`Sweep`], see `retention`).

use std::time::Instant;

use crate::retention::report::PruneReport;

/// Bytes held and being saved.
#[derive(Debug, Default)]
pub(crate) struct Quota {
    /// Data bytes of the committed versions (None until counted once).
    pub committed: Option<u64>,
    /// Data bytes reserved by saves in progress.
    pub in_flight: u64,
    /// Prunes made to make room, not yet recorded by the gateway.
    pub reports: Vec<PruneReport>,
    /// Data bytes of every version saved since the store was opened (wrapping): a pass
    /// over the whole store adds to its count what was saved while it ran.
    pub settled: u64,
}

/// When the last pass over the whole store ran, and how many versions it left.
#[derive(Debug)]
pub(crate) struct Sweep {
    /// The save count (see [`BackupStore::sweep_due`](crate::store::BackupStore::sweep_due)) when it was started.
    pub(crate) saves: u64,
    /// Versions it left.
    pub(crate) versions: u64,
    /// When it was started.
    pub(crate) at: Instant,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            saves: 0,
            versions: 0,
            at: Instant::now(),
        }
    }
}
