//! The pass over a store of one-file versions, one shard at a time: every version of a
//! path lies in its path's shard, so `keep_versions` and `max_age` need no more, and
//! the pass holds one shard's records, not the store's. The byte budget orders the
//! whole store; it takes a second pass, only when the store is over it, which keeps
//! each removable version's time, size, shard and name (a few dozen bytes) alone.

use std::collections::HashSet;

use time::OffsetDateTime;

use super::report::{PruneReason, PruneReport, PrunedVersion};
use super::{PassOpts, Room, by_path, choose, count_over_budget, protected};
use crate::config::Retention;
use crate::error::BackupError;
use crate::layout;
use crate::scan::{Course, Incomplete};
use crate::store::{BackupStore, Place};

/// A version the byte budget may remove, as the second pass keeps it.
struct Candidate {
    at: OffsetDateTime,
    stored: u64,
    shard: String,
    name: String,
}

impl BackupStore {
    /// `keep_versions` and `max_age` shard by shard, from where the last pass cut short
    /// stopped, then the byte budget if the store is over it (with `room`). Once `stop`
    /// is set it ends between two shards, and the next pass starts at the one it did not
    /// reach.
    pub(super) fn prune_by_shard(
        &self,
        now: OffsetDateTime,
        pass: &mut PassOpts<'_>,
        report: &mut PruneReport,
    ) -> Result<Vec<Incomplete>, BackupError> {
        let local = Retention {
            max_total_bytes: None,
            ..self.retention
        };
        let course = Course {
            from: self.resume_point(),
            stop: pass.stop,
        };
        let visited = self.visit_shards_on(&|_| true, &course, &mut |versions| {
            let doomed = choose(&versions, local, now, Room::default());
            self.remove_doomed(&versions, doomed, (pass, report))
        })?;
        if let Some(next) = &visited.stopped_before {
            self.set_resume_point(next);
            report.stopped = true;
            return Ok(visited.incomplete);
        }
        if let Some(budget) = self.retention.max_total_bytes
            && report
                .kept_bytes
                .saturating_add(pass.room.need)
                .saturating_add(pass.room.headroom)
                > budget
        {
            self.prune_oldest(budget, pass, report)?;
        }
        Ok(visited.incomplete)
    }

    /// The byte budget: the oldest versions that are not a file's newest or newest
    /// original, as many as [`count_over_budget`] says, each read again (it names the
    /// version in the report; one gone meanwhile is skipped).
    pub(super) fn prune_oldest(
        &self,
        budget: u64,
        pass: &mut PassOpts<'_>,
        report: &mut PruneReport,
    ) -> Result<(), BackupError> {
        let mut candidates: Vec<Candidate> = Vec::new();
        let course = Course {
            from: None,
            stop: pass.stop,
        };
        let visited = self.visit_shards_on(&|_| true, &course, &mut |versions| {
            let kept: HashSet<usize> = protected(&by_path(&versions), &versions);
            let removable = versions
                .iter()
                .enumerate()
                .filter(|(i, _)| !kept.contains(i));
            for (_, v) in removable {
                if let Place::Packed { shard } = &v.place {
                    candidates.push(Candidate {
                        at: v.at,
                        stored: v.stored(),
                        shard: shard.clone(),
                        name: layout::packed_name(&v.dir, &v.stem),
                    });
                }
            }
            Ok(())
        })?;
        // Cut short, the oldest of the store are not known: nothing goes for the budget.
        if visited.stopped_before.is_some() {
            report.stopped = true;
            return Ok(());
        }
        candidates.sort_by_key(|c| c.at);
        let sizes: Vec<u64> = candidates.iter().map(|c| c.stored).collect();
        let n = count_over_budget(&sizes, report.kept_bytes, budget, pass.room);
        for c in &candidates[..n] {
            // Gone either way: removed here, or meanwhile by another prune (which
            // reports it). The count of what is kept drops all the same.
            report.kept_versions = report.kept_versions.saturating_sub(1);
            report.kept_bytes = report.kept_bytes.saturating_sub(c.stored);
            let Some(v) = self.reread(&c.shard, &c.name)? else {
                continue;
            };
            if self.remove_version(&v)? {
                report.removed.push(PrunedVersion {
                    backup: v.to_ref(),
                    reason: PruneReason::MaxTotalBytes,
                });
                pass.give_some(report);
            }
        }
        Ok(())
    }
}
