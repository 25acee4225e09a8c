//! What an agent chooses is recorded and echoed bounded (issue 29, point 3): 24 requests
//! carrying 2 MiB each, in a path, a method name, a session id, a tool name, a parameter
//! name or value, grow the audit files by less than 256 KiB and are answered in a few
//! KiB, on the ACP, MCP and WebSocket doors (the ACP proxy: tests/acp_proxy/bounds.rs).
//! Before, each such request wrote its 2 MiB into the log and echoed them back.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::Gate;
use crate::mcp_harness::McpGate;
use crate::ws_harness::WsGate;

/// What each request carries.
pub(crate) const BIG: usize = 2 << 20;
/// Requests sent per door.
pub(crate) const REQUESTS: usize = 24;
/// The most the audit files may grow by for all of them.
pub(crate) const MAX_GROWTH: u64 = 256 * 1024;
/// The longest answer to one of them.
pub(crate) const MAX_ANSWER: usize = 8 * 1024;

/// `BIG` bytes of `c`, so that no other text can be mistaken for it.
pub(crate) fn big(c: char) -> String {
    std::iter::repeat_n(c, BIG).collect()
}

/// Bytes of every file in the audit log's directory (active, rotated, sidecars).
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The figure and the checks every door shares: growth under the bound, each answer
/// short, and the log intact (both the chain and the lists of cut strings).
pub(crate) fn check_door(door: &str, dir: &Path, before: u64, answers: &[usize]) {
    let growth = dir_bytes(dir).saturating_sub(before);
    let longest = answers.iter().max().copied().unwrap_or(0);
    eprintln!(
        "{door}: {} requests of 2 MiB grew the audit files by {growth} bytes; longest answer {longest} bytes",
        answers.len()
    );
    assert!(
        growth < MAX_GROWTH,
        "{door}: the audit files grew by {growth} bytes"
    );
    assert_eq!(answers.len(), REQUESTS, "{door}: every request answered");
    assert!(
        longest <= MAX_ANSWER,
        "{door}: an answer of {longest} bytes"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["audit", "verify"])
        .arg(dir)
        .output()
        .expect("run audit verify");
    assert!(
        out.status.success(),
        "{door}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Records of the log naming strings it cut.
pub(crate) fn cut_records(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["details"].get("cut").is_some())
        .count()
}

#[test]
fn two_mib_fields_on_the_acp_door_are_recorded_and_answered_bounded() {
    let g = Gate::start();
    g.put("f.txt", "one line\n");
    let file = g.abs("f.txt");
    g.ok("_fsgate/stat", json!({"path": file}));
    let dir = g.audit_log.parent().expect("audit dir").to_path_buf();
    let before = dir_bytes(&dir);
    let mut answers = Vec::new();
    for round in 0..REQUESTS / 6 {
        let c = char::from(b'a' + round as u8);
        let requests = [
            (
                "fs/read_text_file".to_string(),
                json!({"path": g.abs(&big(c))}),
            ),
            (big(c), json!({})),
            (
                "fs/read_text_file".into(),
                json!({"path": file, "sessionId": big(c)}),
            ),
            (format!("_fsgate/{}", big(c)), json!({"path": file})),
            ("_fsgate/stat".into(), json!({"path": file, big(c): 1})),
            (
                "fs/read_text_file".into(),
                json!({"path": file, "line": big(c)}),
            ),
        ];
        for (method, params) in requests {
            let id = g.send(&method, params);
            answers.push(g.wait_response(&id).to_string().len());
        }
    }
    check_door("acp", &dir, before, &answers);
    assert!(
        cut_records(&g.audit_log) >= 16,
        "long fields cut and listed"
    );
}

#[test]
fn two_mib_fields_on_the_mcp_door_are_recorded_and_answered_bounded() {
    let mut g = McpGate::start(None);
    g.dirs.put("f.txt", "one line\n");
    let file = g.dirs.abs("f.txt");
    g.initialize("2025-06-18");
    g.tool(1, "get_file_info", json!({"path": file}));
    let dir = g.dirs.audit_log().parent().expect("dir").to_path_buf();
    let before = dir_bytes(&dir);
    let mut answers = Vec::new();
    let mut id = 10;
    for round in 0..REQUESTS / 6 {
        let c = char::from(b'a' + round as u8);
        let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
        let requests = [
            (
                "tools/call".to_string(),
                call("read_text_file", json!({"path": g.dirs.abs(&big(c))})),
            ),
            (big(c), json!({})),
            ("tools/call".into(), call(&big(c), json!({"path": file}))),
            (
                "tools/call".into(),
                call("read_text_file", json!({"path": file, big(c): 1})),
            ),
            (
                "tools/call".into(),
                json!({"name": "read_text_file", "arguments": {"path": file}, big(c): 1}),
            ),
            (
                "tools/call".into(),
                call("read_text_file", json!({"path": file, "line": big(c)})),
            ),
        ];
        for (method, params) in requests {
            id += 1;
            g.request(id, &method, params);
            answers.push(g.response(id).to_string().len());
        }
    }
    check_door("mcp", &dir, before, &answers);
    assert!(cut_records(&g.dirs.audit_log()) >= 12, "long fields cut");
}

#[test]
fn two_mib_fields_on_the_websocket_door_are_recorded_and_answered_bounded() {
    let g = WsGate::start(None, |root| {
        std::fs::write(root.join("f.txt"), "one line\n").expect("seed");
    });
    let mut client = g.client();
    client.ok("stat", json!({"path": "/f.txt"}));
    let dir = g.state.join("audit");
    let before = dir_bytes(&dir);
    let mut answers = Vec::new();
    for round in 0..REQUESTS / 6 {
        let c = char::from(b'a' + round as u8);
        let msg = |kind: &str, fields: Value| {
            let mut m = json!({"channel": "files", "type": kind, "requestId": "r"});
            if let (Some(m), Value::Object(f)) = (m.as_object_mut(), fields) {
                m.extend(f);
            }
            m
        };
        let requests = [
            msg("read", json!({"path": format!("/{}", big(c))})),
            msg(&big(c), json!({"path": "/f.txt"})),
            msg("read", json!({"path": "/f.txt", big(c): 1})),
            msg("read", json!({"path": "/f.txt", "encoding": big(c)})),
            msg("stat", json!({"path": "/f.txt", "channel": big(c)})),
            msg("list", json!({"path": format!("/{}", big(c)), "x": big(c)})),
        ];
        for m in requests {
            client.send_text(&m.to_string());
            let deadline = Instant::now() + Duration::from_secs(20);
            let text = client
                .next_text(deadline)
                .unwrap_or_else(|| panic!("no answer; stderr:\n{}", g.stderr()));
            answers.push(text.len());
        }
    }
    check_door("ws", &dir, before, &answers);
    assert!(
        cut_records(&dir.join("audit.jsonl")) >= 8,
        "long fields cut"
    );
}
