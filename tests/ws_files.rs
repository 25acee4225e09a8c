//! The files channel's request types, errors, binary round trip and message limit,
//! driven by a real Python `websockets` client (tests/peers/ws/files_channel.py).

use std::path::Path;

use crate::ws_harness::{WsGate, policy, python_or_skip};

const BLOB_LEN: usize = 1024;

fn blob() -> Vec<u8> {
    (0..BLOB_LEN).map(|i| (i % 256) as u8).collect()
}

fn fixture(root: &Path) {
    std::fs::write(root.join("hello.txt"), "hello\n").expect("hello");
    std::fs::create_dir(root.join("sub")).expect("sub");
    std::fs::write(root.join("sub/inner.txt"), "inner").expect("inner");
    std::fs::write(root.join(".env"), "SECRET=1\n").expect(".env");
    std::fs::write(root.join("blob.bin"), blob()).expect("blob");
}

#[test]
fn every_message_type_with_base64_binary() {
    let Some(py) = python_or_skip("ws files channel (base64)") else {
        return;
    };
    let gate = WsGate::start(Some(&policy("base64")), fixture);
    let summary = gate.peer_ok(&py, "files_channel.py", &["base64"]);
    assert_eq!(summary["mode"], "base64");
    // What the client saw is what is on disk.
    assert_eq!(
        std::fs::read(gate.root.join("out.bin")).expect("out.bin"),
        blob()
    );
    assert_eq!(
        std::fs::read_to_string(gate.root.join("new/dir/file.txt")).expect("deep"),
        "deep"
    );
    assert!(gate.root.join("made").is_dir());
    assert!(!gate.root.join("a").exists());
    assert!(!gate.root.join("notes.txt").exists());
    assert!(
        !gate.root.join("big.txt").exists(),
        "the oversized write must not happen"
    );
    assert_eq!(
        std::fs::read(gate.root.join("fits.txt"))
            .expect("fits")
            .len(),
        60000
    );
    assert_eq!(
        std::fs::read_to_string(gate.root.join(".env")).expect(".env"),
        "SECRET=1\n"
    );
    // Every request is audited under its connection's session, with the ws transport.
    let records = gate.audit_requests();
    assert!(records.len() > 50, "{} records", records.len());
    for r in &records {
        assert_eq!(r["transport"], "ws", "{r}");
        assert!(
            r["session"].as_str().is_some_and(|s| s.starts_with("ws-")),
            "{r}"
        );
        assert!(
            r["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.1:")),
            "{r}"
        );
    }
    assert!(
        records
            .iter()
            .any(|r| r["path"] == ".env" && r["decision"] == "deny"),
        "the refused .env read is audited"
    );
}

#[test]
fn binary_reads_are_refused_under_the_deny_mode() {
    let Some(py) = python_or_skip("ws files channel (deny)") else {
        return;
    };
    let gate = WsGate::start(Some(&policy("deny")), fixture);
    let summary = gate.peer_ok(&py, "files_channel.py", &["deny"]);
    assert_eq!(summary["mode"], "deny");
    assert_eq!(
        std::fs::read(gate.root.join("out.bin")).expect("out.bin"),
        blob()
    );
}
