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

/// The baseline without group commit, outside fsgate's code: `threads` writers share
/// one file behind a mutex and each appends a record-sized line and `fdatasync`s it.
fn one_fsync_per_record(threads: u64, per_thread: u64) -> f64 {
    use std::io::Write;
    let dir = bench_dir();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("raw.jsonl"))
        .unwrap();
    let file = Arc::new(std::sync::Mutex::new(file));
    let line = vec![b'x'; 400];
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (file, line) = (Arc::clone(&file), line.clone());
            std::thread::spawn(move || {
                for _ in 0..per_thread {
                    let mut f = file.lock().unwrap();
                    f.write_all(&line).unwrap();
                    f.sync_data().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    (threads * per_thread) as f64 / t0.elapsed().as_secs_f64()
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn group_commit_vs_one_fsync_per_record() {
    // The disk's fsync latency drifts with whatever else runs: measure the two modes in
    // alternation, three times, and judge the median ratio.
    let mut ratios = Vec::new();
    for round in 1..=3 {
        let (seq_rate, seq_n) = throughput(FsyncMode::Always, 1, 500);
        let (grp_rate, grp_n) = throughput(FsyncMode::Always, 32, 250);
        let ratio = grp_rate / seq_rate;
        println!(
            "round {round}: fsync=always, 1 appender (one fdatasync per record): {seq_n} records, {seq_rate:.0} records/s; \
             32 concurrent appenders (group commit): {grp_n} records, {grp_rate:.0} records/s; speed-up {ratio:.1}x"
        );
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[1];
    println!("group commit speed-up, median of 3: {median:.1}x");
    let (never_rate, _) = throughput(FsyncMode::Never, 32, 2000);
    println!("fsync=never, 32 concurrent appenders: {never_rate:.0} records/s");
    // The same baseline outside fsgate's log code, at both concurrencies.
    let raw1 = one_fsync_per_record(1, 500);
    let raw32 = one_fsync_per_record(32, 16);
    println!(
        "plain file, one fdatasync per record: 1 writer {raw1:.0} records/s, 32 writers {raw32:.0} records/s"
    );
    assert!(median >= 10.0, "group commit only {median:.1}x faster");
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
    // FSGATE_BENCH_KEEP=1 leaves the log behind, to time `fsgate audit verify` on it.
    if std::env::var_os("FSGATE_BENCH_KEEP").is_some() {
        println!("kept: {}", dir.keep().display());
    }
}

#[test]
#[ignore = "measurement"]
fn line_check_parts() {
    use crate::record;
    let body = request(7).body(POLICY);
    let (line, _) = record::seal(5, "2026-01-01T00:00:00.000000Z", None, &body, &[3; 32]);
    let line = &line[..line.len() - 1];
    let n = 200_000;
    let mut scratch = Vec::new();
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(
            crate::line::check_line(std::hint::black_box(line), &mut scratch).unwrap(),
        );
    }
    println!(
        "check_line: {:.0} ns ({} bytes)",
        t.elapsed().as_nanos() as f64 / n as f64,
        line.len()
    );
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(
            serde_json::from_slice::<serde::de::IgnoredAny>(std::hint::black_box(line)).unwrap(),
        );
    }
    println!(
        "serde ignore: {:.0} ns",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(record::chain_hash(
            &[0; 32],
            std::hint::black_box(line),
            b"}",
        ));
    }
    println!("sha256: {:.0} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(std::str::from_utf8(std::hint::black_box(line)).unwrap());
    }
    println!("utf8: {:.0} ns", t.elapsed().as_nanos() as f64 / n as f64);
}

#[test]
#[ignore = "measurement"]
fn append_parts() {
    use crate::{canonical, record};
    let n = 200_000;
    let t = Instant::now();
    for i in 0..n {
        std::hint::black_box(request(i));
    }
    println!(
        "request(): {:.0} ns",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let ev = request(7);
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(ev.body(POLICY));
    }
    println!("body: {:.0} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(canonical::now_ts());
    }
    println!("now_ts: {:.0} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let body = ev.body(POLICY);
    let t = Instant::now();
    for i in 0..n {
        std::hint::black_box(record::seal(
            i,
            "2026-01-01T00:00:00.000000Z",
            None,
            &body,
            &[1; 32],
        ));
    }
    println!("seal: {:.0} ns", t.elapsed().as_nanos() as f64 / n as f64);
    let dir = bench_dir();
    let path = dir.path().join("audit.jsonl");
    let log = open(&path, &settings(FsyncMode::Never));
    let t = Instant::now();
    for i in 0..n {
        log.append(ev.clone()).unwrap();
        let _ = i;
    }
    println!(
        "append (never, 1 thread): {:.0} ns",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.path().join("raw"))
        .unwrap();
    let line = vec![b'x'; 580];
    let t = Instant::now();
    for _ in 0..n {
        use std::io::Write;
        (&f).write_all(&line).unwrap();
    }
    println!(
        "raw write(2) of 580 bytes: {:.0} ns",
        t.elapsed().as_nanos() as f64 / n as f64
    );
}

#[test]
#[ignore = "measurement"]
fn verify_breakdown() {
    let dir = bench_dir();
    let path = dir.path().join("audit.jsonl");
    let s = AuditSettings {
        checkpoint_every: Some(100_000),
        ..settings(FsyncMode::Never)
    };
    let log = open(&path, &s);
    for i in 0..200_000 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let bytes = std::fs::read(&path).unwrap();
        let t_read = t.elapsed();
        let t = Instant::now();
        let lines: Vec<(usize, &[u8])> = crate::line::lines(&bytes).collect();
        let t_lines = t.elapsed();
        let t = Instant::now();
        let mut scratch = Vec::new();
        let infos: Vec<_> = lines
            .iter()
            .map(|(_, l)| crate::line::check_line(l, &mut scratch))
            .collect();
        let t_check = t.elapsed();
        let t = Instant::now();
        let rep = verify_dir(&path, &VerifyOptions::default());
        let t_all = t.elapsed();
        println!(
            "read {:?} lines {:?} check(1 thread) {:?} full verify {:?} ({} infos, {} recs)",
            t_read,
            t_lines,
            t_check,
            t_all,
            infos.len(),
            rep.records
        );
    }
}
