//! Audit append: one request record (as a 4 KiB read writes it) with `fsync = "never"`
//! and `"always"`, and records from 32 threads at once, where `"always"` shares one
//! `fdatasync` among every record queued meanwhile (group commit). The logs lie in the
//! system temp directory: on this machine a real disk, not a tmpfs.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsgate_audit::{AuditEvent, AuditLog, AuditSettings, FsyncMode, OpenOptions};

const THREADS: u64 = 32;

fn open(dir: &std::path::Path, mode: FsyncMode) -> AuditLog {
    let settings = AuditSettings {
        fsync: mode,
        ..AuditSettings::default()
    };
    let log = AuditLog::open(
        &dir.join("audit.jsonl"),
        &settings,
        &"0".repeat(64),
        OpenOptions::default(),
    )
    .expect("audit log");
    log.start().expect("heartbeat");
    log
}

/// A record like the one a 4 KiB read leaves.
fn record() -> AuditEvent {
    let mut args = serde_json::Map::new();
    args.insert("line".into(), serde_json::Value::Null);
    AuditEvent {
        session: "bench".into(),
        transport: "acp".into(),
        peer: "pid=1,uid=1000".into(),
        op: "read_text_file".into(),
        path: Some("src/gateway/mod.rs".into()),
        args,
        decision: "allow".into(),
        rule: Some("workspace-read".into()),
        reason: Some("the workspace is readable".into()),
        outcome: "ok".into(),
        bytes: Some(4096),
        sha256: Some("ab".repeat(32)),
        duration_us: 42,
        ..AuditEvent::default()
    }
}

/// `iters` rounds in which each of 32 threads appends one record; the time of all.
fn from_threads(log: &Arc<AuditLog>, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(THREADS as usize + 1));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (log, start) = (Arc::clone(log), Arc::clone(&start));
            std::thread::spawn(move || {
                let ev = record();
                start.wait();
                for _ in 0..iters {
                    log.append_ref(&ev).expect("append");
                }
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    for h in handles {
        h.join().expect("appender thread");
    }
    t0.elapsed()
}

fn append(c: &mut Criterion) {
    let mut g = c.benchmark_group("audit_append");
    for (name, mode) in [("never", FsyncMode::Never), ("always", FsyncMode::Always)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = Arc::new(open(dir.path(), mode));
        let ev = record();
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("one/{name}"), |b| {
            b.iter(|| log.append_ref(black_box(&ev)).expect("append"))
        });
        // One iteration: 32 records, one from each thread.
        g.throughput(Throughput::Elements(THREADS));
        g.bench_function(format!("threads32/{name}"), |b| {
            b.iter_custom(|iters| from_threads(&log, iters))
        });
        log.close().expect("close");
    }
    g.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
