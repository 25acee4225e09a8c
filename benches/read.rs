//! One 4 KiB `fs/read_text_file` through `Gateway::serve` (default policy; audit log
//! absent, `fsync = "never"`, `fsync = "always"`) against the raw syscalls that read the
//! same file (`std::fs::read`: open, statx, read, read, close). The ratio is the
//! gateway's cost per read.

mod common;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fsgate_audit::FsyncMode;

fn read(c: &mut Criterion) {
    let (ws, file) = common::workspace();
    let path = file.to_str().expect("utf-8 temp path").to_string();
    let ctx = common::ctx();
    let mut g = c.benchmark_group("read_4k");
    g.bench_function("raw_std_fs_read", |b| {
        b.iter(|| {
            let bytes = std::fs::read(black_box(&file)).expect("raw read");
            assert_eq!(bytes.len(), 4096);
            bytes
        })
    });
    for (name, mode) in [
        ("gateway_no_audit", None),
        ("gateway_audit_never", Some(FsyncMode::Never)),
        ("gateway_audit_always", Some(FsyncMode::Always)),
    ] {
        let state = tempfile::tempdir().expect("state dir");
        let gw = common::gateway(ws.path(), state.path(), mode);
        g.bench_function(name, |b| {
            b.iter(|| common::read_once(&gw, &ctx, black_box(&path), 4096))
        });
    }
    g.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
