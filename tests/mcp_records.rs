//! MCP: every message that reaches `fsgate serve --transport mcp` leaves exactly one
//! audit record, whichever part answers it (a handler, the SDK itself, the input pump),
//! and the record is durable before the answer.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, modern_meta};

/// The records the MCP session wrote (start-up and checkpoint records aside).
fn session_records(g: &McpGate) -> Vec<Value> {
    g.dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["transport"] == "mcp")
        .collect()
}

/// Waits until the session has `n` records (a notification has no answer to wait for).
fn wait_for_records(g: &McpGate, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let recs = session_records(g);
        if recs.len() >= n || Instant::now() > deadline {
            return recs;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends one message, waits for its answer (keyed `answer_key`), and checks that it
/// added exactly one record named `op`.
fn one_record(g: &mut McpGate, line: &str, answer_key: Option<u64>, op: &str) -> Value {
    let before = session_records(g).len();
    g.send_line(line);
    let answer = match answer_key {
        Some(id) => g.response(id),
        None => g
            .try_null_response(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no answer to {line}; stderr:\n{}", g.stderr())),
    };
    // The record is durable before the answer: it is there now, and only one.
    let recs = session_records(g);
    assert_eq!(
        recs.len(),
        before + 1,
        "{line}\n{answer}\n{:#?}",
        &recs[before..]
    );
    assert_eq!(recs[before]["op"], json!(op), "{line}: {:?}", recs[before]);
    answer
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[test]
fn every_kind_of_message_leaves_exactly_one_record() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    one_record(
        &mut g,
        &request(0, "initialize", init),
        Some(0),
        "initialize",
    );
    // A notification: no answer; one record.
    let before = session_records(&g).len();
    g.notify("notifications/initialized");
    let recs = wait_for_records(&g, before + 1);
    assert_eq!(recs.len(), before + 1, "{recs:#?}");
    assert_eq!(recs[before]["op"], json!("notifications/initialized"));

    let sdk_answered = [
        (1, "ping", json!({})),
        (2, "resources/list", json!({})),
        (3, "prompts/list", json!({})),
        (4, "resources/read", json!({"uri": "file:///a.txt"})),
        (
            5,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
        (6, "logging/setLevel", json!({"level": "info"})),
        (7, "no/such-method", json!({})),
        (8, "tools/list", json!({})),
    ];
    for (id, method, params) in sdk_answered {
        one_record(&mut g, &request(id, method, params), Some(id), method);
    }
    let batch = format!(
        "[{},{}]",
        request(20, "ping", json!({})),
        request(21, "ping", json!({}))
    );
    let r = one_record(&mut g, &batch, None, "batch");
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    let r = one_record(
        &mut g,
        "{\"jsonrpc\": \"2.0\", \"id\": ",
        None,
        "invalid-message",
    );
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");

    let call = |id, name: &str, args: Value| {
        request(id, "tools/call", json!({"name": name, "arguments": args}))
    };
    let r = one_record(
        &mut g,
        &call(30, "read_text_file", json!({"path": 5})),
        Some(30),
        "read_text_file",
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let r = one_record(
        &mut g,
        &call(31, "no_such_tool", json!({})),
        Some(31),
        "tools/call",
    );
    assert!(r["error"].is_object(), "{r}");
    let r = one_record(
        &mut g,
        &call(32, "read_text_file", json!({"path": "a.txt"})),
        Some(32),
        "read_text_file",
    );
    assert_eq!(r["result"]["content"][0]["text"], json!("hello\n"), "{r}");
    assert!(g.finish().success());
    assert!(g.garbage().is_empty(), "{:?}", g.garbage());
}

#[test]
fn stateless_requests_refused_for_their_meta_are_recorded_once() {
    let mut g = McpGate::start(None);
    let meta = modern_meta();
    one_record(
        &mut g,
        &request(1, "server/discover", json!({"_meta": meta})),
        Some(1),
        "server/discover",
    );
    let mut bad = modern_meta();
    bad["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    let r = one_record(
        &mut g,
        &request(2, "tools/list", json!({"_meta": bad})),
        Some(2),
        "tools/list",
    );
    assert!(r["error"].is_object(), "{r}");
    let mut no_caps = modern_meta();
    no_caps
        .as_object_mut()
        .map(|m| m.remove("io.modelcontextprotocol/clientCapabilities"));
    let r = one_record(
        &mut g,
        &request(3, "ping", json!({"_meta": no_caps})),
        Some(3),
        "ping",
    );
    assert!(r.get("error").is_some() || r.get("result").is_some(), "{r}");
    assert!(g.finish().success());
}
