//! Tests of [`BackupStore`]: open checks, save, list, open_version.

use std::io::Read;

use fsgate_base::sha256::Sha256;
use time::OffsetDateTime;

use std::sync::atomic::Ordering;

use cap_std::ambient_authority;

use super::shards::shard_index;
use super::*;
use crate::config::BackupSettings;
use crate::layout::VERSIONS_DIR;
use crate::packed;

/// A store in a fresh temp dir (the `TempDir` must outlive the store's use).
pub(crate) fn open_store(settings: &BackupSettings) -> (tempfile::TempDir, BackupStore) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = BackupStore::open(&tmp.path().join("store"), settings).expect("open store");
    (tmp, store)
}

/// Saves `text` as the content of `rel` at time `at`.
pub(crate) fn save_str(
    store: &BackupStore,
    rel: &str,
    text: &str,
    at: OffsetDateTime,
) -> BackupRef {
    store.save_at(rel, &mut text.as_bytes(), at).expect("save")
}

fn read_all(mut f: impl Read) -> String {
    let mut s = String::new();
    f.read_to_string(&mut s).expect("read backup");
    s
}

#[test]
fn save_then_open_latest_and_by_time() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let r1 = store
        .save("src/main.rs", &mut &b"fn main() {}"[..])
        .expect("save 1");
    let r2 = store
        .save("src/main.rs", &mut &b"fn main() { 2 }"[..])
        .expect("save 2");
    assert_eq!(r1.rel_path, "src/main.rs");
    assert_eq!(r1.size, 12);
    assert_eq!(r1.sha256, hex::encode(Sha256::digest(b"fn main() {}")));
    assert!(r1.ts < r2.ts, "timestamps increase: {} {}", r1.ts, r2.ts);
    assert_ne!(r1.id, r2.id);

    let (latest, f) = store.open_version("src/main.rs", None).expect("latest");
    assert_eq!(latest, r2);
    assert_eq!(read_all(f), "fn main() { 2 }");

    // By exact timestamp, by id, and by "at or before" a time.
    for at in [r1.ts.as_str(), r1.id.as_str()] {
        let (v, f) = store.open_version("src/main.rs", Some(at)).expect("by ts");
        assert_eq!(v, r1);
        assert_eq!(read_all(f), "fn main() {}");
    }
    let (v, _) = store
        .open_version("src/main.rs", Some("2999-01-01"))
        .expect("future");
    assert_eq!(v, r2);
    let early = store.open_version("src/main.rs", Some("2000-01-01T00:00:00Z"));
    assert!(
        matches!(early, Err(BackupError::NotFound { .. })),
        "{early:?}"
    );
    assert!(matches!(
        store.open_version("nope.txt", None),
        Err(BackupError::NotFound { .. })
    ));
    assert!(matches!(
        store.open_version("src/main.rs", Some("garbage")),
        Err(BackupError::BadTimestamp(_))
    ));
}

#[test]
fn same_instant_saves_never_collide() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time");
    let refs: Vec<_> = (0..20)
        .map(|i| save_str(&store, "a.txt", &format!("v{i}"), at))
        .collect();
    let ids: std::collections::HashSet<_> = refs.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids.len(), 20);
    // A second store on the same directory (another process) does not overwrite either.
    let other = BackupStore::open(store.location(), &BackupSettings::default()).expect("reopen");
    let r = save_str(&other, "a.txt", "other", at);
    assert!(!ids.contains(&r.id));
    assert_eq!(store.list(Some("a.txt")).expect("list").len(), 21);
}

#[test]
fn list_filters_by_path_and_directory() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time");
    save_str(&store, "src/a.rs", "a", at);
    save_str(&store, "src/b.rs", "b", at);
    save_str(&store, "srcx/c.rs", "c", at);
    save_str(&store, "README", "r", at);
    let long = format!("{}/deep.txt", "d".repeat(300));
    save_str(&store, &long, "deep", at);
    let paths = |p: Option<&str>| -> Vec<String> {
        store
            .list(p)
            .expect("list")
            .into_iter()
            .map(|r| r.rel_path)
            .collect()
    };
    assert_eq!(paths(Some("src")), vec!["src/a.rs", "src/b.rs"]);
    assert_eq!(paths(Some("src/")), vec!["src/a.rs", "src/b.rs"]);
    assert_eq!(paths(Some("src/a.rs")), vec!["src/a.rs"]);
    assert_eq!(paths(None).len(), 5);
    assert_eq!(paths(Some(&long)), vec![long.clone()]);
    let (r, f) = store.open_version(&long, None).expect("long path");
    assert_eq!(r.rel_path, long);
    assert_eq!(read_all(f), "deep");
    assert!(store.list(Some("../etc")).is_err());
}

/// The one file of a version, by its id.
pub(crate) fn version_file(store_root: &std::path::Path, r: &BackupRef) -> std::path::PathBuf {
    let (dir, stem) = r.id.split_once('/').expect("id has a slash");
    store_root
        .join("versions")
        .join(layout::shard(&r.rel_path))
        .join(layout::packed_name(dir, stem))
}

#[test]
fn the_record_holds_path_hash_and_size() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let r = store.save("a b/c.txt", &mut &b"hello"[..]).expect("save");
    let path = version_file(&tmp.path().join("store"), &r);
    let f = std::fs::File::open(&path).expect("one file per version");
    let (meta, len) = packed::read_record(&f).expect("record");
    assert_eq!(len, 5);
    assert_eq!(&std::fs::read(&path).expect("read")[..5], b"hello");
    assert_eq!(meta.path, "a b/c.txt");
    assert_eq!(meta.size, 5);
    assert_eq!(meta.sha256, hex::encode(Sha256::digest(b"hello")));
    assert_eq!(meta.ts, r.ts);
    assert_eq!(meta.format, 2);
    // Nothing else was written: no sidecar, no per-path directory, no layout-1 tree.
    let shard = path.parent().expect("shard");
    assert_eq!(std::fs::read_dir(shard).expect("ls").count(), 1);
    assert!(!tmp.path().join("store/files").exists());
}

#[test]
fn damaged_records_are_skipped_not_trusted() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let r = store.save("x.txt", &mut &b"one"[..]).expect("save");
    let path = version_file(&tmp.path().join("store"), &r);
    // Claim the version belongs to another path, with a valid checksum: the name no
    // longer matches.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    let (mut meta, len) = packed::read_record(&f).expect("record");
    meta.path = "y.txt".into();
    packed::append_record(&f, len, &meta).expect("forge");
    assert!(store.list(None).expect("list").is_empty());
    // A torn trailer is no version either.
    let r = store.save("z.txt", &mut &b"two"[..]).expect("save");
    let path = version_file(&tmp.path().join("store"), &r);
    let full = std::fs::metadata(&path).expect("stat").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(full - 1).expect("tear");
    assert!(store.list(None).expect("list").is_empty());
}

/// The sweep removes files without a trailer (crash leftovers) once old, but never a
/// file whose trailer is there and whose record fails its check: that may be a backup
/// with one bad byte (or a record a later release wrote), not a leftover.
#[test]
fn the_sweep_removes_torn_files_but_never_damaged_versions() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let root = tmp.path().join("store");
    let kept = store.save("x.txt", &mut &b"one"[..]).expect("save");
    let damaged = version_file(&root, &kept);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&damaged)
        .expect("open");
    // One byte of the record's JSON (just after the 3 bytes of content).
    std::os::unix::fs::FileExt::write_all_at(&f, b"X", 4).expect("flip");
    let torn = store.save("z.txt", &mut &b"two"[..]).expect("save");
    let torn = version_file(&root, &torn);
    let full = std::fs::metadata(&torn).expect("stat").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&torn)
        .expect("open")
        .set_len(full - 1)
        .expect("tear");
    assert!(store.list(None).expect("list").is_empty());
    let later = OffsetDateTime::now_utc() + time::Duration::hours(2);
    let report = store.prune_at(later).expect("prune");
    assert_eq!(report.leftovers_removed, 1);
    assert!(!torn.exists(), "the torn file is a leftover");
    assert!(
        damaged.exists(),
        "a damaged version was swept as a leftover"
    );
}

#[test]
fn invalid_paths_are_refused() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    for bad in ["", "/etc/passwd", "../x", "a/./b"] {
        assert!(
            matches!(
                store.save(bad, &mut &b""[..]),
                Err(BackupError::InvalidPath { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn read_errors_leave_no_version() {
    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let (_tmp, store) = open_store(&BackupSettings::default());
    let err = store.save("a.txt", &mut Failing).expect_err("must fail");
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert!(store.list(None).expect("list").is_empty());
}

#[cfg(unix)]
#[test]
fn open_creates_private_dir_and_refuses_unsafe_ones() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a/b/store");
    BackupStore::open(&dir, &BackupSettings::default()).expect("open");
    let mode = std::fs::metadata(&dir).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert_eq!(
        std::fs::read_to_string(dir.join("FORMAT")).expect("format"),
        "fsgate-backups 2\n"
    );

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = BackupStore::open(&dir, &BackupSettings::default()).expect_err("world-writable");
    assert!(
        err.to_string().contains("writable by group or others"),
        "{err}"
    );

    let home_like = tmp.path().join("home");
    std::fs::create_dir(&home_like).expect("mkdir");
    std::fs::set_permissions(&home_like, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(home_like.join("notes.txt"), "mine").expect("write");
    let err = BackupStore::open(&home_like, &BackupSettings::default()).expect_err("not a store");
    assert!(
        err.to_string().contains("not an fsgate backup store"),
        "{err}"
    );
}

#[test]
fn unusable_store_fails_closed() {
    // A file where the shard directory should be: works even as root, where
    // permission bits would not stop the write.
    let (tmp, store) = open_store(&BackupSettings::default());
    let blocker = tmp
        .path()
        .join("store/versions")
        .join(super::layout::shard("new.txt"));
    std::fs::write(&blocker, "not a directory").expect("plant");
    let result = store.save("new.txt", &mut &b"x"[..]);
    assert!(matches!(result, Err(BackupError::Io { .. })), "{result:?}");
    assert!(store.list(Some("new.txt")).expect("list").is_empty());
}

#[test]
fn bad_settings_refuse_to_open() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let settings = BackupSettings {
        max_age: Some("forever".into()),
        ..Default::default()
    };
    assert!(matches!(
        BackupStore::open(tmp.path(), &settings),
        Err(BackupError::BadSettings(_))
    ));
}

#[test]
fn store_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<BackupStore>();
    let (_tmp, store) = open_store(&BackupSettings::default());
    std::thread::scope(|s| {
        for t in 0..4 {
            let store = &store;
            s.spawn(move || {
                for i in 0..5 {
                    store
                        .save("shared.txt", &mut format!("{t}-{i}").as_bytes())
                        .expect("save");
                }
            });
        }
    });
    let versions = store.list(Some("shared.txt")).expect("list");
    assert_eq!(versions.len(), 20);
    assert!(
        versions.windows(2).all(|w| w[0].ts < w[1].ts),
        "distinct, ordered timestamps"
    );
}

#[test]
fn a_new_versions_data_file_can_be_read_back() {
    // Where the filesystem clones (btrfs, XFS), the clone is hashed by reading the new
    // data file: a write-only descriptor made every backup there fail (EBADF).
    let (_tmp, store) = open_store(&BackupSettings::default());
    let (dir_name, shard) = (layout::dir_name("a.txt"), layout::shard("a.txt"));
    let dir = store.open_shard(&shard).expect("dir");
    let (_, data) = store
        .reserve(&dir, &shard, &dir_name, OffsetDateTime::now_utc())
        .expect("reserve");
    std::io::Write::write_all(&mut &data, b"abc").expect("write");
    let caps = super::super::sparse::Caps {
        data: u64::MAX,
        len: u64::MAX,
    };
    let copied = super::super::sparse::walk(&data, None, caps).expect("hash it");
    assert_eq!(copied.size, 3);
}

/// Writes a version the way layout 1 did: `files/<dir>/<stem>.data` and its sidecar.
fn legacy_version(root: &std::path::Path, rel: &str, content: &str, at: OffsetDateTime) {
    let dir = root.join("files").join(layout::dir_name(rel));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let stem = layout::compact_ts(at);
    std::fs::write(dir.join(format!("{stem}.data")), content).expect("data");
    let meta = Sidecar {
        format: 1,
        path: rel.into(),
        ts: layout::rfc3339_ts(at),
        sha256: hex::encode(Sha256::digest(content.as_bytes())),
        size: content.len() as u64,
        stored: None,
        original: at.unix_timestamp() == 1_700_000_000,
        mode: None,
    };
    let json = serde_json::to_vec(&meta).expect("json");
    std::fs::write(dir.join(format!("{stem}.json")), json).expect("sidecar");
}

/// A store written by layout 1 keeps its versions: listed, opened, restored from and
/// pruned alongside new one-file versions, and the store is marked upgraded.
#[test]
fn a_layout_1_store_is_read_restored_and_pruned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    #[cfg(unix)]
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    std::fs::write(root.join("FORMAT"), "fsgate-backups 1\n").expect("format");
    let t = |s: i64| OffsetDateTime::from_unix_timestamp(1_700_000_000 + s).expect("time");
    for i in 0..3 {
        legacy_version(&root, "src/a.rs", &format!("old {i}"), t(i));
    }
    legacy_version(&root, "b.txt", "b old", t(0));
    // A layout-1 crash leftover: data without a sidecar.
    let orphan = root
        .join("files")
        .join(layout::dir_name("b.txt"))
        .join("20000101T000000.000000000Z.data");
    std::fs::write(&orphan, "orphan").expect("orphan");

    let settings = BackupSettings {
        keep_versions: Some(2),
        ..Default::default()
    };
    let store = BackupStore::open(&root, &settings).expect("open a layout-1 store");
    assert_eq!(
        std::fs::read_to_string(root.join("FORMAT")).expect("format"),
        "fsgate-backups 2\n"
    );
    let listed = store.list(None).expect("list");
    assert_eq!(listed.len(), 4, "{listed:#?}");
    assert!(listed[0].original && listed[0].rel_path == "b.txt");
    let kept_2 = root
        .join("files")
        .join(layout::dir_name("src/a.rs"))
        .join(format!("{}.data", layout::compact_ts(t(2))));
    assert!(kept_2.exists(), "the layout is where this test writes it");
    let (v, f) = store.open_version("src/a.rs", None).expect("latest");
    assert_eq!((v.size, read_all(f)), (5, "old 2".to_string()));
    let (_, f) = store
        .open_version("src/a.rs", Some(&listed[1].id))
        .expect("by id");
    assert_eq!(read_all(f), "old 0");

    // A new save lands in the new layout; keep_versions counts both layouts.
    let work = tmp.path().join("a.rs");
    std::fs::write(&work, "new").expect("write");
    let file = std::fs::File::open(&work).expect("open");
    let new = store.save_file("src/a.rs", &file).expect("save");
    let kept: Vec<_> = store
        .list(Some("src/a.rs"))
        .expect("list")
        .into_iter()
        .map(|r| r.sha256)
        .collect();
    let sha = |s: &str| hex::encode(Sha256::digest(s.as_bytes()));
    // The newest two (the new save is this session's original, so the earlier run's
    // original is an ordinary version now).
    assert!(new.original);
    assert_eq!(kept, vec![sha("old 2"), new.sha256.clone()]);
    for s in [0, 1] {
        let dir = root.join("files").join(layout::dir_name("src/a.rs"));
        let stem = layout::compact_ts(t(s));
        assert!(
            !dir.join(format!("{stem}.data")).exists()
                && !dir.join(format!("{stem}.json")).exists(),
            "the pruned layout-1 version {s} is gone"
        );
    }
    // A restore from a layout-1 version checks its hash and puts it back.
    let ws_dir = tmp.path().join("ws");
    std::fs::create_dir_all(ws_dir.join("src")).expect("mkdir");
    std::fs::write(ws_dir.join("src/a.rs"), "current").expect("write");
    let ws = Dir::open_ambient_dir(&ws_dir, ambient_authority()).expect("ws");
    let at = layout::rfc3339_ts(t(2));
    super::super::restore(&store, &ws, "src/a.rs", Some(&at), &mut |_, _| Ok(())).expect("restore");
    assert_eq!(
        std::fs::read_to_string(ws_dir.join("src/a.rs")).expect("read"),
        "old 2"
    );
    // The sweep removes layout-1 leftovers once old, and never the versions.
    let later = OffsetDateTime::now_utc() + time::Duration::hours(2);
    let report = store.prune_at(later).expect("prune");
    assert_eq!(report.leftovers_removed, 1);
    assert!(!orphan.exists());
    assert_eq!(store.list(Some("b.txt")).expect("list").len(), 1);
}

/// Paths that are awkward as file names: very long and deep (escaped to many times
/// NAME_MAX), with `@`, `.backup`, `%`, `~`, non-ASCII, or differing only in case, each
/// saved twice at one instant: every save succeeds, and each path lists and opens
/// exactly its own versions.
#[test]
fn awkward_paths_save_list_and_open_as_themselves() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let deep = format!("{}/ü.txt", vec!["é€".repeat(20); 40].join("/"));
    let paths = [
        deep.as_str(),
        "a@b.backup",
        "x@20231114T221320.000000001Z.backup",
        "a%40b.backup",
        "a/b",
        "a%2Fb",
        "~x",
        "README.md",
        "Readme.md",
    ];
    let at = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time");
    for p in paths {
        save_str(&store, p, &format!("1 {p}"), at);
        save_str(&store, p, &format!("2 {p}"), at);
    }
    for p in paths {
        let listed = store.list(Some(p)).expect("list");
        let own: Vec<_> = listed.iter().filter(|r| r.rel_path == p).collect();
        assert_eq!(own.len(), 2, "{p}: {listed:?}");
        let (latest, f) = store.open_version(p, None).expect("open");
        assert_eq!(latest.rel_path, p);
        assert_eq!(read_all(f), format!("2 {p}"));
        assert!(latest.id.len() < 255, "{}", latest.id);
    }
    assert_eq!(store.list(None).expect("list").len(), 2 * paths.len());
}

/// A save still being written is never swept, however old its file looks (a process
/// stopped or a laptop suspended mid-save for hours): the saver holds a lock on it.
/// Once the saver is gone without finishing, the file is a leftover again.
#[test]
fn the_sweep_never_removes_a_save_in_progress() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let (dir_name, shard) = (layout::dir_name("a.txt"), layout::shard("a.txt"));
    let dir = store.open_shard(&shard).expect("dir");
    let (ts, data) = store
        .reserve(&dir, &shard, &dir_name, OffsetDateTime::now_utc())
        .expect("reserve");
    std::io::Write::write_all(&mut &data, b"half of it").expect("write");
    let name = layout::packed_name(&dir_name, &layout::compact_ts(ts));
    let path = tmp.path().join("store/versions").join(&shard).join(name);
    let later = OffsetDateTime::now_utc() + time::Duration::hours(2);
    let report = store.prune_at(later).expect("prune");
    assert_eq!(report.leftovers_removed, 0);
    assert!(path.exists(), "a live save was swept");
    drop(data);
    let report = store.prune_at(later).expect("prune");
    assert_eq!(report.leftovers_removed, 1);
    assert!(!path.exists(), "an abandoned save is a leftover");
}

/// The byte budget over a mixed store: layout-1 versions count (their size, as they
/// record no data bytes), the oldest go first, and each path's newest version stays,
/// whichever layout holds it; the count of bytes kept is what is left.
#[test]
fn the_byte_budget_spans_both_layouts_and_keeps_each_newest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("store");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    std::fs::write(root.join("FORMAT"), "fsgate-backups 1\n").expect("format");
    let t = |s: i64| OffsetDateTime::from_unix_timestamp(1_700_000_100 + s).expect("time");
    for i in 0..3 {
        legacy_version(&root, "a.rs", &format!("a legacy {i}"), t(i)); // 10 bytes each
    }
    legacy_version(&root, "b.txt", "b legacy 0", t(0));
    let settings = BackupSettings {
        max_total_bytes: Some(30),
        ..Default::default()
    };
    let store = BackupStore::open(&root, &settings).expect("open");
    let work = tmp.path().join("c.txt");
    std::fs::write(&work, "c new 0123").expect("write");
    let file = std::fs::File::open(&work).expect("open");
    store
        .save_file("c.txt", &file)
        .expect("room made by pruning old versions");
    let left: Vec<_> = store
        .list(None)
        .expect("list")
        .into_iter()
        .map(|r| (r.rel_path, r.size))
        .collect();
    let (newest_a, _) = store.open_version("a.rs", None).expect("a.rs newest");
    assert_eq!(newest_a.sha256, hex::encode(Sha256::digest(b"a legacy 2")));
    // 50 bytes to fit in 30: the two oldest of a.rs go, never b.txt's only version
    // (older than both) nor a.rs's newest.
    assert_eq!(
        left,
        [
            ("a.rs".into(), 10),
            ("b.txt".into(), 10),
            ("c.txt".into(), 10)
        ]
    );
    let report = store.prune().expect("prune");
    assert_eq!((report.kept_versions, report.kept_bytes), (3, 30));
    assert!(report.removed.is_empty() && !report.over_budget);
}

/// Saves of opened files (the gateway's path: its fstat reused, the trailer written with
/// no truncate, a store on a filesystem that may not clone) read back exactly, version
/// after version, and `keep_versions` still holds (the session's original is kept too).
#[test]
fn saves_of_opened_files_read_back_and_keep_their_limit() {
    use std::os::unix::fs::MetadataExt;
    let settings = BackupSettings {
        keep_versions: Some(2),
        ..BackupSettings::default()
    };
    let (tmp, store) = open_store(&settings);
    let path = tmp.path().join("work.txt");
    for i in 0..4u8 {
        let text = vec![b'a' + i; 4096 + usize::from(i)];
        std::fs::write(&path, &text).expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let m = f.metadata().expect("stat");
        let saved = store
            .save_opened("work.txt", &f, (m.size(), m.blocks(), m.dev()))
            .expect("save");
        assert_eq!(saved.sha256, hex::encode(Sha256::digest(&text)));
        let (v, mut back) = store.open_version("work.txt", None).expect("latest");
        assert_eq!(v, saved);
        let mut got = Vec::new();
        back.read_to_end(&mut got).expect("read");
        assert_eq!(got, text);
    }
    // The session's original and the two newest.
    let kept = store.list(Some("work.txt")).expect("list");
    assert_eq!(kept.len(), 3);
    assert!(kept[0].original && kept[0].size == 4096, "{kept:?}");
    assert_eq!(kept[2].size, 4099);
}

/// Each shard is marked synced once its entry in `versions/` has been synced: on a new
/// store each new shard by its own sync (the listing is made once), and a shard removed
/// by hand is made and synced again.
#[test]
fn shards_are_synced_before_their_first_save_and_remade_if_removed() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let paths = ["a.txt", "b.txt", "c/d.txt", "e.txt"];
    for p in paths {
        save_str(&store, p, "x", OffsetDateTime::now_utc());
        let i = shard_index(&layout::shard(p));
        assert!(store.synced_shards[i].load(Ordering::Acquire), "{p}");
    }
    assert!(store.shards_listed.load(Ordering::Acquire));
    let shard = layout::shard("a.txt");
    let dir = tmp.path().join("store").join(VERSIONS_DIR).join(&shard);
    std::fs::remove_dir_all(&dir).expect("remove by hand");
    save_str(&store, "a.txt", "y", OffsetDateTime::now_utc());
    assert!(dir.is_dir());
    assert_eq!(store.list(Some("a.txt")).expect("list").len(), 1);
}

#[test]
fn a_version_opens_by_the_id_the_audit_log_names_whatever_its_path() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let short = store.save("dir/a b.txt", &mut &b"one"[..]).expect("save");
    let _later = store.save("dir/a b.txt", &mut &b"two"[..]).expect("save");
    // A path too long for a plain escaped name: its name is hashed.
    let long_path = format!("deep/{}.txt", "x".repeat(300));
    let long = store.save(&long_path, &mut &b"long"[..]).expect("save");
    assert!(long.id.contains('~'), "hashed name: {}", long.id);
    for (r, text) in [(&short, "one"), (&long, "long")] {
        let (found, f) = store.open_id(&r.id).expect("open by id");
        assert_eq!(&found, r);
        assert_eq!(read_all(f), text);
    }
    let gone = format!("{}x", short.id);
    assert!(matches!(
        store.open_id(&gone),
        Err(BackupError::NotFound { .. })
    ));
    assert!(matches!(
        store.open_id("no-slash"),
        Err(BackupError::NotFound { .. })
    ));
}

/// A store's layout is synced by a process's first backup, not when it is opened, also
/// when the store was made before (by a process that may have ended before any backup,
/// leaving `FORMAT` in the page cache only).
#[test]
fn a_store_makes_its_layout_durable_at_each_runs_first_backup() {
    let (tmp, store) = open_store(&BackupSettings::default());
    assert!(
        !store.layout_durable.load(Ordering::Acquire),
        "new: not synced yet"
    );
    store.save("a.txt", &mut &b"one"[..]).expect("save");
    assert!(
        store.layout_durable.load(Ordering::Acquire),
        "synced by the first save"
    );
    drop(store);
    let again =
        BackupStore::open(&tmp.path().join("store"), &BackupSettings::default()).expect("reopen");
    assert!(
        !again.layout_durable.load(Ordering::Acquire),
        "reopened: not synced yet"
    );
    again.save("a.txt", &mut &b"two"[..]).expect("save");
    assert!(
        again.layout_durable.load(Ordering::Acquire),
        "synced by its first save"
    );
}

/// What a crash can leave of a store before its first backup (`FORMAT` empty, zeros or
/// cut short, and at most an empty `versions/`) is made again; the same `FORMAT` beside
/// anything else is refused.
#[test]
fn a_store_torn_before_its_first_backup_is_made_again_and_nothing_else_is() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let torn: [(&str, &[u8], bool); 5] = [
        ("empty-format", b"", true),
        ("zero-format", &[0, 0, 0], true),
        ("short-format", b"fsgate-back", true),
        ("no-format", b"-", true),
        ("no-format-no-versions", b"-", false),
    ];
    for (name, format, versions) in torn {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).expect("mkdir");
        if format != b"-" {
            std::fs::write(dir.join("FORMAT"), format).expect("format");
        }
        if versions {
            std::fs::create_dir(dir.join("versions")).expect("versions");
        }
        let store = BackupStore::open(&dir, &BackupSettings::default()).expect(name);
        assert_eq!(
            std::fs::read_to_string(dir.join("FORMAT")).expect("format"),
            "fsgate-backups 2\n",
            "{name}"
        );
        store.save("a.txt", &mut &b"x"[..]).expect("save");
    }
    let long_zeros = [0u8; 300];
    let refused: [(&str, &[u8], &str); 4] = [
        ("long-zeros-format", &long_zeros, "unknown store format"),
        ("other-format", b"something else\n", "unknown store format"),
        ("empty-format-with-a-file", b"", "unknown store format"),
        ("no-format-with-a-shard", b"-", "not an fsgate backup store"),
    ];
    for (name, format, says) in refused {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(dir.join("versions")).expect("mkdir");
        if format != b"-" {
            std::fs::write(dir.join("FORMAT"), format).expect("format");
        }
        if name.ends_with("a-file") {
            std::fs::write(dir.join("notes.txt"), "mine").expect("file");
        } else if name.starts_with("long-zeros") {
            // Nothing else: only its length tells it from a torn FORMAT.
        } else {
            std::fs::create_dir(dir.join("versions/ab")).expect("shard");
        }
        let err = BackupStore::open(&dir, &BackupSettings::default()).expect_err(name);
        assert!(err.to_string().contains(says), "{name}: {err}");
    }
}

#[test]
fn the_first_backup_of_a_run_has_every_shard_made_and_synced_ahead() {
    let (tmp, store) = open_store(&BackupSettings::default());
    let versions = tmp.path().join("store").join(VERSIONS_DIR);
    let shards = || std::fs::read_dir(&versions).expect("list versions").count();
    // Opening a store makes none: a start costs no directory.
    assert_eq!(shards(), 0);
    save_str(&store, "a.txt", "one", OffsetDateTime::now_utc());
    // A helper makes the other 255 beside the backup; nothing waits for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !store
        .synced_shards
        .iter()
        .all(|s| s.load(Ordering::Acquire))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "shards not made ahead"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(shards(), 256);
    let names: Vec<String> = std::fs::read_dir(&versions)
        .expect("list versions")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| crate::layout::is_shard_name(n)),
        "{names:?}"
    );
    // The next backups, into any shard, are read back as before.
    let r = save_str(&store, "b/c.txt", "two", OffsetDateTime::now_utc());
    let (got, f) = store.open_version("b/c.txt", None).expect("latest");
    assert_eq!(got, r);
    assert_eq!(read_all(f), "two");
}
