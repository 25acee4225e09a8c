//! Integration tests for `fs/write_text_file`: result shape, create-on-write, parents, atomic replace.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::common::{Gate, INVALID_PARAMS, assert_code};

#[test]
fn write_creates_missing_file_and_returns_null() {
    let g = Gate::start();
    let r = g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("new.txt"), "content": "hello\n"}),
    );
    assert_eq!(r, Value::Null);
    assert_eq!(g.get("new.txt").as_deref(), Some(&b"hello\n"[..]));
}

#[test]
fn write_creates_parent_directories() {
    let g = Gate::start();
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("a/b/c/deep.rs"), "content": "// deep"}),
    );
    assert_eq!(g.get("a/b/c/deep.rs").as_deref(), Some(&b"// deep"[..]));
}

#[test]
fn write_replaces_existing_content_entirely() {
    let g = Gate::start();
    g.put("f.txt", "a much longer original content\nwith two lines\n");
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("f.txt"), "content": "short"}),
    );
    assert_eq!(g.get("f.txt").as_deref(), Some(&b"short"[..]));
}

#[test]
fn write_empty_and_unicode_content() {
    let g = Gate::start();
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("empty.txt"), "content": ""}),
    );
    assert_eq!(g.get("empty.txt").as_deref(), Some(&b""[..]));
    let text = "naïve — 日本語 — \u{1F600}\r\ntabs\tand \"quotes\"\n";
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("u.txt"), "content": text}),
    );
    assert_eq!(g.get("u.txt").as_deref(), Some(text.as_bytes()));
}

#[test]
fn write_leaves_no_temp_files_behind() {
    let g = Gate::start();
    g.put("dir/keep.txt", "k");
    for i in 0..5 {
        g.ok(
            "fs/write_text_file",
            json!({"path": g.abs("dir/f.txt"), "content": format!("v{i}")}),
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(g.path("dir"))
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["f.txt", "keep.txt"],
        "atomic replace must clean up its temp files"
    );
}

#[test]
fn write_missing_content_is_invalid_params() {
    let g = Gate::start();
    assert_code(
        g.call("fs/write_text_file", json!({"path": g.abs("x.txt")})),
        INVALID_PARAMS,
    );
    assert!(!g.exists("x.txt"));
    assert_code(
        g.call("fs/write_text_file", json!({"content": "x"})),
        INVALID_PARAMS,
    );
}

#[test]
fn write_relative_path_is_invalid_params() {
    let g = Gate::start();
    assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": "rel.txt", "content": "x"}),
        ),
        INVALID_PARAMS,
    );
    assert!(!g.exists("rel.txt"));
}

#[test]
fn write_replaces_atomically_under_concurrent_reads() {
    let g = Gate::start();
    // Different lengths and fill bytes, so a torn or truncated file can never look like either.
    let a = "a".repeat(1 << 20);
    let b = "b".repeat(3 << 19);
    g.put("big.txt", &a);
    let path = g.path("big.txt");
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let (a2, b2) = (a.clone(), b.clone());
    let reader = std::thread::spawn(move || {
        let (mut reads, mut bad) = (0u64, Vec::new());
        while !stop2.load(Ordering::Relaxed) {
            match std::fs::read(&path) {
                Ok(bytes) if bytes == a2.as_bytes() || bytes == b2.as_bytes() => {}
                Ok(bytes) => bad.push(format!("torn read of {} bytes", bytes.len())),
                Err(e) => bad.push(format!("read failed: {e}")),
            }
            reads += 1;
        }
        (reads, bad)
    });
    for i in 0..30 {
        let content = if i % 2 == 0 { &b } else { &a };
        g.ok(
            "fs/write_text_file",
            json!({"path": g.abs("big.txt"), "content": content}),
        );
    }
    stop.store(true, Ordering::Relaxed);
    let (reads, bad) = reader.join().expect("reader thread");
    assert!(
        bad.is_empty(),
        "reader saw {} bad states in {reads} reads, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    assert!(
        reads >= 30,
        "reader only managed {reads} reads; the test did not exercise concurrency"
    );
    assert_eq!(g.get("big.txt").as_deref(), Some(a.as_bytes()));
}
