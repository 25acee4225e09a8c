//! Tests of the retention passes (`retention.rs`, `by_shard.rs`).

use super::*;
use crate::BackupSettings;
use crate::store::tests::{open_store, save_str};

fn t(secs: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_700_000_000 + secs).expect("valid time")
}

#[test]
fn keep_versions_keeps_the_newest() {
    let settings = BackupSettings {
        keep_versions: Some(2),
        ..Default::default()
    };
    let (_tmp, store) = open_store(&settings);
    for i in 0..5 {
        save_str(&store, "a.txt", &format!("v{i}"), t(i));
    }
    save_str(&store, "b.txt", "only", t(0));
    let report = store.prune_at(t(100)).expect("prune");
    assert_eq!(report.removed.len(), 3);
    assert!(
        report
            .removed
            .iter()
            .all(|p| p.reason == PruneReason::KeepVersions)
    );
    assert!(report.removed.iter().all(|p| p.backup.rel_path == "a.txt"));
    let left: Vec<_> = store
        .list(Some("a.txt"))
        .expect("list")
        .into_iter()
        .map(|r| r.size)
        .collect();
    assert_eq!(left, vec![2, 2]);
    assert_eq!(report.kept_versions, 3);
    let (latest, _) = store.open_version("a.txt", None).expect("latest");
    assert_eq!(
        latest.sha256,
        hex::encode(fsgate_base::sha256::Sha256::digest(b"v4"))
    );
    // Idempotent.
    assert!(store.prune_at(t(100)).expect("prune").removed.is_empty());
}

/// Saves through `save_file` (as the gateway does) keep their file to
/// `keep_versions` at once, with no pass over the store, and leave other files alone.
#[test]
fn saves_keep_their_own_file_to_keep_versions() {
    let settings = BackupSettings {
        keep_versions: Some(2),
        ..Default::default()
    };
    let (tmp, store) = open_store(&settings);
    for i in 0..4 {
        save_str(&store, "b.txt", &format!("b{i}"), t(i));
    }
    let work = tmp.path().join("a.txt");
    for i in 0..6 {
        std::fs::write(&work, format!("a{i}")).expect("write");
        let f = std::fs::File::open(&work).expect("open");
        store.save_file("a.txt", &f).expect("save");
        let kept = store.list(Some("a.txt")).expect("list");
        assert!(kept.len() <= 3, "{i}: {kept:#?}");
    }
    let kept = store.list(Some("a.txt")).expect("list");
    let sha = |s: &str| hex::encode(fsgate_base::sha256::Sha256::digest(s.as_bytes()));
    let shas: Vec<_> = kept.iter().map(|r| r.sha256.clone()).collect();
    assert_eq!(
        shas,
        vec![sha("a0"), sha("a4"), sha("a5")],
        "original and newest two"
    );
    assert!(kept[0].original);
    assert_eq!(
        store.list(Some("b.txt")).expect("list").len(),
        4,
        "untouched"
    );
    let reports = store.take_prune_reports();
    let removed: Vec<_> = reports.iter().flat_map(|r| &r.removed).collect();
    assert_eq!(removed.len(), 3, "{reports:#?}");
    assert!(
        removed
            .iter()
            .all(|p| p.reason == PruneReason::KeepVersions)
    );
    assert!(removed.iter().all(|p| p.backup.rel_path == "a.txt"));
    // The byte count follows without a rescan: a full prune (which also prunes
    // b.txt, untouched by saves) finds the same total.
    let counted = store.lock_quota().committed;
    let report = store.prune_at(t(10)).expect("prune");
    assert!(report.removed.iter().all(|p| p.backup.rel_path == "b.txt"));
    assert_eq!(report.removed.len(), 2);
    let counted = counted.expect("saves count the store's bytes");
    assert_eq!(counted, report.kept_bytes + report.removed_bytes());
}

/// The whole-store pass runs every `every` saves while the store is small, then only
/// as often as the store's size in versions (or after `SWEEP_INTERVAL`).
#[test]
fn the_whole_store_pass_is_amortised_over_the_store_size() {
    let (_tmp, store) = open_store(&BackupSettings {
        max_age: Some("30d".into()),
        ..Default::default()
    });
    assert!(!store.sweep_due(99, 100));
    assert!(store.sweep_due(100, 100));
    assert!(!store.sweep_due(100, 100), "told once");
    store.sweep.lock().expect("lock").versions = 1000;
    assert!(!store.sweep_due(200, 100));
    assert!(!store.sweep_due(1099, 100));
    assert!(store.sweep_due(1100, 100));
    let long_ago = Instant::now().checked_sub(SWEEP_INTERVAL + Duration::from_secs(1));
    if let Some(at) = long_ago {
        store.sweep.lock().expect("lock").at = at;
        assert!(!store.sweep_due(1199, 100));
        assert!(store.sweep_due(1200, 100), "due by time");
    }
    // Without `max_age`, only time makes it due.
    let (_tmp2, plain) = open_store(&BackupSettings::default());
    assert!(!plain.sweep_due(100_000, 100));
    if let Some(at) = long_ago {
        plain.sweep.lock().expect("lock").at = at;
        assert!(!plain.sweep_due(99, 100));
        assert!(plain.sweep_due(100, 100), "due by time");
    }
    // A pass records the size it left.
    save_str(&store, "x", "1", t(0));
    store.prune_at(t(1)).expect("prune");
    assert_eq!(store.sweep.lock().expect("lock").versions, 1);
}

#[test]
fn max_age_removes_old_versions() {
    let settings = BackupSettings {
        max_age: Some("1h".into()),
        ..Default::default()
    };
    let (_tmp, store) = open_store(&settings);
    save_str(&store, "old.txt", "old", t(0));
    save_str(&store, "new.txt", "new", t(7000));
    let report = store.prune_at(t(7200)).expect("prune");
    assert_eq!(report.removed.len(), 1);
    assert_eq!(report.removed[0].reason, PruneReason::MaxAge);
    assert_eq!(report.removed[0].backup.rel_path, "old.txt");
    assert!(store.list(Some("old.txt")).expect("list").is_empty());
    assert_eq!(store.list(None).expect("list").len(), 1);
}

/// A version of `path` saved at `t(secs)`, holding `size` bytes.
fn version(path: &str, secs: i64, size: u64) -> Version {
    let at = t(secs);
    Version {
        dir: layout::dir_name(path),
        stem: layout::compact_ts(at),
        at,
        meta: layout::Sidecar {
            format: 2,
            path: path.into(),
            ts: at.to_string(),
            sha256: String::new(),
            size,
            stored: None,
            original: false,
            mode: None,
        },
        place: Place::Packed {
            shard: layout::shard(path),
        },
    }
}

/// Room for a save removes what it needs, then headroom, oldest first: until the
/// headroom fits, `HEADROOM_MAX_VERSIONS` more versions are gone, or a sixteenth of
/// the history is.
#[test]
fn headroom_is_freed_oldest_first_up_to_a_count_and_a_share() {
    let versions: Vec<Version> = (0..5000).map(|i| version("f", i, 10)).collect();
    let removed = |versions: &[Version], budget, need, headroom| {
        let rules = Retention {
            max_total_bytes: Some(budget),
            ..Retention::default()
        };
        let doomed = choose(versions, rules, t(6000), Room { need, headroom });
        assert!(doomed.iter().all(|(_, r)| *r == PruneReason::MaxTotalBytes));
        doomed.into_iter().map(|(i, _)| i).collect::<Vec<_>>()
    };
    let first = |n| (0..n).collect::<Vec<usize>>();
    assert_eq!(
        removed(&versions, 50_000, 10, 0),
        first(1),
        "only what is needed"
    );
    assert_eq!(
        removed(&versions, 50_000, 10, 100),
        first(11),
        "and 100 bytes"
    );
    assert_eq!(removed(&versions, 50_000, 10, 1000), first(101));
    let capped = removed(&versions, 50_000, 10, 1 << 40);
    assert_eq!(capped, first(1 + HEADROOM_MAX_VERSIONS));
    // The room needed is not capped, but the newest version is never removed.
    assert_eq!(removed(&versions, 50_000, 1 << 40, 0), first(4999));
    // Little history (990 bytes removable): headroom takes a sixteenth of it, 61.
    assert_eq!(removed(&versions[4900..], 1000, 10, 1000), first(8));
}

/// A store of `n` versions of 300 paths (a few per shard), a version every
/// second from `t(0)`, of 1 to 40 bytes, saved with no retention rules; then
/// opened with `settings`.
fn many_versions(settings: &BackupSettings, n: i64) -> (tempfile::TempDir, BackupStore) {
    let (tmp, store) = open_store(&BackupSettings::default());
    for i in 0..n {
        let k = (i * 7919) % 300;
        let path = format!("d{}/f{k}.txt", k % 7);
        let text = "x".repeat(1 + (i * 31 % 40) as usize);
        save_str(&store, &path, &text, t(i));
    }
    let store = BackupStore::open(store.location(), settings).expect("reopen");
    (tmp, store)
}

/// The pass shard by shard removes exactly what the pass over the whole store in
/// memory decides, by every rule at once: `keep_versions`, `max_age`, and the byte
/// budget with room and headroom.
#[test]
fn the_pass_by_shard_decides_as_the_whole_store_would() {
    let settings = BackupSettings {
        keep_versions: Some(3),
        max_age: Some("30m".into()),
        max_total_bytes: Some(9_000),
        ..Default::default()
    };
    let (_tmp, store) = many_versions(&settings, 2400);
    let now = t(2500);
    let room = Room {
        need: 100,
        headroom: 2_000,
    };
    let (versions, _) = store.scan_all(&|_| true).expect("scan");
    let mut want: Vec<(String, PruneReason)> = choose(&versions, store.retention, now, room)
        .into_iter()
        .map(|(i, r)| (versions[i].to_ref().id, r))
        .collect();
    let report = store.prune_with(now, room).expect("prune");
    let mut got: Vec<(String, PruneReason)> = report
        .removed
        .iter()
        .map(|p| (p.backup.id.clone(), p.reason))
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    for reason in [
        PruneReason::MaxAge,
        PruneReason::KeepVersions,
        PruneReason::MaxTotalBytes,
    ] {
        assert!(
            want.iter().any(|(_, r)| *r == reason),
            "{reason:?} has work here"
        );
    }
    assert_eq!(got, want);
    let left = store.list(None).expect("list");
    assert_eq!(report.kept_versions, left.len());
    assert_eq!(report.kept_bytes, left.iter().map(|v| v.size).sum::<u64>());
}

/// A pass that gives what it removes to a sink holds a thousand or so of them at a
/// time, not all it removed (the same pass kept in its report holds them all).
#[test]
fn a_pass_with_a_sink_holds_little_of_what_it_removed() {
    let settings = BackupSettings {
        keep_versions: Some(1),
        ..Default::default()
    };
    let (_tmp, store) = many_versions(&settings, 12_000);
    let stop = AtomicBool::new(false);
    let mut given = 0;
    let (report, peak) = fsgate_peak_heap::measure(|| {
        let counted = &mut |v: Vec<PrunedVersion>| given += v.len();
        store.prune_until(&stop, counted).expect("prune")
    });
    assert!(given > 11_000, "{given} removed");
    assert_eq!(report.given, given);
    assert!(report.removed.is_empty());
    // 11,700 removed versions take about 4 MB in memory; a thousand, a few hundred KB.
    assert!(peak < 1 << 20, "the pass held {peak} bytes at once");
}

/// A version another prune removed first is not reported again (that prune
/// reports it), though it is no longer counted as kept either.
#[test]
fn a_version_gone_before_its_removal_is_reported_once() {
    let settings = BackupSettings {
        keep_versions: Some(1),
        ..Default::default()
    };
    let (_tmp, store) = open_store(&settings);
    for i in 0..4 {
        save_str(&store, "a.txt", &format!("v{i}"), t(i));
    }
    let (versions, _) = store.scan_all(&|_| true).expect("scan");
    let doomed = choose(&versions, store.retention, t(100), Room::default());
    assert!(doomed.len() >= 2, "{doomed:?}");
    assert!(
        store
            .remove_version(&versions[doomed[0].0])
            .expect("remove")
    );
    let mut report = PruneReport::default();
    let mut pass = PassOpts::default();
    let n = doomed.len();
    let removing = (&mut pass, &mut report);
    store
        .remove_doomed(&versions, doomed, removing)
        .expect("remove");
    assert_eq!(report.removed.len(), n - 1);
    assert_eq!(report.kept_versions, versions.len() - n);
}

/// A pass that fails midway (here a shard it cannot open) has still given on
/// every version it removed before the failure.
#[test]
fn a_pass_that_fails_midway_gives_on_what_it_removed() {
    let settings = BackupSettings {
        keep_versions: Some(1),
        ..Default::default()
    };
    let (tmp, store) = many_versions(&settings, 3000);
    let versions = tmp.path().join("store").join("versions");
    let count = || walk_count(&versions);
    let before = count();
    // The last shard, empty here, becomes a link to itself: opening it fails.
    let last = versions.join("ff");
    std::fs::remove_dir(&last).expect("an empty last shard");
    std::os::unix::fs::symlink("ff", &last).expect("link");
    let mut given = 0;
    let stop = AtomicBool::new(false);
    let result = store.prune_until(&stop, &mut |v: Vec<PrunedVersion>| given += v.len());
    assert!(result.is_err(), "{result:?}");
    let removed = before - count();
    assert!(removed > 2_000, "{removed} removed");
    assert_eq!(given, removed);
}

/// Files in the shard directories under `versions`.
fn walk_count(versions: &std::path::Path) -> usize {
    let shards = std::fs::read_dir(versions).expect("versions").flatten();
    let dirs = shards.filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    dirs.map(|d| std::fs::read_dir(d.path()).expect("shard").count())
        .sum()
}

/// A version saved while a pass over the whole store runs, in a shard the pass has
/// read already, is in the store's count after it (the pass's own count misses it).
#[test]
fn a_save_made_during_a_pass_is_counted() {
    let settings = BackupSettings {
        keep_versions: Some(1),
        ..Default::default()
    };
    let (tmp, store) = many_versions(&settings, 600);
    let counted = store.stored_total().expect("count");
    store.lock_quota().committed = Some(counted);
    let late = tmp.path().join("late.txt");
    std::fs::write(&late, "made during the pass").expect("write");
    let late = std::fs::File::open(&late).expect("open");
    let stop = AtomicBool::new(false);
    let mut saved = false;
    // The sink is called after the last shard was read, before the pass counts.
    let during = &mut |_: Vec<PrunedVersion>| {
        if !saved {
            store.save_file("late.txt", &late).expect("save");
            saved = true;
        }
    };
    let report = store.prune_until(&stop, during).expect("prune");
    assert!(saved && report.given > 0);
    let on_disk = store.stored_total().expect("count");
    assert_eq!(store.lock_quota().committed, Some(on_disk));
}

/// The byte budget's pass, cut short, removes nothing (the oldest of the store are
/// not known yet); run to its end, the same pass removes the oldest.
#[test]
fn the_budgets_pass_cut_short_removes_nothing() {
    let settings = BackupSettings {
        max_total_bytes: Some(2_000),
        ..Default::default()
    };
    let (_tmp, store) = many_versions(&settings, 600);
    let total = store.stored_total().expect("count");
    let pass = |stop: bool| {
        let mut report = PruneReport {
            kept_bytes: total,
            ..Default::default()
        };
        let flag = AtomicBool::new(stop);
        let mut pass = PassOpts {
            stop: Some(&flag),
            ..PassOpts::default()
        };
        store
            .prune_oldest(2_000, &mut pass, &mut report)
            .expect("pass");
        report
    };
    let cut = pass(true);
    assert!(cut.stopped);
    assert!(cut.removed.is_empty());
    assert_eq!(store.stored_total().expect("count"), total);
    let whole = pass(false);
    assert!(!whole.stopped);
    assert!(!whole.removed.is_empty());
}

/// Two passes for room at once (two saves at the quota) leave the store's count as
/// the disk has it. The store runs them one after the other (its pass lock); without
/// that lock, a version the other pass removed must still not be counted as kept
/// (this test failed so, before that was fixed).
#[test]
fn passes_for_room_at_once_keep_the_count_true() {
    let settings = BackupSettings {
        max_total_bytes: Some(20_000),
        ..Default::default()
    };
    let (_tmp, store) = many_versions(&settings, 1500);
    let room = Room {
        need: 100,
        headroom: 2_000,
    };
    std::thread::scope(|s| {
        let a = s.spawn(|| store.prune_reserving(room).expect("prune"));
        let b = s.spawn(|| store.prune_reserving(room).expect("prune"));
        for pass in [a, b] {
            pass.join().expect("pass");
        }
    });
    let counted = store.lock_quota().committed;
    assert_eq!(counted, Some(store.stored_total().expect("count")));
    assert!(counted.is_some_and(|c| c + 100 <= 20_000), "{counted:?}");
}

/// A FIFO named as a version (put in the store by hand) neither holds a pass nor
/// counts as a version.
#[test]
fn a_fifo_in_a_shard_does_not_hold_the_pass() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    save_str(&store, "a.txt", "a", t(0));
    let shard = store
        .location()
        .join("versions")
        .join(layout::shard("b.txt"));
    std::fs::create_dir_all(&shard).expect("shard");
    let name = layout::packed_name(&layout::dir_name("b.txt"), "20231114T221320.000000000Z");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        shard.join(name),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    // Not scoped: a pass held for good must fail the test, not hang it.
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _keep = _tmp;
        let _ = done.send(store.prune().map(|r| r.kept_versions));
    });
    let kept = wait.recv_timeout(Duration::from_secs(10));
    assert_eq!(kept.expect("the pass ended").expect("prune"), 1);
}

/// The pass holds one shard's records at a time, not the store's.
#[test]
fn the_pass_holds_one_shard_at_a_time() {
    let settings = BackupSettings {
        keep_versions: Some(100),
        max_total_bytes: Some(1 << 30),
        ..Default::default()
    };
    let (_tmp, store) = many_versions(&settings, 2000);
    let (report, peak) = fsgate_peak_heap::measure(|| store.prune().expect("prune"));
    assert_eq!(report.kept_versions, 2000);
    assert!(report.removed.is_empty());
    // The store's records take about 1 MB in memory; a shard's, a few KB.
    assert!(peak < 128 * 1024, "the pass held {peak} bytes at once");
}

#[test]
fn byte_budget_removes_oldest_but_never_the_newest_version() {
    let settings = BackupSettings {
        max_total_bytes: Some(25),
        ..Default::default()
    };
    let (_tmp, store) = open_store(&settings);
    save_str(&store, "a", &"a".repeat(10), t(0)); // oldest: goes
    save_str(&store, "b", &"b".repeat(10), t(1)); // newest of b: stays
    save_str(&store, "a", &"A".repeat(10), t(2)); // newest of a: stays
    let report = store.prune_at(t(3)).expect("prune");
    assert_eq!(report.removed.len(), 1);
    assert_eq!(report.removed[0].reason, PruneReason::MaxTotalBytes);
    assert_eq!(
        report.removed[0].backup.ts,
        "2023-11-14T22:13:20.000000000Z"
    );
    assert_eq!(report.kept_bytes, 20);
    assert!(!report.over_budget);
    // A budget smaller than the newest versions is reported, not enforced on them.
    let tight = BackupSettings {
        max_total_bytes: Some(5),
        ..Default::default()
    };
    let store2 = BackupStore::open(store.location(), &tight).expect("reopen");
    let report = store2.prune_at(t(4)).expect("prune");
    assert!(report.removed.is_empty());
    assert!(report.over_budget);
}

/// Saves of new paths (each creating its directory) by 4 threads while `pruner`
/// prunes in a loop: every save must succeed.
fn saves_racing_prunes(store: &BackupStore, pruner: &BackupStore) {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                pruner.prune().expect("prune");
            }
        });
        let savers: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    for i in 0..300 {
                        let rel = format!("over/r{t}/o{i}.txt");
                        if let Err(e) = store.save(&rel, &mut &b"x"[..]) {
                            return Err(format!("{rel}: {e}"));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let results: Vec<_> = savers.into_iter().map(|h| h.join()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in results {
            r.expect("saver thread").expect("every save succeeds");
        }
    });
    assert_eq!(store.list(None).expect("list").len(), 1200);
}

#[test]
fn prunes_never_break_concurrent_saves() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    saves_racing_prunes(&store, &store);
}

/// Another process's prune cannot see our saves, so the save retries instead.
#[test]
fn another_stores_prunes_never_break_saves() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    let other =
        BackupStore::open(store.location(), &BackupSettings::default()).expect("second handle");
    saves_racing_prunes(&store, &other);
}

#[test]
fn leftovers_are_removed_only_when_old() {
    let (_tmp, store) = open_store(&BackupSettings::default());
    save_str(&store, "x", "content", t(0));
    let shard = store
        .shard_dir(&layout::shard("x"))
        .expect("open")
        .expect("the shard exists");
    // A save that died before its trailer was complete.
    let torn = layout::packed_name(&layout::dir_name("x"), "20000101T000000.000000000Z");
    shard.write(&torn, b"orphan").expect("write orphan");
    assert_eq!(store.list(None).expect("list").len(), 1, "not a version");
    let report = store.prune().expect("prune");
    assert_eq!(report.leftovers_removed, 0, "fresh leftovers are kept");
    let later = OffsetDateTime::now_utc() + time::Duration::hours(2);
    let report = store.prune_at(later).expect("prune");
    assert_eq!(report.leftovers_removed, 1);
    assert!(shard.metadata(&torn).is_err(), "leftover removed");
    assert_eq!(
        store.list(None).expect("list").len(),
        1,
        "the real version stays"
    );
}
