//! MCP transport on the wire, without an SDK: both protocol eras, refusals as tool
//! errors, protocol errors as JSON-RPC errors, policy-shaped tool lists, pipelining, EOF.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::common::policy_with;
use crate::mcp_harness::{McpGate, modern_meta, text_of};

const ALL_TOOLS: usize = 22;

fn tool_names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn handshake_era_initialize_then_tools() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    let init = g.initialize("2025-06-18");
    assert_eq!(init["protocolVersion"], json!("2025-06-18"), "{init}");
    assert_eq!(init["serverInfo"]["name"], json!("fsgate"), "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let root = g.dirs.abs("");
    let root = root.trim_end_matches('/');
    assert_eq!(init["_meta"]["fsgate"]["workspace"], json!(root), "{init}");
    let log = g.dirs.audit_log();
    assert_eq!(init["_meta"]["fsgate"]["auditLog"], json!(log), "{init}");
    assert!(
        init["instructions"]
            .as_str()
            .unwrap_or_default()
            .contains(root),
        "{init}"
    );

    let list = g.call(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert_eq!(names.len(), ALL_TOOLS, "{names:?}");
    for t in list["tools"].as_array().into_iter().flatten() {
        assert_eq!(t["inputSchema"]["type"], json!("object"), "{t}");
        let d = t["description"].as_str().unwrap_or_default();
        assert!(
            d.contains(root) || t["name"] == "list_allowed_directories",
            "{t}"
        );
    }
    let r = g.tool(2, "read_text_file", json!({"path": "a.txt"}));
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(text_of(&r), "hello\n");
    let r = g.tool(3, "read_text_file", json!({"path": g.dirs.abs("a.txt")}));
    assert_eq!(text_of(&r), "hello\n");
    assert!(g.finish().success(), "{}", g.stderr());
    // Every message, not only tool calls, is an audit record (notifications too).
    let ops: Vec<String> = g
        .dirs
        .audit_records()
        .iter()
        .filter(|r| r["kind"] == "request")
        .map(|r| r["op"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        ops,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "read_text_file",
            "read_text_file"
        ],
        "{ops:?}"
    );
    assert!(
        g.garbage().is_empty(),
        "stdout must carry only JSON-RPC: {:?}",
        g.garbage()
    );
}

#[test]
fn stateless_era_discover_and_requests_without_initialize() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    let d = g.call(1, "server/discover", json!({"_meta": modern_meta()}));
    let versions = d["supportedVersions"].to_string();
    assert!(
        versions.contains("2026-07-28") && versions.contains("2025-06-18"),
        "{d}"
    );
    assert!(d["capabilities"]["tools"].is_object(), "{d}");

    let list = g.call(2, "tools/list", json!({"_meta": modern_meta()}));
    assert_eq!(tool_names(&list).len(), ALL_TOOLS);
    let r = g.call(
        3,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": "a.txt"}, "_meta": modern_meta()}),
    );
    assert_eq!(text_of(&r), "hello\n", "{r}");
    assert_eq!(r["resultType"], json!("complete"), "{r}");
    // Each request stands alone: a second, with its own _meta, also works.
    let r = g.call(
        4,
        "tools/call",
        json!({"name": "stat", "arguments": {"path": "a.txt"}, "_meta": modern_meta()}),
    );
    assert_eq!(r["structuredContent"]["stat"]["size"], json!(6), "{r}");
    assert!(g.finish().success());
}

#[test]
fn request_without_handshake_or_meta_is_a_jsonrpc_error_and_the_session_survives() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "x");
    g.request(
        1,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": "a.txt"}}),
    );
    let r = g.response(1);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let init = g.initialize("2025-11-25");
    assert_eq!(init["protocolVersion"], json!("2025-11-25"));
    assert_eq!(
        text_of(&g.tool(2, "read_text_file", json!({"path": "a.txt"}))),
        "x"
    );
}

#[test]
fn refusals_are_one_line_tool_errors_naming_the_rule_and_audited() {
    let mut g = McpGate::start(None);
    g.dirs.put(".env", "API_KEY=sekrit\n");
    std::fs::write(g.dirs.outside.join("o.txt"), "OUTSIDE").expect("outside");
    g.initialize("2025-06-18");
    let outside_abs = g.dirs.outside.join("o.txt").to_string_lossy().into_owned();
    let outside_rel = format!(
        "../{}/o.txt",
        g.dirs
            .outside
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
    );
    let cases = [
        ("read_text_file", json!({"path": ".env"}), "rule "),
        (
            "read_text_file",
            json!({"path": outside_abs}),
            "workspace-boundary",
        ),
        (
            "read_text_file",
            json!({"path": outside_rel}),
            "workspace-boundary",
        ),
        (
            "write_file",
            json!({"path": "../x.txt", "content": "x"}),
            "workspace-boundary",
        ),
        ("list_directory", json!({"path": "/"}), "workspace-boundary"),
        ("read_multiple_files", json!({"paths": [".env"]}), "rule "),
    ];
    for (i, (tool, args, needle)) in cases.iter().enumerate() {
        let r = g.tool(10 + i as u64, tool, args.clone());
        assert_eq!(r["isError"], json!(true), "{tool} {args}: {r}");
        let msg = text_of(&r);
        assert!(msg.contains(needle), "{tool} {args}: {msg}");
        assert!(!msg.trim().contains('\n'), "one line: {msg:?}");
        assert!(
            !msg.contains("sekrit") && !msg.contains("OUTSIDE"),
            "no content leaks: {msg}"
        );
    }
    assert!(g.finish().success());
    let records = g.dirs.audit_records();
    let requests: Vec<&Value> = records.iter().filter(|r| r["kind"] == "request").collect();
    assert!(requests.len() >= cases.len(), "{records:?}");
    assert!(
        requests.iter().all(|r| r["transport"] == "mcp"),
        "{requests:?}"
    );
    let session = &requests[0]["session"];
    assert!(
        requests.iter().all(|r| &r["session"] == session),
        "one session per connection"
    );
    assert!(
        requests
            .iter()
            .any(|r| r["decision"] == "deny"
                && r["path"].as_str().is_some_and(|p| p.contains(".env"))),
        "the .env refusal is audited: {requests:?}"
    );
}

#[test]
fn unknown_tool_is_a_protocol_error_and_bad_arguments_a_tool_error() {
    let mut g = McpGate::start(None);
    g.initialize("2025-06-18");
    g.request(
        1,
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    let r = g.response(1);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    for (i, args) in [
        json!({}),
        json!({"path": 5}),
        json!({"path": "a", "head": "x"}),
    ]
    .into_iter()
    .enumerate()
    {
        let r = g.tool(2 + i as u64, "read_text_file", args.clone());
        assert_eq!(r["isError"], json!(true), "{args}: {r}");
        assert!(
            text_of(&r).starts_with("invalid arguments for read_text_file"),
            "{r}"
        );
    }
    g.request(9, "tools/call", json!({"name": "ls"}));
    let r = g.response(9);
    assert_eq!(
        r["result"]["isError"],
        json!(true),
        "missing arguments: {r}"
    );
    // Params of the wrong shape are a params error that says so, not "method not found".
    g.request(10, "tools/call", json!({"name": "ls", "arguments": "text"}));
    let r = g.response(10);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("tools/call"),
        "{r}"
    );
    g.request(11, "no/such/method", json!({}));
    assert_eq!(g.response(11)["error"]["code"], json!(-32601));
    // Each of these was answered without touching the workspace, and each is recorded.
    let recs = g.dirs.audit_records();
    let with = |op: &str, outcome: &str| {
        recs.iter()
            .filter(|r| r["op"] == op && r["outcome"] == outcome)
            .count()
    };
    assert_eq!(with("tools/call", "-32602"), 2, "unknown tool, bad params");
    assert_eq!(with("read_text_file", "-32602"), 3, "bad arguments");
    assert_eq!(with("ls", "-32602"), 1, "missing arguments");
    assert_eq!(with("no/such/method", "-32601"), 1);
}

#[test]
fn pipelined_calls_are_all_answered() {
    let mut g = McpGate::start(None);
    for i in 0..64 {
        g.dirs.put(&format!("f{i}.txt"), format!("content {i}\n"));
    }
    g.initialize("2025-06-18");
    for i in 0..64u64 {
        g.request(
            100 + i,
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": format!("f{i}.txt")}}),
        );
    }
    for i in 0..64u64 {
        let r = g.response(100 + i);
        assert_eq!(text_of(&r["result"]), format!("content {i}\n"), "{r}");
    }
}

/// Writes of one new file sent together all succeed (none is refused as a race on the
/// new file), and every version but the last is kept as a backup.
#[test]
fn pipelined_writes_of_one_new_file_all_succeed() {
    let mut g = McpGate::start(None);
    g.initialize("2025-06-18");
    for i in 0..16u64 {
        let args = json!({"path": "same.txt", "content": format!("v{i}")});
        g.request(
            200 + i,
            "tools/call",
            json!({"name": "write_file", "arguments": args}),
        );
    }
    for i in 0..16u64 {
        let r = g.response(200 + i);
        assert_ne!(r["result"]["isError"], json!(true), "{r}");
    }
    let last = std::fs::read_to_string(g.dirs.root.join("same.txt")).expect("same.txt");
    assert!((0..16).any(|i| last == format!("v{i}")), "{last:?}");
    let listed = std::process::Command::new(crate::common::bin())
        .args(["backup", "list", "--json", "same.txt", "--backup-dir"])
        .arg(g.dirs.state.join("backups"))
        .output()
        .expect("backup list");
    let versions = String::from_utf8_lossy(&listed.stdout).lines().count();
    assert_eq!(versions, 15, "{}", String::from_utf8_lossy(&listed.stderr));
}

#[test]
fn calls_in_flight_finish_when_stdin_closes() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "a");
    g.initialize("2025-06-18");
    for i in 0..16u64 {
        g.request(
            i + 1,
            "tools/call",
            json!({"name": "write_text_file",
            "arguments": {"path": format!("w/{i}.txt"), "content": "w"}}),
        );
    }
    let status = g.finish();
    assert!(status.success(), "{}", g.stderr());
    for i in 0..16u64 {
        let r = g
            .try_response(i + 1, Duration::from_secs(1))
            .unwrap_or_else(|| panic!("no answer to {i}"));
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        assert!(g.dirs.root.join(format!("w/{i}.txt")).is_file());
    }
}

const READONLY: &str = r#"version = 1

[[rule]]
id = "ro-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
reason = "the workspace is readable"
"#;

#[test]
fn a_read_only_policy_lists_no_mutating_tools_and_still_refuses_them_by_rule() {
    let mut g = McpGate::start(Some(READONLY));
    g.dirs.put("a.txt", "a");
    g.initialize("2025-06-18");
    let names = tool_names(&g.call(1, "tools/list", json!({})));
    for hidden in [
        "write_text_file",
        "write_file",
        "edit_file",
        "mkdir",
        "create_directory",
        "rm",
        "rename",
        "move_file",
    ] {
        assert!(
            !names.iter().any(|n| n == hidden),
            "{hidden} listed: {names:?}"
        );
    }
    assert!(names.iter().any(|n| n == "read_text_file"), "{names:?}");
    let r = g.tool(
        2,
        "write_text_file",
        json!({"path": "a.txt", "content": "b"}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text_of(&r).contains("default-deny"), "{r}");
    assert_eq!(
        std::fs::read_to_string(g.dirs.root.join("a.txt"))
            .ok()
            .as_deref(),
        Some("a")
    );
}

#[test]
fn media_files_under_a_base64_policy_and_limits_by_rule() {
    let policy = policy_with(1024, 64, "base64", "");
    let mut g = McpGate::start(Some(&policy));
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";
    g.dirs.put("p.png", png);
    g.dirs.put("blob.bin", b"\0\x01\x02");
    g.dirs.put("big.txt", "x".repeat(2000));
    g.initialize("2025-06-18");
    let r = g.tool(1, "read_media_file", json!({"path": "p.png"}));
    let block = &r["content"][0];
    assert_eq!(block["type"], json!("image"), "{r}");
    assert_eq!(block["mimeType"], json!("image/png"), "{r}");
    let data = STANDARD
        .decode(block["data"].as_str().unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(data, png);
    let r = g.tool(2, "read_media_file", json!({"path": "blob.bin"}));
    let res = &r["content"][0]["resource"];
    assert_eq!(r["content"][0]["type"], json!("resource"), "{r}");
    assert_eq!(res["mimeType"], json!("application/octet-stream"), "{r}");
    assert_eq!(
        res["uri"],
        json!(format!("file://{}", g.dirs.abs("blob.bin"))),
        "{r}"
    );

    let r = g.tool(3, "read_text_file", json!({"path": "big.txt"}));
    assert!(text_of(&r).contains("limits.max_read_bytes"), "{r}");
    let r = g.tool(
        4,
        "write_file",
        json!({"path": "w.txt", "content": "y".repeat(100)}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text_of(&r).contains("limits.max_write_bytes"), "{r}");
    assert!(!g.dirs.root.join("w.txt").exists());
}

#[test]
fn edit_list_keeps_crlf_and_is_audited_as_a_read_then_one_checked_edit() {
    let mut g = McpGate::start(None);
    g.dirs.put("c.txt", "alpha\r\nbeta\r\n");
    g.initialize("2025-06-18");
    let r = g.tool(
        1,
        "edit_file",
        json!({"path": "c.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
    );
    assert!(text_of(&r).contains("-beta\n+gamma\n"), "{r}");
    assert_eq!(
        std::fs::read_to_string(g.dirs.root.join("c.txt"))
            .ok()
            .as_deref(),
        Some("alpha\r\ngamma\r\n"),
        "CRLF kept"
    );
    assert!(g.finish().success());
    let ops: Vec<String> = g
        .dirs
        .audit_records()
        .iter()
        .filter(|r| r["kind"] == "request")
        .filter_map(|r| r["op"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        ops,
        [
            "initialize",
            "notifications/initialized",
            "read_text_file",
            "edit_text_file"
        ],
        "read, then one checked edit"
    );
}

#[test]
fn an_oversized_message_is_answered_with_an_error_and_the_session_goes_on() {
    let policy = r#"version = 1

[limits]
max_message_bytes = 4096

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
reason = "test"
"#;
    let mut g = McpGate::start(Some(policy));
    g.initialize("2025-06-18");
    let big = "z".repeat(20_000);
    g.request(
        1,
        "tools/call",
        json!({"name": "write_text_file", "arguments": {"path": "big.txt", "content": big}}),
    );
    let r = g.response(1);
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("limits.max_message_bytes") && msg.contains("4096"),
        "{msg}"
    );
    assert!(!g.dirs.root.join("big.txt").exists());
    let r = g.tool(
        2,
        "write_text_file",
        json!({"path": "small.txt", "content": "ok"}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(g.finish().success());
    assert!(g.garbage().is_empty(), "{:?}", g.garbage());
}

/// A line the client ends with a NUL is refused and recorded like any line that is not
/// JSON, and a message naming the method that stands in for an oversized one is an
/// unknown method: the client can neither hide a line nor forge an oversized record.
#[test]
fn a_client_cannot_hide_a_line_or_forge_an_oversized_record() {
    let mut g = McpGate::start(None);
    g.initialize("2025-06-18");
    g.send_line("{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\"}\u{0}");
    let r = g
        .try_null_response(Duration::from_secs(10))
        .expect("a -32700 answer");
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");
    g.request(
        5,
        "fsgate/oversized",
        json!({"bytes": "0 bytes\nFORGED: all good", "limit": 1}),
    );
    let r = g.response(5);
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    assert!(g.finish().success());
    let recs = g.dirs.audit_records();
    let invalid = recs.iter().filter(|r| r["op"] == "invalid-message");
    assert_eq!(invalid.count(), 1, "{recs:?}");
    let forged = recs.iter().filter(|r| r["op"] == "oversized-message");
    assert_eq!(forged.count(), 0, "{recs:?}");
    assert!(
        recs.iter().any(|r| r["op"] == "fsgate/oversized"),
        "the unknown method is recorded: {recs:?}"
    );
}

#[test]
fn a_line_that_is_not_json_is_answered_with_a_parse_error_and_recorded() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "hello\n");
    g.initialize("2025-06-18");
    g.send_line("this is not json {");
    let r = g
        .try_null_response(Duration::from_secs(10))
        .expect("a -32700 answer");
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");
    assert_eq!(r["id"], Value::Null, "{r}");
    // The session goes on.
    let r = g.tool(1, "read_text_file", json!({"path": "a.txt"}));
    assert_eq!(text_of(&r), "hello\n");
    assert!(g.finish().success());
    assert!(g.garbage().is_empty(), "{:?}", g.garbage());
    let recs = g.dirs.audit_records();
    assert!(
        recs.iter()
            .any(|r| r["op"] == "invalid-message" && r["outcome"] == "-32700"),
        "{recs:?}"
    );
}

#[test]
fn listings_in_the_reference_shapes_hide_secrets_and_are_one_record_each() {
    let mut g = McpGate::start(None);
    for f in [
        "src/lib.rs",
        "src/main.rs",
        "src/.env",
        "node_modules/x/y.js",
        "a/b/c/d.txt",
        ".hg/hgrc",
        ".env",
        "top.txt",
    ] {
        g.dirs.put(f, "x\n");
    }
    std::fs::create_dir(g.dirs.root.join("empty")).expect("mkdir");
    g.initialize("2025-06-18");
    let r = g.tool(
        1,
        "directory_tree",
        json!({"path": ".", "excludePatterns": ["node_modules"]}),
    );
    let file = |n: &str| json!({"name": n, "type": "file"});
    let dir = |n: &str, c: Value| json!({"name": n, "type": "directory", "children": c});
    let want = json!([
        dir(
            "a",
            json!([dir("b", json!([dir("c", json!([file("d.txt")]))]))])
        ),
        dir("empty", json!([])),
        dir("src", json!([file("lib.rs"), file("main.rs")])),
        file("top.txt"),
    ]);
    // Byte for byte what the reference server's format gives (serde_json's pretty form).
    let want = serde_json::to_string_pretty(&want).expect("json");
    assert_eq!(text_of(&r), want, "{r}");
    let r = g.tool(2, "list_directory", json!({"path": "."}));
    assert_eq!(
        text_of(&r),
        "[DIR] a\n[DIR] empty\n[DIR] node_modules\n[DIR] src\n[FILE] top.txt"
    );
    let r = g.tool(3, "list_directory", json!({"path": "empty"}));
    assert_eq!(text_of(&r), "");
    let r = g.tool(4, "directory_tree", json!({"path": "top.txt"}));
    assert_eq!(r["isError"], true, "{r}");
    let r = g.tool(5, "directory_tree", json!({"path": ".hg"}));
    assert!(text_of(&r).contains("rule secrets:"), "{r}");
    assert!(g.finish().success());
    let records = g.dirs.audit_records();
    let trees: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "tree")
        .collect();
    // One record per call, however many directories the tree holds.
    assert_eq!(trees.len(), 5, "{trees:?}");
    assert_eq!(trees[0]["path"], "");
    assert_eq!(trees[0]["args"]["exclude"], json!(["node_modules"]));
    assert_eq!(trees[0]["outcome"], "ok");
    assert_eq!(trees[1]["args"]["depth"], 1);
    assert_eq!(trees[4]["decision"], "deny");
}

/// `list_directory` lines of `dir`, sorted as answered.
fn listed(g: &mut McpGate, id: u64, dir: &str) -> Vec<String> {
    let r = g.tool(id, "list_directory", json!({ "path": dir }));
    assert_eq!(r["isError"], json!(false), "{r}");
    text_of(&r).lines().map(str::to_string).collect()
}

/// A large directory that has not changed for a while is listed from a snapshot of its
/// names; every change to it (by the gateway or from outside, an added, removed or
/// retyped entry) shows in the very next listing, and in `directory_tree`.
#[test]
fn listings_of_a_settled_large_directory_follow_every_change() {
    let mut g = McpGate::start(None);
    for i in 0..100 {
        g.dirs.put(&format!("big/f{i:03}.txt"), "x");
    }
    g.initialize("2025-06-18");
    let settle = || std::thread::sleep(Duration::from_millis(300));
    settle();
    assert_eq!(listed(&mut g, 1, "big").len(), 100);
    assert_eq!(listed(&mut g, 2, "big").len(), 100);
    g.dirs.put("big/outside.txt", "from outside");
    let l = listed(&mut g, 3, "big");
    assert!(l.contains(&"[FILE] outside.txt".to_string()), "{l:?}");
    settle();
    listed(&mut g, 4, "big");
    let w = g.tool(
        5,
        "write_file",
        json!({"path": "big/agent.txt", "content": "a"}),
    );
    assert_eq!(w["isError"], json!(false), "{w}");
    assert!(listed(&mut g, 6, "big").contains(&"[FILE] agent.txt".to_string()));
    settle();
    listed(&mut g, 7, "big");
    std::fs::remove_file(g.dirs.root.join("big/f000.txt")).expect("rm");
    std::fs::create_dir(g.dirs.root.join("big/f001.txt.d")).expect("mkdir");
    std::fs::remove_file(g.dirs.root.join("big/f001.txt")).expect("rm");
    std::fs::rename(
        g.dirs.root.join("big/f001.txt.d"),
        g.dirs.root.join("big/f001.txt"),
    )
    .expect("rename");
    let l = listed(&mut g, 8, "big");
    assert!(!l.contains(&"[FILE] f000.txt".to_string()), "{l:?}");
    assert!(l.contains(&"[DIR] f001.txt".to_string()), "{l:?}");
    assert_eq!(l.len(), 101, "{l:?}");
    settle();
    let tree = g.tool(9, "directory_tree", json!({"path": "big"}));
    std::fs::write(g.dirs.root.join("big/f001.txt/inner.txt"), "i").expect("write");
    std::fs::remove_file(g.dirs.root.join("big/f002.txt")).expect("rm");
    let after = g.tool(10, "directory_tree", json!({"path": "big"}));
    assert!(!text_of(&tree).contains("inner.txt"), "{tree}");
    assert!(text_of(&after).contains("inner.txt"), "{after}");
    assert!(text_of(&tree).contains("f002.txt"), "{tree}");
    assert!(!text_of(&after).contains("f002.txt"), "{after}");
    assert!(g.finish().success(), "{}", g.stderr());
}
