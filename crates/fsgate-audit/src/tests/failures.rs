//! Fail closed: a write or sync that fails refuses the record, leaves no trace in the
//! chain, and the log recovers by itself once the disk accepts writes again.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use super::*;
use crate::{AuditError, Fault};

#[test]
fn a_failed_write_is_refused_and_leaves_no_trace() {
    for fault in [Fault::Write, Fault::Sync] {
        let (_d, path) = temp_log();
        let log = open(&path, &settings(FsyncMode::Always));
        let ok1 = log.append(request(1)).unwrap();
        let len_before = std::fs::metadata(&path).unwrap().len();
        log.inject_faults(fault, 2);
        assert!(matches!(
            log.append(request(2)),
            Err(AuditError::Write { .. })
        ));
        assert!(log.preflight().is_err(), "requests must be refused now");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len_before,
            "the half-written record was cut back"
        );
        assert!(log.append(request(3)).is_err());
        // The disk is back: the next append succeeds with the next seq.
        let ok2 = log.append(request(4)).unwrap();
        assert_eq!(ok2.seq, ok1.seq + 1, "no gap in seq");
        assert!(log.preflight().is_ok());
        log.close().unwrap();
        let rep = verify_dir(&path, &VerifyOptions::default());
        assert_intact(&rep);
        let paths: Vec<_> = records(&path)
            .iter()
            .filter_map(|r| r["path"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(paths, ["src/file_1.rs", "src/file_4.rs"], "{fault:?}");
    }
}

#[test]
fn concurrent_appenders_during_failures_see_a_consistent_log() {
    let (_d, path) = temp_log();
    let log = Arc::new(open(&path, &settings(FsyncMode::Always)));
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for i in 0..40 {
                    if t == 0 && i % 10 == 5 {
                        log.inject_faults(Fault::Write, 1);
                    }
                    let ev = request(t * 100 + i);
                    let path = ev.path.clone().unwrap();
                    got.push((path, log.append(ev)));
                }
                got
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    log.close().unwrap();
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    assert!(
        failed > 0,
        "the injected faults must have refused something"
    );
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    // Exactly the acknowledged records are in the log, with the hash they were given.
    let logged: BTreeMap<u64, (String, String)> = records(&path)
        .iter()
        .filter(|r| r["kind"] == "request")
        .map(|r| {
            (
                r["seq"].as_u64().unwrap(),
                (
                    r["path"].as_str().unwrap().to_owned(),
                    r["hash"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    let acked: BTreeMap<u64, (String, String)> = results
        .iter()
        .filter_map(|(p, r)| {
            r.as_ref()
                .ok()
                .map(|r| (r.seq, (p.clone(), r.hash.clone())))
        })
        .collect();
    assert_eq!(logged, acked);
}

/// A real full disk: a 1 MiB tmpfs. Needs root (mount); skipped, saying so, without it.
#[test]
fn a_full_disk_refuses_requests_until_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !mounted {
        eprintln!(
            "SKIPPED a_full_disk_refuses_requests_until_space_returns: cannot mount a tmpfs (needs root)"
        );
        return;
    }
    let result = std::panic::catch_unwind(|| full_disk_scenario(&mnt));
    let _ = Command::new("umount").arg(&mnt).status();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

fn full_disk_scenario(mnt: &Path) {
    let path = mnt.join("audit.jsonl");
    let log = open(&path, &settings(FsyncMode::Always));
    log.append(request(0)).unwrap();
    assert!(log.preflight().is_ok());
    // Fill the disk to the last byte.
    let filler = mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    // The reserve keeps appends working for a while; preflight starts refusing first.
    let mut refused_at = None;
    let mut failed_at = None;
    for i in 1..5000u64 {
        if refused_at.is_none() && log.preflight().is_err() {
            refused_at = Some(i);
        }
        if log.append(request(i)).is_err() {
            failed_at = Some(i);
            break;
        }
    }
    let refused_at = refused_at.expect("preflight never noticed the full disk");
    let failed_at = failed_at.expect("appends never failed on a full disk");
    assert!(refused_at <= failed_at, "{refused_at} > {failed_at}");
    assert!(log.preflight().is_err());
    // Space returns: the log heals on the next append.
    std::fs::remove_file(&filler).unwrap();
    let r = log.append(request(9999)).unwrap();
    assert!(
        log.preflight().is_ok(),
        "still refusing after space returned"
    );
    log.close().unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert!(rep.last_seq.unwrap() > r.seq);
    eprintln!(
        "full disk: preflight refused from request {refused_at}, appends failed from {failed_at}, healed at seq {}",
        r.seq
    );
}

/// A checkpoint that cannot be written (here its temp file is blocked by a directory,
/// which even root cannot open for writing) makes preflight refuse changes until one is
/// written again, which the next change tries at once.
#[test]
fn a_failing_checkpoint_refuses_changes_until_it_succeeds() {
    let (_d, path, log, blocker) = log_whose_checkpoint_failed();
    assert!(
        matches!(log.preflight(), Err(AuditError::Checkpoint { .. })),
        "{:?}",
        log.preflight()
    );
    std::fs::remove_dir(&blocker).unwrap();
    // No record needed: the next change tries the checkpoint again at once.
    assert!(log.preflight().is_ok(), "{:?}", log.preflight());
    log.append(request(3)).unwrap();
    assert!(log.preflight().is_ok());
    log.close().unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert_eq!(rep.checkpoint.unwrap().seq, rep.last_seq.unwrap());
}

/// A checkpoint that failed, followed by a write that failed too: once both causes are
/// gone, the next change's retry writes the checkpoint at once, although the log's last
/// write failed (the change's own append then tries the log again). Neither waits for
/// the other: before, the retry skipped the checkpoint while the last write had failed,
/// and only a record that needs no checkpoint could end that.
#[test]
fn a_failed_checkpoint_and_a_failed_write_are_both_retried_by_the_next_change() {
    let (_d, path, log, blocker) = log_whose_checkpoint_failed();
    assert!(matches!(
        log.ready_for_change(),
        Err(AuditError::Checkpoint { .. })
    ));
    log.inject_faults(Fault::Write, 1);
    assert!(matches!(
        log.append(request(3)),
        Err(AuditError::Write { .. })
    ));
    std::fs::remove_dir(&blocker).unwrap();
    assert!(
        log.ready_for_change().is_ok(),
        "{:?}",
        log.ready_for_change()
    );
    log.append(request(4)).unwrap();
    log.close().unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert_eq!(rep.checkpoint.unwrap().seq, rep.last_seq.unwrap());
}

/// A log (a checkpoint every 2 records) whose checkpoint failed: its temp file is
/// blocked by a directory (which even root cannot open for writing), returned to be
/// removed.
fn log_whose_checkpoint_failed() -> (tempfile::TempDir, PathBuf, AuditLog, PathBuf) {
    let (d, path) = temp_log();
    let s = AuditSettings {
        checkpoint_every: Some(2),
        ..settings(FsyncMode::Always)
    };
    let log = open(&path, &s);
    let blocker = path.with_file_name("audit.jsonl.checkpoint.tmp");
    std::fs::create_dir(&blocker).unwrap();
    for i in 0..3 {
        log.append(request(i)).unwrap();
    }
    (d, path, log, blocker)
}

/// Entries noted durable go into the next record; when that record fails (or the log
/// is closed), they are named by the next one that reaches the log instead.
#[test]
fn durable_entries_named_by_a_failed_record_are_named_again() {
    let (_d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Always));
    log.entry_durable(7);
    log.inject_faults(Fault::Write, 1);
    assert!(log.append(request(1)).is_err());
    log.entry_durable(9);
    log.append(request(2)).unwrap();
    log.append(request(3)).unwrap();
    log.entry_durable(11);
    log.close().unwrap();
    assert!(matches!(log.append(request(4)), Err(AuditError::Closed)));
    let named: Vec<(u64, serde_json::Value)> = records(&path)
        .iter()
        .filter_map(|r| {
            let list = r["details"].get(crate::ENTRIES_DURABLE)?;
            Some((r["seq"].as_u64()?, list.clone()))
        })
        .collect();
    let lists: Vec<&serde_json::Value> = named.iter().map(|(_, l)| l).collect();
    assert_eq!(
        lists,
        [&serde_json::json!([7, 9]), &serde_json::json!([11])]
    );
}

/// A leader whose turn panics mid-write (a defect's stand-in) steps down: the appenders
/// waiting on its batch are answered (failed) instead of waiting for ever, and the log
/// takes no more records (what the turn wrote is not known: a later record could reuse
/// a seq); closing still works. Reopened, recovery settles the file and the log goes on
/// intact. Before, `leader` stayed set and every later append hung.
#[test]
fn a_leader_that_panics_steps_down_and_the_log_fails_closed() {
    let (_d, path) = temp_log();
    let log = Arc::new(open(&path, &settings(FsyncMode::Always)));
    log.append(request(1)).unwrap();
    log.inject_faults(Fault::Panic, 1);
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..4u64 {
        let (log, tx) = (Arc::clone(&log), tx.clone());
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                log.append(request(10 + t))
            }));
            let _ = tx.send(r.map(|r| r.is_ok()).unwrap_or(false));
        });
    }
    let wait = std::time::Duration::from_secs(20);
    let answered: Vec<bool> = (0..4).map_while(|_| rx.recv_timeout(wait).ok()).collect();
    assert_eq!(
        answered.len(),
        4,
        "an appender hung after the leader panicked"
    );
    assert!(
        answered.contains(&false),
        "the panicking write was answered Ok"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let log2 = Arc::clone(&log);
    std::thread::spawn(move || {
        let answered = (
            log2.append(request(20)).is_ok(),
            log2.ready_for_change().is_ok(),
        );
        let _ = tx.send(answered);
    });
    let (next, ready) = rx.recv_timeout(wait).expect("the next append hung");
    assert!(!next, "a record was taken after the turn unwound");
    assert!(!ready, "changes must be refused");
    let _ = log.close();
    drop(log);
    let log = open(&path, &settings(FsyncMode::Always));
    log.append(request(30)).unwrap();
    log.close().unwrap();
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}
