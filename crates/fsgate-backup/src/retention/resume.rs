//! Where the next pass over the store starts. The start-up's pass is cut short when the
//! gateway stops (`BackupStore::prune_until`); it then writes the first shard it did not
//! reach to `RETENTION-NEXT` in the store, and the next pass starts there. Runs shorter
//! than a pass thus still take `max_age` round the whole store, a part each.
//!
//! The file is a hint: it is written in place and never synced. Torn, missing or not a
//! shard's name, the pass starts at the first shard.

use std::io::Read;

use crate::layout::{self, RESUME_FILE};
use crate::store::BackupStore;

/// Bytes read of the file at most (a shard's name and a newline).
const MAX_BYTES: u64 = 16;

impl BackupStore {
    /// The shard the last pass cut short did not reach, if one did.
    pub(super) fn resume_point(&self) -> Option<String> {
        let mut text = String::new();
        let file = self.dir().open(RESUME_FILE).ok()?;
        file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
        let shard = text.trim_end();
        layout::is_shard_name(shard).then(|| shard.to_owned())
    }

    /// Makes `shard` the next pass's start. Best effort: unwritten, the next pass starts
    /// at the first shard.
    pub(super) fn set_resume_point(&self, shard: &str) {
        if let Err(e) = self.dir().write(RESUME_FILE, format!("{shard}\n")) {
            tracing::debug!("backup retention: cannot note where the next pass starts: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet};
    use std::sync::atomic::AtomicBool;

    use time::OffsetDateTime;

    use crate::BackupSettings;
    use crate::layout::{self, RESUME_FILE};
    use crate::store::BackupStore;
    use crate::store::tests::{open_store, save_str};

    fn t(secs: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_700_000_000 + secs).expect("valid time")
    }

    /// 40 files of three versions each, saved long ago, in a store whose `max_age` has
    /// passed for all of them.
    fn old_store() -> (tempfile::TempDir, BackupStore) {
        let (tmp, store) = open_store(&BackupSettings::default());
        for p in 0..40 {
            for v in 0..3 {
                save_str(&store, &format!("f{p}.txt"), &format!("{p}-{v}"), t(v));
            }
        }
        let settings = BackupSettings {
            max_age: Some("1h".into()),
            ..Default::default()
        };
        let store = BackupStore::open(store.location(), &settings).expect("reopen");
        (tmp, store)
    }

    /// The shards that hold versions.
    fn shards_of(store: &BackupStore) -> BTreeSet<String> {
        let list = store.list(None).expect("list");
        list.iter().map(|v| layout::shard(&v.rel_path)).collect()
    }

    /// The shard directories, in name order (the store makes them ahead: most are empty).
    fn shard_dirs(store: &BackupStore) -> Vec<String> {
        let dir = std::fs::read_dir(store.location().join("versions")).expect("versions");
        let mut out: Vec<String> = dir
            .map(|e| e.expect("entry").file_name().into_string().expect("name"))
            .collect();
        out.sort();
        out
    }

    /// Passes cut short at once visit one shard each, each from where the last stopped,
    /// and between them (one a shard) remove what one whole pass removes. Each leaves the store's
    /// byte count to be made (it counted part of the store); a whole pass then makes it.
    #[test]
    fn passes_cut_short_go_round_the_whole_store() {
        let (_a, whole) = old_store();
        let want: HashSet<String> = (whole.prune().expect("prune").removed.iter())
            .map(|p| p.backup.id.clone())
            .collect();
        assert!(!want.is_empty(), "max_age has work here");

        let (_b, store) = old_store();
        let shards = shards_of(&store);
        assert!(
            shards.len() > 10,
            "the files lie in many shards: {shards:?}"
        );
        let stop = AtomicBool::new(true);
        let mut got = HashSet::new();
        let mut visited = BTreeSet::new();
        for _ in 0..shard_dirs(&store).len() {
            let report = store.prune_until(&stop).expect("prune");
            assert!(report.stopped);
            let in_shards: BTreeSet<String> = (report.removed.iter())
                .map(|p| layout::shard(&p.backup.rel_path))
                .collect();
            assert!(in_shards.len() <= 1, "one shard a pass: {in_shards:?}");
            assert!(
                visited.is_disjoint(&in_shards),
                "visited again: {in_shards:?}"
            );
            visited.extend(in_shards);
            got.extend(report.removed.iter().map(|p| p.backup.id.clone()));
            assert!(store.lock_quota().committed.is_none());
        }
        assert_eq!(visited, shards);
        assert_eq!(got, want);

        let report = store.prune().expect("prune");
        assert!(!report.stopped);
        assert!(report.removed.is_empty());
        let left = store.list(None).expect("list");
        assert_eq!(report.kept_versions, left.len());
        assert_eq!(store.lock_quota().committed, Some(report.kept_bytes));
    }

    /// A pass cut short names the shard it did not reach; a file that names none (torn,
    /// or written by someone else) is passed over: the pass starts at the first shard.
    #[test]
    fn the_next_start_is_a_hint_read_with_care() {
        let (_tmp, store) = old_store();
        let dirs = shard_dirs(&store);
        let stop = AtomicBool::new(true);
        store.prune_until(&stop).expect("prune");
        let noted = std::fs::read_to_string(store.location().join(RESUME_FILE)).expect("noted");
        assert_eq!(
            noted,
            format!("{}\n", dirs[1]),
            "no file yet: from the first shard"
        );
        for torn in ["", "7", "zz\n", "../x", "0123456789abcdef0123"] {
            std::fs::write(store.location().join(RESUME_FILE), torn).expect("write");
            assert_eq!(store.resume_point(), None, "{torn:?}");
        }
        let held: Vec<String> = shards_of(&store).into_iter().collect();
        for shard in [&held[3], &held[held.len() - 1]] {
            std::fs::write(store.location().join(RESUME_FILE), shard).expect("write");
            let report = store.prune_until(&stop).expect("prune");
            let first = &report.removed.first().expect("removed").backup.rel_path;
            assert_eq!(&layout::shard(first), shard);
        }
    }
}
