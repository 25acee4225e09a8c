//! Where the next pass over the store starts. The start-up's pass is cut short when the
//! gateway stops (`BackupStore::prune_until`); it then writes the first shard it did not
//! reach to `RETENTION-NEXT` in the store, and the next pass starts there. Runs shorter
//! than a pass thus still take `max_age` round the whole store, a part each.
//!
//! The file is a hint: it is written in place and never synced. Torn, missing or not a
//! shard's name, the pass starts at the first shard. Anything but a regular file of one
//! name at its name (a link, a FIFO, a directory) is neither followed nor waited on:
//! read as no hint, and left as it is.

use std::io::{Read, Write};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{File, MetadataExt, OpenOptions, OpenOptionsExt};

use crate::layout::{self, RESUME_FILE};
use crate::store::BackupStore;

/// Bytes read of the file at most (a shard's name and a newline).
const MAX_BYTES: u64 = 16;

impl BackupStore {
    /// The shard the last pass cut short did not reach, if one did.
    pub(super) fn resume_point(&self) -> Option<String> {
        let mut opts = OpenOptions::new();
        opts.read(true);
        let file = self.open_resume_file(&mut opts).ok()?;
        let mut text = String::new();
        file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
        let shard = text.trim_end();
        layout::is_shard_name(shard).then(|| shard.to_owned())
    }

    /// Makes `shard` the next pass's start. Best effort: unwritten, the next pass starts
    /// at the first shard.
    pub(super) fn set_resume_point(&self, shard: &str) {
        let mut opts = OpenOptions::new();
        opts.write(true).create(true);
        let written = self.open_resume_file(&mut opts).and_then(|mut f| {
            f.set_len(0)?;
            f.write_all(format!("{shard}\n").as_bytes())
        });
        if let Err(e) = written {
            tracing::debug!("backup retention: cannot note where the next pass starts: {e}");
        }
    }

    /// The file at [`RESUME_FILE`] opened with `opts`, never through a link and without
    /// waiting (a FIFO there must not hold the pass); an error if it is not a regular file
    /// of one name (a hard link to `FORMAT` must not be truncated).
    fn open_resume_file(&self, opts: &mut OpenOptions) -> std::io::Result<File> {
        let nonblock = rustix::fs::OFlags::NONBLOCK.bits() as i32;
        opts.custom_flags(nonblock).follow(FollowSymlinks::No);
        let file = self.dir().open_with(RESUME_FILE, opts)?;
        let meta = file.metadata()?;
        if !meta.is_file() || meta.nlink() != 1 {
            return Err(std::io::Error::other("not a regular file of one name"));
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet};
    use std::sync::atomic::AtomicBool;

    use time::OffsetDateTime;

    use crate::layout::{self, RESUME_FILE};
    use crate::store::BackupStore;
    use crate::store::tests::{open_store, save_str};
    use crate::{BackupSettings, PruneReport, PrunedVersion};

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

    /// A pass of `store` until `stop`, and what it gave its sink (all it removed).
    fn pass_until(store: &BackupStore, stop: &AtomicBool) -> (PruneReport, Vec<PrunedVersion>) {
        let mut given = Vec::new();
        let report = store.prune_until(stop, &mut |v| given.extend(v));
        let report = report.expect("prune");
        assert_eq!(report.given, given.len());
        (report, given)
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
            // A count made before a pass cut short is too high after it: dropped.
            store.lock_quota().committed = Some(1 << 40);
            let (report, removed) = pass_until(&store, &stop);
            assert!(report.stopped);
            let in_shards: BTreeSet<String> = (removed.iter())
                .map(|p| layout::shard(&p.backup.rel_path))
                .collect();
            assert!(in_shards.len() <= 1, "one shard a pass: {in_shards:?}");
            assert!(
                visited.is_disjoint(&in_shards),
                "visited again: {in_shards:?}"
            );
            visited.extend(in_shards);
            got.extend(removed.iter().map(|p| p.backup.id.clone()));
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
        pass_until(&store, &stop);
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
            let (_, removed) = pass_until(&store, &stop);
            let first = &removed.first().expect("removed").backup.rel_path;
            assert_eq!(&layout::shard(first), shard);
        }
    }

    /// Whatever lies at the hint's name that is not a regular file is neither followed
    /// nor waited on: a FIFO does not hold the pass, a link is not written through (here
    /// to `FORMAT`, which would unmake the store), a directory is left alone.
    #[test]
    fn what_lies_at_the_hints_name_is_neither_followed_nor_waited_on() {
        let (_tmp, store) = old_store();
        let at = store.location().join(RESUME_FILE);
        let stop = AtomicBool::new(true);
        let format = std::fs::read(store.location().join("FORMAT")).expect("FORMAT");
        std::os::unix::fs::symlink("FORMAT", &at).expect("link");
        assert_eq!(store.resume_point(), None);
        assert!(pass_until(&store, &stop).0.stopped);
        assert_eq!(
            std::fs::read(store.location().join("FORMAT")).expect("FORMAT"),
            format
        );
        std::fs::remove_file(&at).expect("unlink");
        std::fs::hard_link(store.location().join("FORMAT"), &at).expect("hard link");
        assert!(pass_until(&store, &stop).0.stopped);
        assert_eq!(
            std::fs::read(store.location().join("FORMAT")).expect("FORMAT"),
            format
        );
        std::fs::remove_file(&at).expect("unlink");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &at,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("fifo");
        // A pass that waited on the FIFO would never end: run it on a thread, bounded.
        let (done, ended) = std::sync::mpsc::channel();
        let reopened = BackupStore::open(store.location(), &BackupSettings::default());
        let reopened = reopened.expect("reopen");
        std::thread::spawn(move || {
            let stop = AtomicBool::new(true);
            let report = reopened.prune_until(&stop, &mut |_| {});
            let _ = done.send(report.map(|r| r.stopped));
        });
        let result = ended.recv_timeout(std::time::Duration::from_secs(30));
        assert!(matches!(result, Ok(Ok(true))), "{result:?}");
        std::fs::remove_file(&at).expect("unlink");
        std::fs::create_dir(&at).expect("dir");
        assert_eq!(store.resume_point(), None);
        assert!(pass_until(&store, &stop).0.stopped);
        assert!(at.is_dir());
    }
}
