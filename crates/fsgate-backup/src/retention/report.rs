//! What a prune removed and why: [`PruneReport`], for the audit log.

use crate::error::BackupRef;

/// Which retention rule removed a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneReason {
    /// More than `keep_versions` newer versions of the same file exist.
    KeepVersions,
    /// Older than `max_age`.
    MaxAge,
    /// Removed, oldest first, to get the store under `max_total_bytes`.
    MaxTotalBytes,
}

/// One removed version and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedVersion {
    /// The version that was removed.
    pub backup: BackupRef,
    /// The rule that removed it.
    pub reason: PruneReason,
}

/// What a prune did, for the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneReport {
    /// Versions removed, in the order they were removed.
    pub removed: Vec<PrunedVersion>,
    /// Versions left.
    pub kept_versions: usize,
    /// Bytes of content left.
    pub kept_bytes: u64,
    /// The store is still over `max_total_bytes` because only newest versions remain.
    pub over_budget: bool,
    /// Crash leftovers (versions without a complete record, temp files) older than an
    /// hour removed.
    pub leftovers_removed: usize,
    /// The pass was cut short ([`BackupStore::prune_until`](crate::store::BackupStore::prune_until)):
    /// the counts of what was kept may not cover the whole store.
    pub stopped: bool,
    /// Versions removed and given to the pass's sink as it went, not kept in `removed`
    /// ([`BackupStore::prune_until`](crate::store::BackupStore::prune_until)).
    pub given: usize,
}

/// Where a pass gives what it removed, a part at a time, as it goes.
pub type Sink<'a> = &'a mut dyn FnMut(Vec<PrunedVersion>);

impl PruneReport {
    /// Bytes (of content) the removed versions held.
    pub fn removed_bytes(&self) -> u64 {
        self.removed.iter().map(|p| p.backup.size).sum()
    }
}
