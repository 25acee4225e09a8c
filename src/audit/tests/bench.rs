//! Measurements (ignored by default; run with --release, see audit/FORMAT.md "Performance"):
//!
//! ```text
//! cargo test --release --lib audit::tests::bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! The directory for the logs is `FSGATE_BENCH_DIR` (default: the system temp dir), so the
//! fsync figures are those of a real disk, not of a tmpfs.

use std::sync::Arc;
use std::time::Instant;

use super::*;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("FSGATE_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// Records per second with `threads` appenders, `per_thread` appends each.
fn throughput(mode: FsyncMode, threads: u64, per_thread: u64) -> (f64, u64) {
    let dir = bench_dir();
    let path = dir.path().join("audit.jsonl");
    let log = Arc::new(open(&path, &settings(mode)));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    log.append(request(t * 1_000_000 + i)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    log.close().unwrap();
    let n = threads * per_thread;
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
    (n as f64 / secs, n)
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn group_commit_vs_one_fsync_per_record() {
    let (seq_rate, seq_n) = throughput(FsyncMode::Always, 1, 1000);
    let (grp_rate, grp_n) = throughput(FsyncMode::Always, 32, 500);
    let ratio = grp_rate / seq_rate;
    println!(
        "fsync=always, 1 appender (one fdatasync per record): {seq_n} records, {seq_rate:.0} records/s"
    );
    println!(
        "fsync=always, 32 concurrent appenders (group commit): {grp_n} records, {grp_rate:.0} records/s"
    );
    println!("group commit speed-up: {ratio:.1}x");
    let (never_rate, _) = throughput(FsyncMode::Never, 32, 2000);
    println!("fsync=never, 32 concurrent appenders: {never_rate:.0} records/s");
    assert!(ratio >= 10.0, "group commit only {ratio:.1}x faster");
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn verify_speed() {
    let dir = bench_dir();
    let path = dir.path().join("audit.jsonl");
    let n: u64 = std::env::var("FSGATE_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let s = AuditSettings {
        checkpoint_every: Some(10_000),
        max_file_bytes: None, // the default, 64 MiB: a rotated series
        ..settings(FsyncMode::Never)
    };
    let t0 = Instant::now();
    let log = open(&path, &s);
    for i in 0..n {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    let write_secs = t0.elapsed().as_secs_f64();
    let bytes: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // Warm the page cache once, then take the best of three.
    let _ = verify_dir(&path, &VerifyOptions::default());
    let mut best = f64::MAX;
    let mut rep = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = verify_dir(&path, &VerifyOptions::default());
        best = best.min(t.elapsed().as_secs_f64());
        rep = Some(r);
    }
    let rep = rep.unwrap();
    assert_intact(&rep);
    let rate = rep.records as f64 / best;
    println!(
        "wrote {} records ({:.1} MiB, {} files) in {write_secs:.2} s single-threaded with fsync=never",
        rep.records,
        bytes as f64 / 1048576.0,
        rep.files.len()
    );
    println!(
        "verify: {} records in {best:.3} s = {rate:.0} records/s ({:.0} MiB/s) on {} threads",
        rep.records,
        bytes as f64 / 1048576.0 / best,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    assert!(rate >= 500_000.0, "verify too slow: {rate:.0} records/s");
}
