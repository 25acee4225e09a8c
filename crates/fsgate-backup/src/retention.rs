//! Retention: [`BackupStore::prune`] applies keep-N, max-age and the byte budget (and
//! removes crash leftovers: `leftovers`).

mod by_shard;
mod leftovers;
pub(crate) mod report;
mod resume;

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::config::Retention;
use super::layout::{self, DATA_SUFFIX, META_SUFFIX};
use super::scan::Incomplete;
use super::store::{BackupStore, Place, Version, sync_dir};
use crate::error::BackupError;
use report::{PruneReason, PruneReport, PrunedVersion, Sink};

/// The periodic pass over the whole store runs at least this often (given enough saves)
/// however large the store is, for `max_age` of files no save touches.
const SWEEP_INTERVAL: Duration = Duration::from_secs(600);

/// At most this many versions are removed for a prune's headroom (beyond what its
/// room needs): each removal syncs a directory, and a save waits for its prune.
const HEADROOM_MAX_VERSIONS: usize = 256;

/// Removed versions a pass with a sink gives on at once, as soon as it holds as many
/// (the rest at its end).
const GIVE_AT: usize = 1_000;

/// How a pass over the whole store runs, besides its clock: the room it makes under the
/// byte budget, the flag that cuts it short, and where what it removes goes as it goes.
#[derive(Default)]
pub(crate) struct PassOpts<'a> {
    pub(crate) room: Room,
    pub(crate) stop: Option<&'a AtomicBool>,
    pub(crate) sink: Option<Sink<'a>>,
}

impl PassOpts<'_> {
    /// Gives the versions `report` holds as removed to the sink, if there is one:
    /// [`GIVE_AT`] at a time while it holds as many.
    pub(crate) fn give_some(&mut self, report: &mut PruneReport) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        while report.removed.len() >= GIVE_AT {
            let rest = report.removed.split_off(GIVE_AT);
            report.given += GIVE_AT;
            sink(std::mem::replace(&mut report.removed, rest));
        }
    }

    /// Gives all the versions `report` holds as removed to the sink, if there is one.
    pub(crate) fn give_all(&mut self, report: &mut PruneReport) {
        self.give_some(report);
        if let Some(sink) = self.sink.as_mut()
            && !report.removed.is_empty()
        {
            report.given += report.removed.len();
            sink(std::mem::take(&mut report.removed));
        }
    }
}

/// What a prune makes room for under the byte budget: `need` bytes that must fit, and
/// `headroom` bytes more that it frees if it can, so the saves after it find room. For
/// the headroom it removes the oldest versions until it fits, or until
/// `HEADROOM_MAX_VERSIONS` more are gone, or until a sixteenth of what the removable
/// versions held fits: a store of little history keeps most of it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Room {
    pub(crate) need: u64,
    pub(crate) headroom: u64,
}

impl BackupStore {
    /// Applies the retention rules of `[backup]` to the whole store and reports what it
    /// removed. Reads every record, so call it at start-up and from time to time (e.g.
    /// every few hundred saves), not on every request. Without retention settings it
    /// only removes crash leftovers.
    pub fn prune(&self) -> Result<PruneReport, BackupError> {
        self.prune_at(OffsetDateTime::now_utc())
    }

    /// [`prune`](Self::prune), ending between two shards once `stop` is set (after one
    /// shard at least): the start-up's pass, cut short when the gateway stops rather
    /// than held to its end. Its report then says so (`stopped`), and the next pass
    /// starts at the shard this one did not reach (`resume.rs`), so that passes cut short
    /// still go round the whole store. What it removes goes to `sink` as it goes (a
    /// thousand at a time, and the rest at its end), not into the report: a pass that
    /// removes much of a large store holds little of it. Not cut short: a store that
    /// still holds versions of layout 1 (read whole), the byte budget's removals once
    /// its reading of the store is done, and the removal of crash leftovers.
    pub fn prune_until(
        &self,
        stop: &AtomicBool,
        sink: Sink<'_>,
    ) -> Result<PruneReport, BackupError> {
        let pass = PassOpts {
            room: Room::default(),
            stop: Some(stop),
            sink: Some(sink),
        };
        self.prune_pass(OffsetDateTime::now_utc(), pass)
    }

    /// [`prune`](Self::prune) with the clock given.
    pub(crate) fn prune_at(&self, now: OffsetDateTime) -> Result<PruneReport, BackupError> {
        self.prune_with(now, Room::default())
    }

    /// A prune that also makes `room` under the byte budget.
    pub(crate) fn prune_reserving(&self, room: Room) -> Result<PruneReport, BackupError> {
        self.prune_with(OffsetDateTime::now_utc(), room)
    }

    /// Whether the periodic pass over the whole store ([`prune`](Self::prune)) is due,
    /// `saves` backups into the session. Saves keep their own file to `keep_versions`
    /// and the store to its byte budget, so the pass is for `max_age` of files no save
    /// touches and for crash leftovers: with `max_age`, every `every` saves but no more
    /// often than once per as many saves as the last pass left versions (it reads every
    /// record, so its cost per save stays bounded however large the store grows); in
    /// any case once `SWEEP_INTERVAL` has passed (and `every` saves). At most one
    /// caller is told it is due.
    pub fn sweep_due(&self, saves: u64, every: u64) -> bool {
        let mut s = self.sweep.lock().unwrap_or_else(|p| p.into_inner());
        let since = saves.saturating_sub(s.saves);
        let by_count = self.retention.max_age.is_some() && since >= every.max(s.versions);
        let due = by_count || (since >= every && s.at.elapsed() >= SWEEP_INTERVAL);
        if due {
            s.saves = saves;
            s.at = Instant::now();
        }
        due
    }

    /// Applies `keep_versions` and `max_age` to the versions of `rel_path` alone: after
    /// a save, the only file whose count grew. Cheap when nothing is due: without those
    /// rules it reads nothing, with `keep_versions` alone only the directory's names.
    /// (The byte budget is kept by every save reserving its room.)
    pub(crate) fn prune_path(&self, rel_path: &str) -> Result<PruneReport, BackupError> {
        let rules = Retention {
            max_total_bytes: None,
            ..self.retention
        };
        let mut report = PruneReport::default();
        let Some(keep) = rules.keep_versions.or(rules.max_age.map(|_| u32::MAX)) else {
            return Ok(report);
        };
        if rules.max_age.is_none() && self.count_of(rel_path)? <= keep as usize {
            return Ok(report);
        }
        let versions = self.versions_of(rel_path)?;
        let mut freed = 0;
        for (index, reason) in choose(&versions, rules, OffsetDateTime::now_utc(), Room::default())
        {
            let v = &versions[index];
            // A concurrent save of the same file may prune the same version: only the
            // one that removed it reports it and frees its bytes.
            if self.remove_version(v)? {
                freed += v.stored();
                report.removed.push(PrunedVersion {
                    backup: v.to_ref(),
                    reason,
                });
            }
        }
        report.kept_versions = versions.len() - report.removed.len();
        if let Some(c) = self.lock_quota().committed.as_mut() {
            *c = c.saturating_sub(freed);
        }
        Ok(report)
    }

    fn prune_with(&self, now: OffsetDateTime, room: Room) -> Result<PruneReport, BackupError> {
        let pass = PassOpts {
            room,
            ..PassOpts::default()
        };
        self.prune_pass(now, pass)
    }

    fn prune_pass(
        &self,
        now: OffsetDateTime,
        mut pass: PassOpts<'_>,
    ) -> Result<PruneReport, BackupError> {
        let _pass = self.pass.lock().unwrap_or_else(|p| p.into_inner());
        let settled_before = self.lock_quota().settled;
        let mut report = PruneReport::default();
        let incomplete = match self.legacy {
            Some(_) => self.prune_whole(now, &mut pass, &mut report),
            None => self.prune_by_shard(now, &mut pass, &mut report),
        };
        // What was removed is given on even if the pass failed midway.
        pass.give_all(&mut report);
        let incomplete = incomplete?;
        // A pass cut short counted part of the store, and a count made before it is
        // now too high by what it removed: the next backup that needs one counts again.
        if report.stopped {
            self.lock_quota().committed = None;
        } else {
            // Saves made while the pass ran (whose count does not wait for it once the
            // store was counted): one in a shard it had read is not in its count, so it
            // is added; one in a shard it read later is then counted twice. The count
            // may run high until the next pass, never low.
            let mut q = self.lock_quota();
            let meanwhile = q.settled.wrapping_sub(settled_before);
            q.committed = Some(report.kept_bytes.saturating_add(meanwhile));
            drop(q);
            if let Ok(mut s) = self.sweep.lock() {
                s.versions = report.kept_versions as u64;
            }
            report.over_budget = self
                .retention
                .max_total_bytes
                .is_some_and(|b| report.kept_bytes > b);
        }
        report.leftovers_removed =
            self.remove_legacy_leftovers(now)? + self.remove_incomplete(&incomplete, now);
        let removed = report.removed.len() + report.given;
        if removed > 0 {
            tracing::info!(removed, "backup retention pruned old versions");
        }
        Ok(report)
    }

    /// The pass with the whole store in memory, for a store that still holds layout-1
    /// versions (a path may have versions in both layouts).
    fn prune_whole(
        &self,
        now: OffsetDateTime,
        pass: &mut PassOpts<'_>,
        report: &mut PruneReport,
    ) -> Result<Vec<Incomplete>, BackupError> {
        let (versions, incomplete) = self.scan_all(&|_| true)?;
        let doomed = choose(&versions, self.retention, now, pass.room);
        self.remove_doomed(&versions, doomed, (pass, report))?;
        Ok(incomplete)
    }

    /// Removes the `doomed` among `versions` and counts the others as kept. Only a
    /// version it removed itself is reported (another prune may have removed it first,
    /// and reports it).
    fn remove_doomed(
        &self,
        versions: &[Version],
        doomed: Vec<(usize, PruneReason)>,
        (pass, report): (&mut PassOpts<'_>, &mut PruneReport),
    ) -> Result<(), BackupError> {
        let mut removed_ids = HashSet::new();
        for (index, reason) in doomed {
            let v = &versions[index];
            removed_ids.insert(index);
            if self.remove_version(v)? {
                report.removed.push(PrunedVersion {
                    backup: v.to_ref(),
                    reason,
                });
                pass.give_some(report);
            }
        }
        let kept = versions
            .iter()
            .enumerate()
            .filter(|(i, _)| !removed_ids.contains(i));
        for (_, v) in kept {
            report.kept_versions += 1;
            report.kept_bytes += v.stored();
        }
        Ok(())
    }

    /// Removes one version (of layout 1: sidecar first, so the version disappears
    /// atomically, then data). False if it was already gone (another prune removed it).
    fn remove_version(&self, v: &Version) -> Result<bool, BackupError> {
        let (dir, names, shown) = match &v.place {
            Place::Packed { shard } => (
                self.shard_dir(shard)?,
                vec![layout::packed_name(&v.dir, &v.stem)],
                shard.as_str(),
            ),
            Place::Legacy => (
                match self.legacy_dir()?.open_dir(&v.dir) {
                    Ok(d) => Some(d),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(BackupError::io("open", v.dir.clone())(e)),
                },
                vec![
                    format!("{}{META_SUFFIX}", v.stem),
                    format!("{}{DATA_SUFFIX}", v.stem),
                ],
                v.dir.as_str(),
            ),
        };
        let Some(dir) = dir else { return Ok(false) };
        let mut removed = false;
        for (i, name) in names.iter().enumerate() {
            match dir.remove_file(name) {
                Ok(()) => removed |= i == 0,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackupError::io("remove", format!("{shown}/{name}"))(e)),
            }
        }
        sync_dir(&dir).map_err(BackupError::io("sync", shown))?;
        Ok(removed)
    }
}

/// Decides which versions to remove, as (index into `versions`, reason), in order, so
/// that `room` fits the byte budget. Per file, the newest version is never removed for
/// the budget, and the newest session original (see [`super::quota`]) is removed only
/// by age: an agent's rewrites must not push out the user's own content.
fn choose(
    versions: &[Version],
    rules: Retention,
    now: OffsetDateTime,
    room: Room,
) -> Vec<(usize, PruneReason)> {
    let lists = by_path(versions);
    let protected = protected(&lists, versions);
    let mut doomed: Vec<(usize, PruneReason)> = Vec::new();
    let age_cutoff = rules.max_age.map(|age| now - age);
    for list in lists.values() {
        for (rank, &i) in list.iter().enumerate() {
            let reason = if age_cutoff.is_some_and(|cut| versions[i].at < cut) {
                Some(PruneReason::MaxAge)
            } else if rules.keep_versions.is_some_and(|k| rank >= k as usize)
                && !protected.contains(&i)
            {
                Some(PruneReason::KeepVersions)
            } else {
                None
            };
            if let Some(r) = reason {
                doomed.push((i, r));
            }
        }
    }
    if let Some(budget) = rules.max_total_bytes {
        let gone: HashSet<usize> = doomed.iter().map(|(i, _)| *i).collect();
        let total: u64 = (0..versions.len())
            .filter(|i| !gone.contains(i))
            .map(|i| versions[i].stored())
            .sum();
        let mut candidates: Vec<usize> = (0..versions.len())
            .filter(|i| !gone.contains(i) && !protected.contains(i))
            .collect();
        candidates.sort_by(|&a, &b| versions[a].at.cmp(&versions[b].at));
        let sizes: Vec<u64> = candidates.iter().map(|&i| versions[i].stored()).collect();
        let n = count_over_budget(&sizes, total, budget, room);
        doomed.extend(
            candidates[..n]
                .iter()
                .map(|&i| (i, PruneReason::MaxTotalBytes)),
        );
    }
    doomed
}

/// The indices of `versions` per path, newest first.
fn by_path(versions: &[Version]) -> BTreeMap<&str, Vec<usize>> {
    let mut lists: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, v) in versions.iter().enumerate() {
        lists.entry(v.meta.path.as_str()).or_default().push(i);
    }
    for list in lists.values_mut() {
        list.sort_by(|&a, &b| versions[b].at.cmp(&versions[a].at));
    }
    lists
}

/// Per file, the versions only age removes: its newest, and its newest session original.
fn protected(lists: &BTreeMap<&str, Vec<usize>>, versions: &[Version]) -> HashSet<usize> {
    let mut kept = HashSet::new();
    for list in lists.values() {
        kept.extend(list.first().copied());
        kept.extend(list.iter().copied().find(|&i| versions[i].meta.original));
    }
    kept
}

/// How many of the removable versions (their sizes, oldest first) the byte budget
/// removes, the store holding `total` bytes: until `room.need` fits, then while the
/// headroom does not (see [`Room`]).
fn count_over_budget(sizes: &[u64], mut total: u64, budget: u64, room: Room) -> usize {
    let removable = sizes.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let headroom = room.headroom.min(removable / 16);
    let (mut n, mut extra) = (0, 0);
    for &stored in sizes {
        let needed = total.saturating_add(room.need) > budget;
        let wanted = total.saturating_add(room.need).saturating_add(headroom) > budget
            && extra < HEADROOM_MAX_VERSIONS;
        if !needed && !wanted {
            break;
        }
        extra += usize::from(!needed);
        total = total.saturating_sub(stored);
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests;
