//! The store's byte budget as a quota, and which versions are a session's originals.
//!
//! Before a backup is copied, its data size is reserved against `max_total_bytes`; if it
//! does not fit, retention makes room (never removing a file's newest version or its
//! session original), with some headroom for the saves after it; if that is not
//! enough, the backup — and so the change — is refused. A session is one gateway run
//! (one opened store): the first backup of a path in it is that path's original, unless
//! the gateway itself created the file earlier in the session (then there was no user
//! content before it).

use super::counts::Quota;
use super::retention::Room;
use super::retention::report::PruneReport;
use super::store::BackupStore;
use crate::error::BackupError;

/// A prune made to make room frees up to this fraction of the budget beyond the room
/// asked for (a 1 GiB store: 64 MiB of its oldest versions; `retention::Room` says what
/// bounds it), so that one pass over the store serves many saves.
const HEADROOM_DIVISOR: u64 = 16;

impl BackupStore {
    /// Reserves `want` bytes for a new version of `rel_path`, pruning to make room if
    /// needed. Returns how many data bytes the copy may store (the room left).
    pub(crate) fn reserve_room(&self, rel_path: &str, want: u64) -> Result<u64, BackupError> {
        let budget = self.retention.max_total_bytes.unwrap_or(u64::MAX);
        if let Some(room) = self.try_reserve(want, budget)? {
            return Ok(room);
        }
        // Room for the saves in flight (the pass counts what is on disk) and for the
        // next saves too: at its budget, a store that freed only what this save needs
        // would read every record again on every later save.
        let in_flight = self.lock_quota().in_flight;
        let report = self.prune_reserving(Room {
            need: want.saturating_add(in_flight),
            headroom: budget / HEADROOM_DIVISOR,
        })?;
        if !report.removed.is_empty() {
            self.lock_quota().reports.push(report);
        }
        match self.try_reserve(want, budget)? {
            Some(room) => Ok(room),
            None => {
                let used = self.lock_quota().committed.unwrap_or(0);
                Err(BackupError::TooLarge {
                    limit: "backup.max_total_bytes",
                    message: format!(
                        "the backup of {rel_path:?} needs {want} bytes but the store holds {used} bytes \
                         of newest versions and session originals, which retention keeps; \
                         [backup] max_total_bytes allows {budget}"
                    ),
                })
            }
        }
    }

    /// Reserves `want` if it fits: Some(room for this copy), else None.
    fn try_reserve(&self, want: u64, budget: u64) -> Result<Option<u64>, BackupError> {
        // Not `match self.lock_quota().committed`: the guard would live through the arms.
        let known = self.lock_quota().committed;
        let committed = match known {
            Some(c) => c,
            None => self.count_committed()?,
        };
        let mut q = self.lock_quota();
        let used = committed.saturating_add(q.in_flight);
        if used.saturating_add(want) > budget {
            return Ok(None);
        }
        q.in_flight += want;
        Ok(Some(budget - used))
    }

    /// The store's bytes, counted once: by a pass over the whole store running now (the
    /// start-up's runs beside the serving), else here.
    fn count_committed(&self) -> Result<u64, BackupError> {
        let _pass = self.pass.lock().unwrap_or_else(|p| p.into_inner());
        let counted = self.lock_quota().committed;
        match counted {
            Some(c) => Ok(c),
            None => {
                let total = self.stored_total()?;
                Ok(*self.lock_quota().committed.get_or_insert(total))
            }
        }
    }

    /// Ends a reservation of `want` bytes; `stored` is what the saved version holds.
    pub(crate) fn settle_room(&self, want: u64, stored: Option<u64>) {
        let mut q = self.lock_quota();
        q.in_flight = q.in_flight.saturating_sub(want);
        if let Some(s) = stored {
            q.settled = q.settled.wrapping_add(s);
        }
        if let (Some(c), Some(s)) = (q.committed.as_mut(), stored) {
            *c = c.saturating_add(s);
        }
    }

    /// Prunes run to make room since the last call, for the audit log.
    pub fn take_prune_reports(&self) -> Vec<PruneReport> {
        std::mem::take(&mut self.lock_quota().reports)
    }

    pub(crate) fn lock_quota(&self) -> std::sync::MutexGuard<'_, Quota> {
        self.quota.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_touched(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.touched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True if the gateway has not changed `rel_path` yet in this session.
    pub(crate) fn is_first_change(&self, rel_path: &str) -> bool {
        !self.lock_touched().contains(rel_path)
    }

    /// Notes that the gateway changed (or created) `rel_path`: later backups of it hold
    /// content of this session, not the user's original.
    pub fn note_changed(&self, rel_path: &str) {
        self.lock_touched().insert(rel_path.to_owned());
    }

    /// Notes a rename: what is at `to` (and beneath it) now is what was at `from`, so it
    /// is an original exactly when that was.
    pub fn note_moved(&self, from: &str, to: &str) {
        let mut touched = self.lock_touched();
        let under = |p: &str, root: &str| {
            p == root || p.strip_prefix(root).is_some_and(|r| r.starts_with('/'))
        };
        touched.retain(|p| !under(p, to));
        let moved: Vec<String> = touched
            .iter()
            .filter(|p| under(p, from))
            .map(|p| format!("{to}{}", &p[from.len()..]))
            .collect();
        touched.retain(|p| !under(p, from));
        touched.extend(moved);
    }
}

#[cfg(test)]
mod tests {
    use super::super::BackupSettings;
    use super::super::store::tests::open_store;

    /// A store at its budget: the save that needs room frees headroom for the saves
    /// after it, so 32 more saves pass over the whole store a few times, not 32.
    #[test]
    fn a_store_at_its_budget_passes_over_it_once_for_many_saves() {
        let settings = BackupSettings {
            max_total_bytes: Some(1600),
            ..Default::default()
        };
        let (tmp, store) = open_store(&settings);
        let work = tmp.path().join("work.txt");
        let save = |i: u32| {
            std::fs::write(&work, format!("{i:010}")).expect("write");
            let file = std::fs::File::open(&work).expect("open");
            store.save_file("f.txt", &file).expect("save");
        };
        // 160 versions of 10 bytes: the budget, exactly.
        (0..160).for_each(save);
        assert!(store.take_prune_reports().is_empty(), "nothing pruned yet");
        (160..192).for_each(save);
        let passes = store.take_prune_reports();
        assert!(
            (1..=4).contains(&passes.len()),
            "{} passes over the store for 32 saves",
            passes.len()
        );
        let left = store.list(Some("f.txt")).expect("list");
        let bytes: u64 = left.iter().map(|v| v.size).sum();
        assert!(bytes <= 1600, "the store keeps its budget: {bytes}");
        assert!(left[0].original, "the session's original is kept");
        let (newest, _) = store.open_version("f.txt", None).expect("newest");
        let want = fsgate_base::sha256::Sha256::digest(b"0000000191");
        assert_eq!(newest.sha256, hex::encode(want));
    }

    #[test]
    fn renames_carry_the_session_state() {
        let (_tmp, store) = open_store(&BackupSettings::default());
        store.note_changed("a/x");
        store.note_changed("b/old");
        store.note_moved("a", "b");
        assert!(store.is_first_change("a/x"));
        assert!(!store.is_first_change("b/x"));
        assert!(store.is_first_change("b/old"), "the old b was replaced");
        store.note_moved("user.txt", "b/x");
        assert!(store.is_first_change("b/x"), "user content moved over it");
    }
}
