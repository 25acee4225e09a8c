//! The default policy's secret-content rules (`ContentScanner::scan`, as the gateway
//! runs it on every read and write): 4 KiB of clean source text, the same with one
//! AWS access key id in the middle, and 1 MiB of clean text.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// Shared with the read benchmarks; this one uses only the text.
#[allow(dead_code)]
mod common;
use common::clean_text;
use fsgate_base::path::RelPath;
use fsgate_policy::Policy;

fn scan(c: &mut Criterion) {
    let pol = Policy::builtin_default().expect("default policy");
    let scanner = pol
        .content_scanner()
        .expect("the default policy scans content");
    let path = RelPath::parse_rooted("src/notes.rs").expect("valid path");
    let clean = clean_text(4096);
    // Spelled in two parts so that this file holds no key itself.
    let key = format!("let id = \"{}{}\";\n", "AKIA", "UJZDEGXDNCF32EPF");
    let mut secret = clean[..2048].to_string();
    secret.push_str(&key);
    secret.push_str(&clean[2048 + key.len()..]);
    let big = clean_text(1 << 20);
    let cases = [
        ("clean_4k", clean.as_bytes(), None),
        (
            "secret_4k",
            secret.as_bytes(),
            Some("content:aws-access-key-id"),
        ),
        ("clean_1m", big.as_bytes(), None),
    ];
    let mut g = c.benchmark_group("content_scan");
    for (name, text, expect) in cases {
        let hit = scanner.scan(&path, text).map(|h| h.rule_id);
        assert_eq!(hit.as_deref(), expect, "{name}");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(name, |b| b.iter(|| scanner.scan(&path, black_box(text))));
    }
    g.finish();
}

criterion_group!(benches, scan);
criterion_main!(benches);
