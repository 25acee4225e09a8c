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

/// A policy whose growth budgets are small enough to spend in a few dozen requests.
fn small_budgets(session: u64, process: u64) -> String {
    crate::common::policy_with(
        1 << 20,
        1 << 20,
        "deny",
        &format!(
            "\n[audit]\nmax_session_bytes_per_minute = {session}\nmax_bytes_per_minute = {process}\n"
        ),
    )
}

/// The records of a log, parsed.
fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Sends `n` stats, each in session `session(i)`; returns how many were refused for the
/// growth budget `rule` (checking each refusal's code and rule).
fn stats_refused(g: &Gate, n: usize, session: impl Fn(usize) -> String, rule: &str) -> usize {
    let path = g.abs("f.txt");
    let mut refused = 0;
    for i in 0..n {
        match g.call(
            "_fsgate/stat",
            json!({"path": path, "sessionId": session(i)}),
        ) {
            Ok(_) => assert_eq!(refused, 0, "request {i} served after a refusal"),
            Err(e) => {
                assert_eq!(e.code, crate::common::LIMIT, "{e:?}");
                assert_eq!(
                    e.data.as_ref().map(|d| d["rule"].clone()),
                    Some(json!(rule))
                );
                assert!(e.message.contains("within a minute"), "{e:?}");
                refused += 1;
            }
        }
    }
    refused
}

#[test]
fn past_its_growth_budget_a_session_then_the_gateway_is_refused_and_recorded_once() {
    let mut g = Gate::with_policy(&small_budgets(16384, 65536));
    g.put("f.txt", "x");
    let session_rule = "audit.max_session_bytes_per_minute";
    let refused = stats_refused(&g, 60, |_| "s1".into(), session_rule);
    assert!((10..50).contains(&refused), "{refused} of 60 refused");
    // Another session still gets in: the session's budget is its own.
    g.ok(
        "_fsgate/stat",
        json!({"path": g.abs("f.txt"), "sessionId": "s2"}),
    );
    // A new session id for each request: the gateway's budget holds them all.
    let process_rule = "audit.max_bytes_per_minute";
    let by_process = stats_refused(&g, 200, |i| format!("fresh-{i}"), process_rule);
    assert!(by_process > 50, "{by_process} of 200 refused");
    g.close_stdin();
    assert!(g.wait_exit(crate::common::TIMEOUT).success());
    let recs = records(&g.audit_log);
    let limited: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "request" && r["outcome"] == "-32004")
        .collect();
    assert_eq!(
        limited.len(),
        2,
        "one record per budget and minute: {limited:#?}"
    );
    assert_eq!(limited[0]["rule"], session_rule);
    assert_eq!(limited[0]["session"], "s1");
    assert_eq!(limited[1]["rule"], process_rule);
    let counts: Vec<(Value, Value)> = recs
        .iter()
        .filter(|r| r["kind"] == "growth-limit")
        .map(|r| {
            (
                r["details"]["scope"].clone(),
                r["details"]["refused"].clone(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        vec![
            (json!("process"), json!(by_process - 1)),
            (json!("session"), json!(refused - 1)),
        ],
        "the refusals without a record of their own, counted at close"
    );
    assert_eq!(recs.last().map(|r| r["kind"].clone()), Some(json!("stop")));
}

#[test]
fn past_its_growth_budget_an_mcp_or_websocket_session_is_refused_with_the_limit() {
    let policy = small_budgets(16384, 0);
    let mut m = McpGate::start(Some(&policy));
    m.dirs.put("f.txt", "x");
    m.initialize("2025-06-18");
    let file = m.dirs.abs("f.txt");
    let texts: Vec<String> = (0..80)
        .map(|i| {
            crate::mcp_harness::text_of(&m.tool(10 + i, "get_file_info", json!({"path": file})))
        })
        .collect();
    let limited = texts
        .iter()
        .filter(|t| t.contains("audit.max_session_bytes_per_minute"));
    assert!(limited.count() > 10, "{:?}", texts.last());
    let recorded = m.dirs.audit_records();
    let recorded = recorded.iter().filter(|r| r["outcome"] == "-32004");
    assert_eq!(recorded.count(), 1);

    let w = WsGate::start(Some(&policy), |root| {
        std::fs::write(root.join("f.txt"), "x").expect("seed");
    });
    let mut client = w.client();
    let mut codes = Vec::new();
    for _ in 0..80 {
        let r = client.request("stat", json!({"path": "/f.txt"}));
        codes.push(r["errorInfo"]["code"].clone());
    }
    assert!(
        codes.iter().filter(|c| **c == json!(-32004)).count() > 10,
        "{codes:?}"
    );
    let recorded = w.audit_requests();
    assert_eq!(
        recorded.iter().filter(|r| r["outcome"] == "-32004").count(),
        1
    );
}

/// The longest an agent-chosen string is written in a record, escapes included
/// (audit/FORMAT.md section 2).
const MAX_FIELD_WRITTEN: usize = 4096;
/// The longest record line of a request (audit/FORMAT.md section 2).
const MAX_RECORD_LINE: usize = 32 * 1024;

/// `n` control characters: `n` bytes in a request, six times that escaped in JSON.
fn controls_n(n: usize, salt: u8) -> String {
    (0..n)
        .map(|i| char::from(1 + ((i + usize::from(salt)) % 7) as u8))
        .collect()
}

/// 4,096 control characters: cut (24 KiB written).
fn controls(salt: u8) -> String {
    controls_n(4096, salt)
}

/// 680 control characters: kept whole (4,080 bytes written), the most a field holds.
fn under(salt: u8) -> String {
    controls_n(680, salt)
}

/// Every string of `v`, with its place.
fn strings<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((at, s)),
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                strings(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                strings(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// Every record line within [`MAX_RECORD_LINE`], every string in it written in at most
/// [`MAX_FIELD_WRITTEN`] bytes, at least `min_cut` records with cut strings, and the log
/// verifying.
fn check_escaped_bounds(door: &str, log: &Path, min_cut: usize) {
    let text = std::fs::read_to_string(log).expect("read the audit log");
    for line in text.lines() {
        assert!(
            line.len() <= MAX_RECORD_LINE,
            "{door}: a record of {} bytes: {}...",
            line.len(),
            &line[..200]
        );
        let rec: Value = serde_json::from_str(line).expect("a record");
        let mut all = Vec::new();
        strings(&rec, String::new(), &mut all);
        for (at, s) in all {
            let written = serde_json::to_string(s).expect("encode").len() - 2;
            assert!(
                written <= MAX_FIELD_WRITTEN,
                "{door}: {at} written in {written} bytes"
            );
        }
    }
    assert!(cut_records(log) >= min_cut, "{door}: long fields cut");
    let out = Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["audit", "verify"])
        .arg(log)
        .output()
        .expect("run audit verify");
    assert!(
        out.status.success(),
        "{door}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn control_characters_on_the_acp_door_are_bounded_as_written_not_as_sent() {
    let g = Gate::start();
    g.put("f.txt", "one line\n");
    for text in [controls, under] {
        let grep = json!({
            "pattern": text(0),
            "path": g.abs(&text(1)),
            "includeGlob": text(2),
            "sessionId": text(3),
        });
        let id = g.send("_fsgate/grep", grep);
        g.wait_response(&id);
        let rename = json!({
            "oldPath": g.abs(&text(4)),
            "newPath": g.abs(&text(5)),
            "sessionId": text(6),
        });
        let id = g.send("_fsgate/rename", rename);
        g.wait_response(&id);
    }
    check_escaped_bounds("acp", &g.audit_log, 2);
}

#[test]
fn control_characters_on_the_mcp_door_are_bounded_as_written_not_as_sent() {
    let mut g = McpGate::start(None);
    g.dirs.put("f.txt", "one line\n");
    g.initialize("2025-06-18");
    let mut id = 0;
    for text in [controls, under] {
        let grep = json!({
            "pattern": text(0),
            "path": g.dirs.abs(&text(1)),
            "includeGlob": text(2),
        });
        id += 1;
        g.tool(id, "grep", grep);
        let rename = json!({
            "oldPath": g.dirs.abs(&text(4)),
            "newPath": g.dirs.abs(&text(5)),
        });
        id += 1;
        g.tool(id, "rename", rename);
    }
    let log = g.dirs.audit_log();
    assert!(g.finish().success());
    check_escaped_bounds("mcp", &log, 2);
}
