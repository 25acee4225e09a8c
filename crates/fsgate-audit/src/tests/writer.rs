//! The writer: receipts, concurrency, reopening, rotation, checkpoints, heartbeat, sink.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::checkpoint::Checkpoint;
use crate::series;

#[test]
fn records_are_chained_and_the_log_verifies() {
    let (_d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Always));
    let mut last = 0;
    for i in 0..10 {
        let r = log.append(request(i)).unwrap();
        assert_eq!(r.seq, last + if i == 0 { 2 } else { 1 }, "start is seq 1");
        last = r.seq;
        assert_eq!(r.hash.len(), 64);
    }
    log.close().unwrap();
    log.close().unwrap();
    assert!(matches!(
        log.append(request(99)),
        Err(crate::AuditError::Closed)
    ));
    let recs = records(&path);
    assert_eq!(recs.len(), 12);
    assert_eq!(recs[0]["kind"], "start");
    assert_eq!(recs[0]["details"]["check"], "new");
    assert_eq!(recs[0]["log"].as_str().unwrap().len(), 32);
    assert_eq!(recs[0]["prev"], "0".repeat(64));
    assert_eq!(recs[1]["policy_sha256"], POLICY);
    assert_eq!(recs[11]["kind"], "stop");
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert_eq!(rep.records, 12);
    let cp = rep.checkpoint.expect("shutdown checkpoint");
    assert_eq!((cp.seq, cp.kind.as_str()), (12, "shutdown"));
}

#[test]
fn concurrent_appenders_get_unique_gapless_seqs() {
    for mode in [FsyncMode::Never, FsyncMode::Always] {
        let (_d, path) = temp_log();
        let log = Arc::new(open(&path, &settings(mode)));
        let per_thread = if mode == FsyncMode::Never { 300 } else { 40 };
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    (0..per_thread)
                        .map(|i| log.append(request(t * 1000 + i)).unwrap().seq)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let seqs: BTreeSet<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(seqs.len(), 8 * per_thread as usize);
        assert_eq!(*seqs.first().unwrap(), 2);
        assert_eq!(*seqs.last().unwrap(), 1 + 8 * per_thread);
        log.close().unwrap();
        assert_intact(&verify_dir(&path, &VerifyOptions::default()));
    }
}

#[test]
fn reopening_continues_the_same_chain() {
    let (_d, path) = temp_log();
    let s = settings(FsyncMode::Batch);
    let log = open(&path, &s);
    let id = log.log_id().to_owned();
    log.append(request(1)).unwrap();
    log.close().unwrap();
    drop(log);
    let log = open(&path, &s);
    assert_eq!(log.log_id(), id);
    assert_eq!(log.head().0, 4, "start, request, stop, start");
    log.append(request(2)).unwrap();
    log.close().unwrap();
    let recs = records(&path);
    assert_eq!(recs[3]["details"]["check"], "ok");
    assert!(
        recs[3].get("log").is_none(),
        "not the first record of the file"
    );
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}

#[test]
fn a_second_writer_is_refused() {
    let (_d, path) = temp_log();
    let _log = open(&path, &settings(FsyncMode::Never));
    let err = AuditLog::open(
        &path,
        &settings(FsyncMode::Never),
        POLICY,
        OpenOptions::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, crate::AuditError::Locked { .. }), "{err}");
}

#[test]
fn the_default_directory_gives_each_writer_a_chain_of_its_own() {
    let (_d, path) = temp_log();
    let dir = path.parent().expect("dir").to_path_buf();
    let s = settings(FsyncMode::Never);
    let first = crate::open_first_free(&dir, &s, POLICY, OpenOptions::default());
    let (p1, l1) = first.expect("first");
    let (p2, l2) =
        crate::open_first_free(&dir, &s, POLICY, OpenOptions::default()).expect("second");
    assert_eq!(
        (p1.clone(), p2),
        (dir.join("audit.jsonl"), dir.join("audit-2.jsonl"))
    );
    assert_ne!(l1.log_id(), l2.log_id());
    l1.close().expect("close");
    drop(l1);
    // The first chain is free again: the next writer continues it.
    let (p3, l3) = crate::open_first_free(&dir, &s, POLICY, OpenOptions::default()).expect("third");
    assert_eq!(p3, p1);
    l3.close().expect("close");
    l2.close().expect("close");
    let rep = verify_paths(&[dir], &VerifyOptions::default());
    assert_eq!(rep.series.len(), 2, "{rep:?}");
    rep.series.iter().for_each(assert_intact);
}

#[test]
fn rotation_keeps_one_chain_across_files() {
    let (_d, path) = temp_log();
    let s = AuditSettings {
        max_file_bytes: Some(3000),
        ..settings(FsyncMode::Always)
    };
    let log = open(&path, &s);
    for i in 0..60 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let all = series::discover(&[path.parent().unwrap().to_path_buf()]).unwrap();
    let files = &all[0].files;
    assert!(files.len() >= 5, "{files:?}");
    // Every file starts with a record that names the log; rotated names carry the seq.
    for f in files {
        let recs = records(f);
        assert!(recs[0].get("log").is_some(), "{}", f.display());
        if let (_, Some(seq)) = series::split_name(&series::file_name(f)) {
            assert_eq!(recs[0]["seq"], seq);
        }
        assert!(std::fs::metadata(f).unwrap().len() < 3000 + 600);
    }
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert_eq!(rep.records, 62);
    assert_eq!(rep.files.len(), files.len());

    // Reopening after rotation continues from the active file.
    let log = open(&path, &s);
    log.append(request(100)).unwrap();
    log.close().unwrap();
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}

#[test]
fn periodic_checkpoints_are_signed_and_copied_to_the_sink() {
    let (d, path) = temp_log();
    let key_path = d.path().join("audit.key");
    let pk = crate::keys::generate_key_file(&key_path).unwrap();
    let sink = d.path().join("sink").join("checkpoints.jsonl");
    std::fs::create_dir_all(sink.parent().unwrap()).unwrap();
    let s = AuditSettings {
        checkpoint_every: Some(5),
        signing_key: Some(key_path),
        checkpoint_sink: Some(sink.display().to_string()),
        ..settings(FsyncMode::Always)
    };
    let log = open(&path, &s);
    for i in 0..12 {
        log.append(request(i)).unwrap();
        let cp = Checkpoint::read_all(&path.with_file_name("audit.jsonl.checkpoint")).unwrap();
        let cp = cp[0].as_ref().unwrap();
        // start (1) + i+1 requests; a checkpoint at least every 5 records.
        assert!(
            cp.seq + 5 > 2 + i,
            "checkpoint seq {} after {} records",
            cp.seq,
            i + 2
        );
    }
    log.close().unwrap();
    let history = Checkpoint::read_all(&sink).unwrap();
    assert!(
        history.len() >= 4,
        "start, periodic x2+, shutdown: {history:?}"
    );
    let opts = VerifyOptions {
        pinned: Some(pk),
        checkpoints: vec![sink.clone()],
        trusted: None,
    };
    let rep = verify_dir(&path, &opts);
    assert_intact(&rep);
    assert_eq!(rep.checkpoint.as_ref().unwrap().signature, "pinned");
    assert_eq!(rep.checkpoint.as_ref().unwrap().seq, 14);
}

#[test]
fn an_idle_tail_gets_a_heartbeat_checkpoint() {
    let (_d, path) = temp_log();
    let s = AuditSettings {
        heartbeat_secs: Some(1),
        checkpoint_every: Some(0),
        ..settings(FsyncMode::Always)
    };
    let log = open(&path, &s);
    log.start().unwrap();
    for i in 0..3 {
        log.append(request(i)).unwrap();
    }
    let cp_path = path.with_file_name("audit.jsonl.checkpoint");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let cp = Checkpoint::read_all(&cp_path).unwrap().remove(0).unwrap();
        if cp.seq == 4 {
            assert_eq!(cp.kind, "heartbeat");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no heartbeat checkpoint"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    log.close().unwrap();
}

#[test]
fn batch_mode_syncs_within_the_interval() {
    let (_d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Batch));
    log.start().unwrap();
    log.append(request(1)).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // The heartbeat thread synced it: the io state has nothing unsynced left.
    assert_eq!(
        log.shared_unsynced_for(),
        Duration::ZERO,
        "batch data still unsynced"
    );
    log.close().unwrap();
}

impl AuditLog {
    /// Test access to how long data has waited for a sync.
    fn shared_unsynced_for(&self) -> Duration {
        self.io_unsynced_for()
    }
}

#[test]
fn the_log_is_shared_between_threads_and_a_reload_changes_the_policy_hash() {
    fn shared<T: Send + Sync>() {}
    shared::<AuditLog>();
    let (_d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Never));
    log.append(request(1)).unwrap();
    let new_policy = "ab".repeat(32);
    log.set_policy_sha256(&new_policy);
    let mut details = serde_json::Map::new();
    details.insert("policy_sha256".into(), serde_json::json!(new_policy));
    log.append(AuditEvent::lifecycle("reload", details))
        .unwrap();
    log.append(request(2)).unwrap();
    log.close().unwrap();
    let recs = records(&path);
    let policies: Vec<_> = recs.iter().map(|r| r["policy_sha256"].clone()).collect();
    assert_eq!(policies[1], POLICY);
    assert_eq!(policies[2], new_policy.as_str());
    assert_eq!(policies[3], new_policy.as_str());
    assert_eq!(recs[2]["kind"], "reload");
    assert!(
        recs[2].get("duration_us").is_none(),
        "lifecycle records carry no duration"
    );
}

/// `defer_start_checkpoint`: the start record is durable when `open` returns, no
/// checkpoint is written until `start`, which writes the `start` checkpoint on its own
/// thread; it precedes the shutdown one, and a record appended meanwhile is not lost.
#[test]
fn a_deferred_start_checkpoint_is_written_by_start_before_the_shutdown_one() {
    let (d, path) = temp_log();
    let sink = d.path().join("sink").join("checkpoints.jsonl");
    std::fs::create_dir_all(sink.parent().unwrap()).unwrap();
    let s = AuditSettings {
        checkpoint_sink: Some(sink.display().to_string()),
        ..settings(FsyncMode::Always)
    };
    let opts = OpenOptions {
        defer_start_checkpoint: true,
        ..OpenOptions::default()
    };
    let log = open_unlocked(&path, &s, opts).unwrap();
    let cp_path = path.with_file_name("audit.jsonl.checkpoint");
    assert!(!cp_path.exists(), "no checkpoint before start()");
    assert_eq!(records(&path)[0]["kind"], "start", "start record on disk");
    log.start().unwrap();
    log.append(request(1)).unwrap();
    log.close().unwrap();
    let kinds: Vec<(String, u64)> = Checkpoint::read_all(&sink)
        .unwrap()
        .into_iter()
        .map(|c| c.unwrap())
        .map(|c| (c.kind, c.seq))
        .collect();
    assert_eq!(
        kinds.first().map(|k| k.0.as_str()),
        Some("start"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last(),
        Some(&("shutdown".to_string(), 3)),
        "{kinds:?}"
    );
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}

/// With `defer_start_sync` the `start` record is in the file when `open` returns but
/// not synced; the next record appended (at `fsync = "always"`) syncs both at once.
/// Without it, the record is synced by `open`.
#[test]
fn a_deferred_start_record_is_written_at_open_and_synced_by_the_next_record() {
    let (_d, path) = temp_log();
    let log = open_as_gateway(&path);
    assert_eq!(records(&path)[0]["kind"], "start", "written to the file");
    std::thread::sleep(Duration::from_millis(5));
    assert!(log.shared_unsynced_for() > Duration::ZERO, "not synced yet");
    log.append(request(1)).unwrap();
    assert_eq!(
        log.shared_unsynced_for(),
        Duration::ZERO,
        "synced with the next record"
    );
    log.close().unwrap();
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));

    let (_d2, path2) = temp_log();
    let plain = OpenOptions {
        defer_start_checkpoint: true,
        ..OpenOptions::default()
    };
    let log2 = open_unlocked(&path2, &settings(FsyncMode::Always), plain).unwrap();
    assert_eq!(log2.shared_unsynced_for(), Duration::ZERO, "synced by open");
    log2.close().unwrap();

    // In the modes that do not sync each record, no later record would cover it at once:
    // the option leaves the `start` record synced at open.
    for mode in [FsyncMode::Batch, FsyncMode::Never] {
        let (_d3, path3) = temp_log();
        let log3 = open_unlocked(&path3, &settings(mode), GATEWAY_OPTIONS).unwrap();
        assert_eq!(
            log3.shared_unsynced_for(),
            Duration::ZERO,
            "{mode:?}: synced by open"
        );
        log3.close().unwrap();
    }
}

/// Without `start` (a log closed right after opening), the shutdown checkpoint alone
/// covers the log.
#[test]
fn a_deferred_start_checkpoint_never_started_leaves_the_shutdown_one() {
    let (_d, path) = temp_log();
    let opts = OpenOptions {
        defer_start_checkpoint: true,
        ..OpenOptions::default()
    };
    let log = open_unlocked(&path, &settings(FsyncMode::Always), opts).unwrap();
    log.close().unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    let cp = rep.checkpoint.expect("shutdown checkpoint");
    assert_eq!((cp.seq, cp.kind.as_str()), (2, "shutdown"));
}

/// An `intent` record announcing a write of `path`.
fn intent(path: &str) -> AuditEvent {
    AuditEvent {
        kind: "intent".into(),
        op: "write_text_file".into(),
        path: Some(path.into()),
        decision: "allow".into(),
        ..Default::default()
    }
}

/// Open intents are found from the newest start on, among many unrelated records: one
/// closed by its outcome is not reported, one left open is, also after another start
/// that carried it.
#[test]
fn open_intents_are_found_past_many_records_and_starts() {
    let (_d, path) = temp_log();
    {
        let log = open(&path, &settings(FsyncMode::Never));
        let closed = log.append(intent("closed.txt")).unwrap().seq;
        let mut outcome = request(1);
        outcome.args.insert("intent".into(), json!(closed));
        log.append(outcome).unwrap();
        let left = log.append(intent("left.txt")).unwrap().seq;
        for i in 0..500 {
            log.append(request(i)).unwrap();
        }
        // Dropped without close, as after kill -9.
        assert!(left > closed);
    }
    for _ in 0..2 {
        let log = open(&path, &settings(FsyncMode::Never));
        let open_paths: Vec<Option<String>> =
            log.open_intents().iter().map(|i| i.path.clone()).collect();
        assert_eq!(open_paths, vec![Some("left.txt".to_string())]);
        for i in 0..50 {
            log.append(request(i)).unwrap();
        }
    }
}

/// Waits (up to 5 s) until the log has nothing written and unsynced, and returns its
/// records then.
fn records_once_synced(log: &AuditLog, path: &std::path::Path) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while log.shared_unsynced_for() != Duration::ZERO || records(path).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the start record was not written and synced: {:?}",
            records(path)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    records(path)
}

/// `start_with`, as the gateway opens its log (the log's own `start` record written but
/// not synced): a thread of the log writes and syncs the record given, with nothing
/// appended after it; with the `start` checkpoint deferred (its thread does it first;
/// the checkpoint, 10 ms later, would sync it too) or not (a thread of its own, the only
/// one that can).
#[test]
fn start_with_writes_and_syncs_its_record_on_a_thread() {
    for defer_start_checkpoint in [true, false] {
        let (_d, path) = temp_log();
        let opts = OpenOptions {
            defer_start_checkpoint,
            defer_start_sync: true,
            ..OpenOptions::default()
        };
        let log = open_unlocked(&path, &settings(FsyncMode::Always), opts).unwrap();
        // (Without the deferred checkpoint, `open` syncs for its own checkpoint.)
        assert_eq!(
            log.shared_unsynced_for() > Duration::ZERO,
            defer_start_checkpoint,
            "the log's own start record waits for the next sync"
        );
        log.start_with(&AuditEvent::lifecycle("start", serde_json::Map::new()))
            .unwrap();
        let recs = records_once_synced(&log, &path);
        assert_eq!(recs.len(), 2, "{recs:?}");
        assert_eq!(
            (recs[1]["seq"].as_u64(), &recs[1]["kind"]),
            (Some(2), &"start".into())
        );
        log.close().unwrap();
        assert_intact(&verify_dir(&path, &VerifyOptions::default()));
    }
}

/// A record appended right after `start_with` is chained after its record, and its
/// receipt (the answer it stands for) comes only once both are on disk.
#[test]
fn a_record_appended_after_start_with_follows_its_record() {
    let (_d, path) = temp_log();
    let log = open_as_gateway(&path);
    log.start_with(&AuditEvent::lifecycle("start", serde_json::Map::new()))
        .unwrap();
    let r = log.append(request(1)).unwrap();
    assert_eq!(r.seq, 3);
    assert_eq!(log.shared_unsynced_for(), Duration::ZERO, "all synced");
    let kinds: Vec<_> = records(&path).iter().map(|r| r["kind"].clone()).collect();
    assert_eq!(kinds, ["start", "start", "request"]);
    log.close().unwrap();
}

/// After `start_with` the heartbeat runs: the thread that flushed the record starts it
/// (not the caller), with the `start` checkpoint deferred or not. An idle tail then gets
/// its heartbeat checkpoint. (The deferred `start` checkpoint covers what was appended
/// before it: a record appended after it is the tail left to the heartbeat.)
#[test]
fn start_with_starts_the_heartbeat() {
    for defer_start_checkpoint in [true, false] {
        let (_d, path) = temp_log();
        let s = AuditSettings {
            heartbeat_secs: Some(1),
            checkpoint_every: Some(0),
            ..settings(FsyncMode::Always)
        };
        let opts = OpenOptions {
            defer_start_checkpoint,
            defer_start_sync: true,
            ..OpenOptions::default()
        };
        let log = open_unlocked(&path, &s, opts).unwrap();
        log.start_with(&AuditEvent::lifecycle("start", serde_json::Map::new()))
            .unwrap();
        let mut last = log.append(request(1)).unwrap().seq;
        let cp_path = path.with_file_name("audit.jsonl.checkpoint");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let cp = Checkpoint::read_all(&cp_path)
                .ok()
                .and_then(|mut all| all.drain(..).next())
                .and_then(Result::ok);
            match cp {
                Some(cp) if cp.kind == "heartbeat" => {
                    assert_eq!(cp.seq, last, "the heartbeat checkpoint covers the tail");
                    break;
                }
                Some(cp) if cp.kind == "start" && cp.seq >= last => {
                    last = log.append(request(2)).unwrap().seq;
                }
                _ => {}
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no heartbeat checkpoint (defer_start_checkpoint = {defer_start_checkpoint})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        log.close().unwrap();
    }
}

/// The gateway's options: the `start` checkpoint and the `start` record's sync deferred.
const GATEWAY_OPTIONS: OpenOptions = OpenOptions {
    allow_broken_chain: false,
    defer_start_checkpoint: true,
    defer_start_sync: true,
};

/// Opens the log at `fsync = "always"` as the gateway does.
fn open_as_gateway(path: &std::path::Path) -> AuditLog {
    open_unlocked(path, &settings(FsyncMode::Always), GATEWAY_OPTIONS).unwrap()
}

/// After a long session (many rotated files, none with a later start), the next start
/// replays it from its start record holding one file at a time, not the whole session:
/// the intent left open in the oldest file is found, the one closed files later is not,
/// and `open` never holds more than a few files' worth of heap.
#[test]
fn a_start_after_a_long_session_holds_one_file_at_a_time() {
    let (_d, path) = temp_log();
    let file_bytes: u64 = 64 * 1024;
    let s = AuditSettings {
        max_file_bytes: Some(file_bytes),
        ..settings(FsyncMode::Never)
    };
    {
        let log = open(&path, &s);
        log.append(intent("left.txt")).unwrap();
        let closed = log.append(intent("closed.txt")).unwrap().seq;
        for i in 0..20_000 {
            log.append(request(i)).unwrap();
            if i == 10_000 {
                let mut outcome = request(i);
                outcome.args.insert("intent".into(), json!(closed));
                log.append(outcome).unwrap();
            }
        }
        // Dropped without close, as after kill -9.
    }
    let logs = path.parent().unwrap();
    let session_bytes: u64 = std::fs::read_dir(logs)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let files = std::fs::read_dir(logs).unwrap().count();
    assert!(files > 40, "the session spans many files: {files}");
    let (log, peak) = fsgate_peak_heap::measure(|| open(&path, &s));
    let peak = peak as u64;
    let open_paths: Vec<Option<String>> =
        log.open_intents().iter().map(|i| i.path.clone()).collect();
    assert_eq!(open_paths, vec![Some("left.txt".to_string())]);
    assert!(
        peak < 8 * file_bytes,
        "open held {peak} bytes at once for a session of {session_bytes} bytes in {files} files"
    );
}
