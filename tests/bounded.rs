//! Bounded memory and bounded answers (issue 10, point 3): a client that stops reading
//! cannot grow the gateway, and no answer exceeds the message limit: a listing stops
//! and says `truncated`, a read that would not fit is refused before it is built.
//!
//! Included from tests/all.rs as `mod bounded;` (uses `crate::common`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::{Gate, LIMIT, bin};

/// A policy whose messages are at most `max_message` bytes.
fn policy(max_message: u64) -> String {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/default.toml"
    ))
    .expect("default policy");
    base.replace(
        "[limits]\n",
        &format!("[limits]\nmax_message_bytes = {max_message}\n"),
    )
}

fn vm_hwm_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("VmHWM");
    kb / 1024
}

#[test]
fn a_client_that_stops_reading_cannot_grow_the_gateway() {
    // 200 pipelined reads of a 1 MiB file (200 MiB of answers) with a 2 MiB message
    // limit: at most twice that is queued, and the content budget holds the rest back.
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    std::fs::write(ws.path().join("big.txt"), "x".repeat(1 << 20)).expect("write");
    let pol = state.path().join("policy.toml");
    std::fs::write(&pol, policy(2 << 20)).expect("policy");
    let mut child = Command::new(bin())
        .arg("serve")
        .arg("--workspace")
        .arg(ws.path())
        .arg("--policy")
        .arg(&pol)
        .arg("--audit-log")
        .arg(state.path().join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.path().join("b"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let path = ws.path().join("big.txt").display().to_string();
    const N: usize = 200;
    let writer = std::thread::spawn(move || {
        for i in 0..N {
            let req = json!({"jsonrpc": "2.0", "id": i, "method": "fs/read_text_file",
                             "params": {"sessionId": "s", "path": path}});
            if writeln!(stdin, "{req}").is_err() {
                return;
            }
        }
        let _ = stdin.flush();
        // Keep stdin open until the answers were read.
        std::thread::sleep(Duration::from_secs(30));
    });
    std::thread::sleep(Duration::from_secs(2));
    let stalled = vm_hwm_mib(pid);
    // Now read everything: every request is answered.
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut answered = 0;
    let mut line = String::new();
    while answered < N {
        line.clear();
        if out.read_line(&mut line).expect("read") == 0 {
            break;
        }
        // (Parsing 200 MiB of JSON in a debug build would take longer than the test.)
        assert!(
            line.len() > 1 << 20 && line.starts_with("{\"id\":"),
            "{}",
            &line[..line.len().min(200)]
        );
        assert!(
            line.contains("\"result\":{\"content\":\"xxxx"),
            "not a read result"
        );
        answered += 1;
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(writer);
    assert_eq!(answered, N);
    eprintln!("bounded: peak RSS {stalled} MiB while 200 MiB of answers waited");
    assert!(
        stalled < 100,
        "the gateway grew to {stalled} MiB while the client did not read"
    );
}

#[test]
fn grep_and_glob_stop_at_the_message_limit_and_say_so() {
    let g = Gate::with_policy(&policy(64 * 1024));
    let line = format!("needle {}\n", "y".repeat(1000));
    for i in 0..40 {
        g.put(&format!("d/f{i:02}.txt"), line.repeat(50));
    }
    let r = g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "needle", "maxResults": 100000}),
    );
    assert_eq!(r["truncated"], true, "{}", r.to_string().len());
    let hits = r["matches"].as_array().expect("matches").len();
    assert!(hits > 10 && hits < 2000, "{hits} hits");
    assert!(
        r.to_string().len() < 64 * 1024,
        "answer of {} bytes",
        r.to_string().len()
    );
    // A search that fits says nothing of truncation.
    let r = g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "needle", "maxResults": 3}),
    );
    assert_eq!(r["matches"].as_array().map(Vec::len), Some(3));
    assert!(r.get("truncated").is_none(), "{r}");
    // Globs likewise.
    for i in 0..2000 {
        g.put(
            &format!("many/a-rather-long-file-name-number-{i:05}.txt"),
            "",
        );
    }
    let r = g.ok(
        "_fsgate/glob",
        json!({"sessionId": "s", "pattern": "many/*.txt"}),
    );
    assert_eq!(r["truncated"], true);
    assert!(r.to_string().len() < 64 * 1024);
}

#[test]
fn a_listing_stops_at_16_mib_even_under_a_larger_message_limit() {
    // The default limit (24 MiB) is sized for whole reads; a listing is cut, not refused,
    // so it stays within 16 MiB and many listings at once hold less.
    let g = Gate::with_policy(&policy(24 << 20));
    let line = format!("needle {}\n", "y".repeat(1000));
    for i in 0..20 {
        g.put(&format!("d/f{i:02}.txt"), line.repeat(1024));
    }
    let r = g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "needle", "maxResults": 100000}),
    );
    let len = r.to_string().len();
    assert_eq!(r["truncated"], true, "{len}");
    assert!(len < 16 << 20, "answer of {len} bytes");
    assert!(
        len > 12 << 20,
        "answer of {len} bytes: cut well below its room"
    );
}

#[test]
fn a_read_whose_answer_would_exceed_the_limit_is_refused_before_it_is_built() {
    let g = Gate::with_policy(&policy(64 * 1024));
    // 20 KiB of control characters: six times larger once JSON-escaped.
    g.put("ctl.txt", "\u{1}".repeat(20 * 1024));
    let e = g.err("fs/read_text_file", json!({"path": g.abs("ctl.txt")}));
    assert_eq!(e.code, LIMIT, "{e:?}");
    assert!(e.message.contains("message limit"), "{}", e.message);
    // Read in parts, it fits.
    g.put("lines.txt", "\u{1}\n".repeat(5000));
    let r = g.ok(
        "fs/read_text_file",
        json!({"path": g.abs("lines.txt"), "line": 1, "limit": 100}),
    );
    assert_eq!(r["content"].as_str().map(str::len), Some(200));
}

#[test]
fn the_reference_servers_text_tools_say_when_a_list_was_cut() {
    // Regression: list_directory and search_files returned a cut list without saying so.
    let mut g = crate::mcp_harness::McpGate::start(Some(&policy(64 * 1024)));
    for i in 0..2000 {
        g.dirs.put(
            &format!("many/a-rather-long-file-name-number-{i:05}.txt"),
            "",
        );
    }
    g.initialize("2025-06-18");
    let dir = g.dirs.abs("many");
    // A page cut at the limit says where the next one starts.
    let r = g.tool(1, "list_directory", json!({"path": dir}));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    let last = text
        .lines()
        .rev()
        .nth(1)
        .and_then(|l| l.strip_prefix("[FILE] "));
    let more = format!(
        "[MORE] more entries follow; call list_directory again with \"cursor\": \"{}\"",
        last.unwrap_or("?")
    );
    assert!(
        text.contains(&more),
        "list_directory: {}",
        &text[text.len().saturating_sub(300)..]
    );
    for (id, tool, args) in [
        (2, "list_directory_with_sizes", json!({"path": dir})),
        (3, "search_files", json!({"path": dir, "pattern": "*.txt"})),
    ] {
        let r = g.tool(id, tool, args);
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            text.contains("[TRUNCATED]"),
            "{tool}: {}",
            &text[text.len().saturating_sub(300)..]
        );
    }
    // A tree cannot be cut silently: it is refused, naming the limit.
    let r = g.tool(4, "directory_tree", json!({"path": g.dirs.abs("")}));
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text.contains("limits.max_message_bytes"), "{text}");
}

#[test]
fn an_mcp_read_fits_if_both_its_copies_fit_the_message_limit() {
    // An MCP answer carries a read twice, as a text block and as the structured content
    // its output schema promises (as the reference server's does): a text file of the
    // default read limit (10 MiB) fits the default 24 MiB message limit whole; 9 MiB
    // of quotes and tabs (each escaped in two bytes: 36 MiB for both copies) does not,
    // and is refused before the answer is built, naming the limit and how to read less.
    // (With the former 16 MiB default, 10 MiB was refused.)
    let mut g = crate::mcp_harness::McpGate::start(None);
    let line = "a line of ordinary text, quoted \"here\", with a tab\tand 0123456789\n";
    let sized = |n: usize| {
        let mut content = line.repeat(n / line.len());
        content.push_str(&"z".repeat(n - content.len()));
        content
    };
    let (fits, over) = (sized(10 << 20), "\"\t".repeat(9 << 19));
    g.dirs.put("fits.txt", &fits);
    g.dirs.put("big.txt", &over);
    g.initialize("2025-06-18");
    let r = g.tool(1, "read_text_file", json!({"path": g.dirs.abs("fits.txt")}));
    assert_ne!(r["isError"], true, "{}", crate::mcp_harness::text_of(&r));
    assert_eq!(r["content"].as_array().map(Vec::len), Some(1));
    assert!(r["content"][0]["text"].as_str() == Some(fits.as_str()));
    assert!(r["structuredContent"]["content"].as_str() == Some(fits.as_str()));
    let r = g.tool(2, "read_text_file", json!({"path": g.dirs.abs("big.txt")}));
    let text = crate::mcp_harness::text_of(&r);
    assert_eq!(r["isError"], true, "{text}");
    assert!(text.contains("limits.max_message_bytes"), "{text}");
    assert!(
        text.contains("read_text_file with line and limit"),
        "{text}"
    );
}

#[test]
fn a_tree_of_10000_files_in_100_directories_is_answered_whole() {
    // Regression: directories counted against a 10,000-entry cap, so 10,100 entries
    // were refused.
    let mut g = crate::mcp_harness::McpGate::start(None);
    for d in 0..100 {
        for f in 0..100 {
            g.dirs.put(&format!("t/d{d:03}/f{f:03}.txt"), "");
        }
    }
    g.initialize("2025-06-18");
    let r = g.tool(1, "directory_tree", json!({"path": g.dirs.abs("t")}));
    let text = crate::mcp_harness::text_of(&r);
    assert_ne!(r["isError"], true, "{text}");
    let tree: serde_json::Value = serde_json::from_str(&text).expect("tree JSON");
    let dirs = tree.as_array().expect("top-level array");
    assert_eq!(dirs.len(), 100);
    for (d, dir) in dirs.iter().enumerate() {
        assert_eq!(dir["name"], format!("d{d:03}"));
        assert_eq!(dir["type"], "directory");
        let files = dir["children"].as_array().expect("children");
        assert_eq!(files.len(), 100, "{}", dir["name"]);
        assert!(files.iter().all(|f| f["type"] == "file"));
        assert_eq!(files[99]["name"], "f099.txt");
    }
}

/// A workspace with `quarter.txt` (400 KiB of text) and a policy whose messages are at
/// most 1 MiB: each read fits an answer on its own (both copies), two together do not.
fn quarter_files() -> (crate::mcp_harness::Dirs, String) {
    let dirs = crate::mcp_harness::Dirs::new();
    let line = "0123456789 a line of ordinary text in a quarter of a message\n";
    dirs.put("quarter.txt", line.repeat((400 << 10) / line.len()));
    (dirs, policy(1 << 20))
}

/// What `read_multiple_files` of `quarter.txt` three times must answer: the first
/// file whole, each one after it that would pass the message limit refused in its own
/// entry, naming the limit and how to ask for less.
fn check_multi_answer(result: &serde_json::Value, whole: &str) {
    let text = crate::mcp_harness::text_of(result);
    assert_ne!(result["isError"], true, "{}", &text[..text.len().min(400)]);
    let entries: Vec<&str> = text.split("\n---\n").collect();
    assert_eq!(
        entries.len(),
        3,
        "{}",
        &text[text.len().saturating_sub(600)..]
    );
    assert!(entries[0].ends_with(&format!("quarter.txt:\n{whole}\n")));
    for e in &entries[1..] {
        assert!(e.contains("quarter.txt: Error - "), "{e}");
        assert!(e.contains("limits.max_message_bytes"), "{e}");
        assert!(e.contains("fewer paths"), "{e}");
    }
}

#[test]
fn read_multiple_files_over_the_message_limit_together_is_answered_at_once() {
    // Regression: each file fit the message limit alone, so each read leased its own
    // answer's worth of the content budget (twice the limit); the second read then waited
    // for the first read's lease, held by the same call: no answer, no record, and the
    // process never ended.
    let (dirs, pol) = quarter_files();
    let whole = std::fs::read_to_string(dirs.root.join("quarter.txt")).expect("read");
    let file = dirs.state.join("policy.toml");
    std::fs::write(&file, &pol).expect("policy");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsgate"));
    cmd.args(dirs.serve_args())
        .arg("--policy")
        .arg(&file)
        .current_dir(&dirs.state);
    let mut g = crate::mcp_harness::McpGate::spawn(cmd, dirs);
    g.initialize("2025-06-18");
    let path = g.dirs.abs("quarter.txt");
    let args = json!({"name": "read_multiple_files", "arguments": {"paths": [path, path, path]}});
    g.request(2, "tools/call", args);
    g.request(3, "ping", json!({}));
    let within = Duration::from_secs(5);
    let answer = g
        .try_response(2, within)
        .expect("read_multiple_files answered");
    check_multi_answer(&answer["result"], &whole);
    assert!(
        g.try_response(3, within).is_some(),
        "ping after it answered"
    );
    let reads = g
        .dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "read_text_file")
        .count();
    assert_eq!(reads, 3, "each file's read recorded");
    g.close_input();
    let deadline = std::time::Instant::now() + within;
    while g.exited().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no exit at end of input"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn read_multiple_files_over_the_message_limit_together_is_answered_over_http() {
    let (dirs, pol) = quarter_files();
    let whole = std::fs::read_to_string(dirs.root.join("quarter.txt")).expect("read");
    let g = crate::mcp_http::HttpGate::start(&dirs, Some(&pol));
    let bearer = g.bearer();
    let headers = [
        ("Authorization", bearer.as_str()),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    let path = dirs.abs("quarter.txt");
    let meta = crate::mcp_harness::modern_meta();
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "_meta": meta, "name": "read_multiple_files",
        "arguments": {"paths": [path, path, path]}}});
    let started = std::time::Instant::now();
    let reply = crate::mcp_http::post(&g, &msg, &headers);
    assert!(started.elapsed() < Duration::from_secs(5), "answered late");
    check_multi_answer(&reply.json()["result"], &whole);
    // The stateless revision has no `ping`: a call after it is answered.
    let next = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": meta, "name": "list_allowed_directories", "arguments": {}}});
    let reply = crate::mcp_http::post(&g, &next, &headers);
    assert!(started.elapsed() < Duration::from_secs(5), "answered late");
    assert_eq!(reply.json()["result"]["isError"], false, "{}", reply.body);
    let reads = dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "read_text_file")
        .count();
    assert_eq!(reads, 3, "each file's read recorded");
}
