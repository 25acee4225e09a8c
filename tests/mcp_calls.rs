//! MCP: every `tools/call` takes one path, whatever its era, its params or the moment it
//! arrives. A call is read once, checked as the SDK checks a request's `_meta`, run, and
//! answered in its era (`resultType` only from 2026-07-28 on); a call refused before it
//! runs is recorded once, from its answer.

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, modern_meta, text_of};

const PROTOCOL: &str = "io.modelcontextprotocol/protocolVersion";

/// The read of `a.txt`, with `meta` as its `_meta` if given.
fn read(meta: Option<Value>) -> Value {
    let mut p = json!({"name": "read_text_file", "arguments": {"path": "a.txt"}});
    if let Some(m) = meta {
        p["_meta"] = m;
    }
    p
}

/// The audit records of `op` with `outcome`.
fn count(g: &McpGate, op: &str, outcome: &str) -> usize {
    let recs = g.dirs.audit_records();
    recs.iter()
        .filter(|r| r["op"] == op && r["outcome"] == outcome)
        .count()
}

/// A call sent after `initialize` but before `notifications/initialized` runs in the
/// session, as any later call does.
#[test]
fn a_call_before_initialized_runs_in_the_session() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}});
    g.request(1, "initialize", init);
    g.request(2, "tools/call", read(None));
    let r = g.response(2);
    assert_eq!(text_of(&r["result"]), "hello\n", "{r}");
    assert!(r["result"].get("resultType").is_none(), "{r}");
    let recs = g.dirs.audit_records();
    let session = |op: &str| {
        recs.iter()
            .find(|r| r["op"] == op)
            .map(|r| r["session"].clone())
            .unwrap_or_else(|| panic!("no {op} record: {recs:?}"))
    };
    assert_eq!(session("read_text_file"), session("initialize"));
    assert!(g.finish().success());
}

/// The same read answers in the era it was sent in: `resultType: "complete"` for a
/// 2026-07-28 request, none for the 2025 session (with or without a `_meta`) or a
/// request whose `_meta` names a 2025 revision; the rest of the answer is the same.
#[test]
fn a_call_answers_in_its_era() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    g.initialize("2025-06-18");
    let plain = g.call(1, "tools/call", read(None));
    let progress = g.call(2, "tools/call", read(Some(json!({"progressToken": 7}))));
    let modern = g.call(3, "tools/call", read(Some(modern_meta())));
    let mut old_meta = modern_meta();
    old_meta[PROTOCOL] = json!("2025-06-18");
    let dated = g.call(4, "tools/call", read(Some(old_meta)));
    assert_eq!(text_of(&plain), "hello\n", "{plain}");
    assert_eq!(plain, progress);
    assert_eq!(plain, dated);
    assert_eq!(modern["resultType"], json!("complete"), "{modern}");
    let mut stripped = modern.clone();
    stripped.as_object_mut().map(|o| o.remove("resultType"));
    assert_eq!(stripped, plain);
    assert!(g.finish().success());
}

/// A stateless call meets the SDK's checks of its `_meta` before it runs: a protocol
/// version the server does not support, or a 2026-07-28 request without the keys that
/// revision requires, is a JSON-RPC error; each is recorded once and reads nothing.
#[test]
fn a_stateless_calls_meta_is_checked_before_it_runs() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    let mut future = modern_meta();
    future[PROTOCOL] = json!("2099-01-01");
    g.request(1, "tools/call", read(Some(future)));
    let r = g.response(1);
    assert_eq!(r["error"]["code"], json!(-32022), "{r}");
    assert_eq!(r["error"]["data"]["requested"], json!("2099-01-01"), "{r}");
    let supported = r["error"]["data"]["supported"].to_string();
    assert!(supported.contains("2026-07-28"), "{r}");
    g.request(2, "tools/call", read(Some(json!({PROTOCOL: "2026-07-28"}))));
    let r = g.response(2);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("io.modelcontextprotocol/clientCapabilities"),
        "{r}"
    );
    let mut unknown = read(Some(modern_meta()));
    unknown["name"] = json!("no_such_tool");
    g.request(3, "tools/call", unknown);
    let r = g.response(3);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(r["error"]["message"], json!("unknown tool: no_such_tool"));
    assert_eq!(count(&g, "tools/call", "-32022"), 1);
    assert_eq!(count(&g, "tools/call", "-32602"), 2);
    assert_eq!(count(&g, "read_text_file", "ok"), 0, "nothing ran");
    assert!(g.finish().success());
}

/// A call of the 2025 session with more than a name and arguments (a `_meta`, a field
/// of a later revision) runs as a plain one, and params of the wrong shape are the
/// params error, recorded once.
#[test]
fn a_call_with_more_params_runs_and_wrong_params_are_refused() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    g.initialize("2025-06-18");
    let mut more = read(Some(json!({"progressToken": "p"})));
    more["task"] = json!({"ttl": 1000});
    let r = g.call(1, "tools/call", more);
    assert_eq!(text_of(&r), "hello\n", "{r}");
    g.request(2, "tools/call", json!({"arguments": {}}));
    let r = g.response(2);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(count(&g, "read_text_file", "ok"), 1);
    assert_eq!(count(&g, "tools/call", "-32602"), 1);
    assert!(g.finish().success());
}
