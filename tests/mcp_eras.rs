//! MCP: each protocol era on its own terms, whatever came before on the connection.
//! A stateless (2026-07-28) request is answered from itself alone; the methods that
//! revision removed, and the features fsgate does not declare, are "method not found";
//! a message in the wrong place (a notification or a response before any session) is
//! recorded and ignored, never the end of the process; every request that has an id is
//! answered under that id.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, modern_meta, text_of};

/// `params` with the stateless `_meta` added.
fn modern(mut params: Value) -> Value {
    params["_meta"] = modern_meta();
    params
}

/// The JSON-RPC error code of the answer to `id`, or "result".
fn code_of(g: &McpGate, id: u64) -> Value {
    let r = g.response(id);
    match r.get("error") {
        Some(e) => e["code"].clone(),
        None => json!("result"),
    }
}

/// The records of the session whose op is `op`.
fn records_named(g: &McpGate, op: &str) -> Vec<Value> {
    g.dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["transport"] == "mcp" && r["op"] == op)
        .collect()
}

/// Messages that have no place before a session: each used to end the process with
/// status 1 ("expect initialized request, but received ...").
fn strays() -> Vec<(&'static str, Value)> {
    vec![
        (
            "notifications/initialized",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ),
        (
            "notifications/cancelled",
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}),
        ),
        (
            "notifications/roots/list_changed",
            json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
        ),
        (
            "notifications/progress",
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}),
        ),
        (
            "x/custom",
            json!({"jsonrpc": "2.0", "method": "x/custom", "params": {"a": 1}}),
        ),
        (
            "response",
            json!({"jsonrpc": "2.0", "id": 99, "result": {}}),
        ),
        (
            "response",
            json!({"jsonrpc": "2.0", "id": 98, "error": {"code": -1, "message": "no"}}),
        ),
    ]
}

#[test]
fn a_stray_message_first_is_recorded_and_ignored_on_either_era() {
    for (name, stray) in strays() {
        for era in ["session", "stateless"] {
            let mut g = McpGate::start(None);
            g.dirs.put("a.txt", "hello\n");
            g.send_line(&stray.to_string());
            g.send_line(&stray.to_string());
            let read = json!({"name": "read_text_file", "arguments": {"path": "a.txt"}});
            let r = if era == "session" {
                g.initialize("2025-11-25");
                g.call(1, "tools/call", read)
            } else {
                g.call(1, "tools/call", modern(read))
            };
            assert_eq!(text_of(&r), "hello\n", "{name} first, then {era}: {r}");
            // Nothing answered the stray messages.
            assert!(
                g.try_null_response(Duration::from_millis(100)).is_none(),
                "{name}"
            );
            let status = g.finish();
            assert!(status.success(), "{name}, {era}: {status}\n{}", g.stderr());
            let handshake = usize::from(era == "session" && name == "notifications/initialized");
            let records = records_named(&g, name);
            assert_eq!(records.len(), 2 + handshake, "{name}: {records:?}");
        }
    }
}

#[test]
fn methods_the_stateless_revision_removed_are_method_not_found_with_its_meta() {
    let mut g = McpGate::start(None);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    // First messages of the process: nothing before them may make a difference.
    g.request(1, "ping", modern(json!({})));
    assert_eq!(code_of(&g, 1), json!(-32601), "ping first");
    g.request(2, "initialize", modern(init.clone()));
    assert_eq!(code_of(&g, 2), json!(-32601), "initialize");
    g.request(3, "logging/setLevel", modern(json!({"level": "info"})));
    assert_eq!(code_of(&g, 3), json!(-32601), "logging/setLevel");
    g.call(4, "tools/list", modern(json!({})));
    g.request(5, "ping", modern(json!({})));
    assert_eq!(
        code_of(&g, 5),
        json!(-32601),
        "ping after a stateless request"
    );
    // Without the stateless _meta they are the 2025 methods they always were.
    g.request(6, "ping", json!({}));
    assert_eq!(code_of(&g, 6), json!("result"), "a 2025 ping");
    let r = g.call(7, "initialize", init);
    assert_eq!(r["protocolVersion"], "2025-11-25", "{r}");
    g.notify("notifications/initialized");
    g.request(8, "logging/setLevel", json!({"level": "info"}));
    assert_eq!(code_of(&g, 8), json!("result"));
    g.request(9, "ping", modern(json!({})));
    assert_eq!(code_of(&g, 9), json!(-32601), "ping within a 2025 session");
    assert!(g.finish().success(), "{}", g.stderr());
    let outcomes: Vec<Value> = records_named(&g, "ping")
        .iter()
        .map(|r| r["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            json!("-32601"),
            json!("-32601"),
            json!("ok"),
            json!("-32601")
        ]
    );
}

#[test]
fn a_2025_ping_is_answered_whatever_came_before() {
    let mut g = McpGate::start(None);
    g.request(1, "ping", json!({}));
    assert_eq!(g.response(1)["result"], json!({}));
    g.call(2, "tools/list", modern(json!({})));
    g.request(3, "ping", json!({}));
    assert_eq!(
        g.response(3)["result"],
        json!({}),
        "after a stateless request"
    );
    assert!(g.finish().success());
}

/// Requests of features fsgate does not declare (prompts, resources, completions) are
/// "method not found" on both eras, and neither `initialize` nor `server/discover`
/// declares them.
#[test]
fn features_not_declared_are_method_not_found_on_both_eras() {
    let undeclared = [
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "x"})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "file:///a.txt"})),
        ("resources/subscribe", json!({"uri": "file:///a.txt"})),
        ("resources/unsubscribe", json!({"uri": "file:///a.txt"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
    ];
    let mut g = McpGate::start(None);
    let d = g.call(1, "server/discover", modern(json!({})));
    let init = g.initialize("2025-11-25");
    for caps in [&d["capabilities"], &init["capabilities"]] {
        for feature in ["prompts", "resources", "completions"] {
            assert!(caps.get(feature).is_none(), "{feature} declared: {caps}");
        }
        assert!(caps["tools"].is_object(), "{caps}");
    }
    for (i, (method, params)) in undeclared.iter().enumerate() {
        let id = 10 + 2 * i as u64;
        g.request(id, method, params.clone());
        assert_eq!(code_of(&g, id), json!(-32601), "{method} in a 2025 session");
        g.request(id + 1, method, modern(params.clone()));
        assert_eq!(code_of(&g, id + 1), json!(-32601), "{method}, stateless");
    }
    assert!(g.finish().success());
    for (method, _) in undeclared {
        let recs = records_named(&g, method);
        assert_eq!(recs.len(), 2, "{method}: {recs:?}");
        assert!(recs.iter().all(|r| r["outcome"] == "-32601"), "{recs:?}");
    }
}

/// Roots a 2025 client gave on the same connection narrow its own session only: a
/// stateless request is served as if nothing had come before it.
#[test]
fn a_stateless_request_is_not_narrowed_by_a_2025_sessions_roots() {
    let mut g = McpGate::start(None);
    g.dirs.put("src/in.txt", "in src\n");
    g.dirs.put("top.txt", "at the top\n");
    g.initialize_with("2025-06-18", json!({"roots": {}}));
    let root = format!("file://{}", g.dirs.abs("src"));
    g.answer_roots(&[root]);
    let top = json!({"name": "read_text_file", "arguments": {"path": g.dirs.abs("top.txt")}});
    let r = g.call(1, "tools/call", top.clone());
    assert_eq!(r["isError"], json!(true), "the session is narrowed: {r}");
    let r = g.call(2, "tools/call", modern(top));
    assert_eq!(text_of(&r), "at the top\n", "{r}");
    let dirs = json!({"name": "list_allowed_directories", "arguments": {}});
    let r = g.call(3, "tools/call", modern(dirs));
    assert_eq!(
        text_of(&r),
        format!("Allowed directories:\n{}", g.dirs.root.display())
    );
    assert!(g.finish().success());
}

/// Requests whose params the SDK cannot read used to be answered with a null id (and
/// their id stayed "in use" for good); notifications and responses of a wrong shape
/// were answered although nothing may answer them.
#[test]
fn every_request_is_answered_under_its_id_and_nothing_else_is_answered() {
    let mut g = McpGate::start(None);
    g.initialize("2025-11-25");
    let bad = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": 5}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "x/y", "params": [1]}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": 5}}),
        json!({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": "text"}),
    ];
    for line in &bad {
        g.send_line(&line.to_string());
    }
    for id in [1u64, 2, 3] {
        let r = g.response(id);
        assert!(r["error"]["code"].is_i64(), "{r}");
    }
    // A 2025 ping whatever its params.
    assert_eq!(g.response(4)["result"], json!({}));
    let s = g
        .try_response_to(&json!("s"), Duration::from_secs(10))
        .expect("an answer under the string id");
    assert!(s["error"]["code"].is_i64(), "{s}");
    let ignored = [
        json!({"jsonrpc": "2.0", "id": 50, "result": 5}),
        json!({"jsonrpc": "2.0", "id": 51, "error": 5}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": []}),
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": 5}),
    ];
    for line in &ignored {
        g.send_line(&line.to_string());
    }
    // The ids are free again, and the session goes on.
    let r = g.call(1, "tools/list", json!({}));
    assert!(r["tools"].is_array(), "{r}");
    assert!(
        g.try_null_response(Duration::from_millis(300)).is_none(),
        "a message that is no request was answered"
    );
    for id in [50u64, 51] {
        assert!(g.try_response(id, Duration::ZERO).is_none(), "{id}");
    }
    assert!(g.finish().success());
}
