//! Extras with the raw-JSON fake agent (tests/peers/acp/raw_agent.py): chosen ids of
//! both JSON types, disguised file requests; and an agent that ignores stdin EOF (the
//! test-only agent binary, tests/bin/acp_agent.rs).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::editor::{Editor, Peer, bin_agent, methods_of};

pub(super) fn raw_editor(test: &str) -> Option<Editor> {
    let cmd = Peer::Raw.command_or_skip(test)?;
    Some(Editor::start(&cmd))
}

/// Starts a session with explicit editor ids 10 and 11, keeping 0 free for the prompt.
pub(super) fn session(ed: &mut Editor) -> String {
    ed.request_with_id(json!(10), "initialize", json!({"protocolVersion": 1}));
    ed.response(&json!(10));
    let root = ed.root.clone();
    ed.request_with_id(
        json!(11),
        "session/new",
        json!({"cwd": root, "mcpServers": []}),
    );
    ed.response(&json!(11))["result"]["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Sends a prompt of raw lines with editor id `id` and returns the agent's report.
pub(super) fn prompt(ed: &Editor, sid: &str, id: Value, lines: &[String]) -> Value {
    let text = lines.join("\n");
    let start = ed.line_count();
    ed.request_with_id(
        id.clone(),
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    );
    let reports = ed.finish_prompt(sid, &id, start);
    reports
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no report\nstderr:\n{}", ed.stderr()))
}

fn fs_read(id: Value, sid: &str, path: &std::path::Path) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "fs/read_text_file", "params": {"sessionId": sid, "path": path}})
        .to_string()
}

#[test]
fn initialize_without_capabilities_gets_the_policys() {
    let Some(mut ed) = raw_editor("initialize_without_capabilities_gets_the_policys") else {
        return;
    };
    let init = ed.call(
        "initialize",
        json!({"protocolVersion": 1, "clientInfo": {"name": "bare"}}),
    );
    assert_eq!(
        init["_meta"]["clientCapabilities"]["fs"],
        json!({"readTextFile": true, "writeTextFile": true}),
        "{init}"
    );
}

/// The editor's prompt has id 0 while the agent's requests `0` and `"0"` (to fsgate) and
/// `1` (a permission request to the editor) are in flight.
#[test]
fn equal_ids_of_both_types_in_flight_both_ways() {
    let Some(mut ed) = raw_editor("equal_ids_of_both_types_in_flight_both_ways") else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "AAA\n").expect("seed");
    std::fs::write(ed.root.join("b.txt"), "BBB\n").expect("seed");
    let sid = session(&mut ed);
    let permission = json!({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": {
        "sessionId": sid, "toolCall": {"toolCallId": "t"},
        "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}]}});
    let report = prompt(
        &ed,
        &sid,
        json!(0),
        &[
            fs_read(json!(0), &sid, &ed.root.join("a.txt")),
            fs_read(json!("0"), &sid, &ed.root.join("b.txt")),
            permission.to_string(),
            r#"!wait [0, "0", 1] 4000"#.to_string(),
        ],
    );
    let got = &report["responses"];
    assert_eq!(got["0"]["result"]["content"], "AAA\n", "{report}");
    assert_eq!(got["0"]["id"], json!(0));
    assert_eq!(got["\"0\""]["result"]["content"], "BBB\n", "{report}");
    assert_eq!(
        got["\"0\""]["id"],
        json!("0"),
        "string id echoed as a string"
    );
    assert_eq!(got["1"]["result"]["outcome"]["optionId"], "yes", "{report}");

    let lines = ed.lines();
    let zero: Vec<&Value> = lines
        .iter()
        .filter(|v| v.get("id") == Some(&json!(0)))
        .collect();
    assert_eq!(zero.len(), 1, "{zero:?}");
    assert_eq!(zero[0]["result"]["stopReason"], "end_turn");
    assert!(
        lines.iter().all(|v| v.get("id") != Some(&json!("0"))),
        "{lines:?}"
    );
}

/// Messages naming fs/* that are not well-formed requests (no "jsonrpc", wrong
/// version, notification, batch, object id) must not reach the editor: lenient editors
/// (the Python SDK ignores "jsonrpc") would serve them.
#[test]
fn disguised_file_requests_never_reach_the_editor() {
    let Some(mut ed) = raw_editor("disguised_file_requests_never_reach_the_editor") else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "AAA\n").expect("seed");
    let sid = session(&mut ed);
    let a = ed.root.join("a.txt");
    let write = |extra: Value| {
        let mut m = json!({"method": "fs/write_text_file",
            "params": {"sessionId": sid, "path": ed.root.join("c.txt"), "content": "x"}});
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        m.to_string()
    };
    let read = |extra: Value| {
        let mut m = json!({"method": "fs/read_text_file", "params": {"sessionId": sid, "path": a}});
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        m.to_string()
    };
    let lines = [
        read(json!({"id": 5})),
        write(json!({"jsonrpc": "1.0", "id": 6})),
        write(json!({"jsonrpc": "2.0"})),
        format!("[{}]", read(json!({"jsonrpc": "2.0", "id": 7}))),
        read(json!({"jsonrpc": "2.0", "id": {"x": 1}})),
        json!({"jsonrpc": "2.0", "method": "terminal/create", "params": {"sessionId": sid, "command": "id"}}).to_string(),
        "!wait [5, 6] 3000".to_string(),
    ];
    let report = prompt(&ed, &sid, json!(12), &lines);
    for id in ["5", "6"] {
        assert_eq!(report["responses"][id]["error"]["code"], -32600, "{report}");
    }
    for line in ed.lines() {
        for m in methods_of(&line) {
            assert!(
                !(m.starts_with("fs/") || m.starts_with("_fsgate/") || m.starts_with("terminal/")),
                "the editor received {m}: {line}"
            );
        }
    }
    assert!(!ed.root.join("c.txt").exists());
}

#[test]
fn agent_ignoring_eof_is_killed_after_the_grace_period() {
    let test = "agent_ignoring_eof_is_killed_after_the_grace_period";
    let Some(agent) = bin_agent(test, &["--ignore-eof"]) else {
        return;
    };
    let mut ed = Editor::start(&agent);
    session(&mut ed);
    let start = Instant::now();
    ed.close_stdin();
    let Some(status) = ed.wait_exit(Duration::from_secs(9)) else {
        panic!(
            "fsgate did not end an agent that ignores EOF\nstderr:\n{}",
            ed.stderr()
        );
    };
    let took = start.elapsed();
    // Killed after the 5 s grace: the documented status (`acp --help`), not the
    // signal's 128 + 9, and one line on stderr that says what happened.
    let stderr = ed.stderr();
    assert_eq!(status.code(), Some(124), "{status:?}\n{stderr}");
    assert!(
        took >= Duration::from_secs(4),
        "killed without a grace period: {took:?}"
    );
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("still running 5 s after its input ended"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("killed it (exit 124)"), "{stderr}");
    let help = crate::common::run_cli(&["acp", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("124 when the editor closed fsgate's input"),
        "{help}"
    );
    // The audit log says why the agent ended.
    let exit = ed
        .audit_records()
        .into_iter()
        .rfind(|r| r["kind"] == "agent-exit");
    let exit = exit.expect("an agent-exit record");
    assert_eq!(exit["details"]["stoppedBy"], "end-of-input", "{exit}");
}

#[test]
fn raw_agent_exit_status_becomes_fsgates() {
    let Some(mut ed) = raw_editor("raw_agent_exit_status_becomes_fsgates") else {
        return;
    };
    let sid = session(&mut ed);
    ed.request_with_id(
        json!(12),
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "!exit 3"}]}),
    );
    let Some(status) = ed.wait_exit(Duration::from_secs(4)) else {
        panic!(
            "fsgate still running 4 s after its agent exited (editor stdin still open)\nstderr:\n{}",
            ed.stderr()
        );
    };
    assert_eq!(status.code(), Some(3), "{status:?}");
}

#[test]
fn session_load_opens_file_access_for_that_session_only() {
    let Some(ed) = raw_editor("session_load_opens_file_access_for_that_session_only") else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "AAA\n").expect("seed");
    ed.request_with_id(json!(10), "initialize", json!({"protocolVersion": 1}));
    ed.response(&json!(10));
    let root = ed.root.clone();
    ed.request_with_id(
        json!(11),
        "session/load",
        json!({"sessionId": "loaded-1", "cwd": root, "mcpServers": []}),
    );
    assert!(ed.response(&json!(11)).get("result").is_some());
    let a = ed.root.join("a.txt");
    let lines = [
        fs_read(json!(5), "loaded-1", &a),
        fs_read(json!(6), "never-created", &a),
        "!wait [5, 6] 3000".to_string(),
    ];
    let report = prompt(&ed, "loaded-1", json!(12), &lines);
    assert_eq!(
        report["responses"]["5"]["result"]["content"], "AAA\n",
        "{report}"
    );
    let refused = &report["responses"]["6"]["error"];
    assert_eq!(refused["code"], -32003, "{report}");
    assert_eq!(refused["data"]["rule"], "acp-session", "{report}");
}

#[test]
fn terminal_requests_reach_the_editor_only_when_the_policy_allows_them() {
    for allow in [false, true] {
        let Some(cmd) = Peer::Raw.command_or_skip("terminal_requests_reach_the_editor") else {
            return;
        };
        let policy = format!(
            "version = 1\n[acp]\nallow_terminal = {allow}\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n"
        );
        let mut ed = Editor::launch(
            &cmd,
            super::editor::Options {
                policy_text: Some(policy),
                ..Default::default()
            },
        );
        let sid = session(&mut ed);
        let lines = [
            json!({"jsonrpc": "2.0", "id": 5, "method": "terminal/create",
                "params": {"sessionId": sid, "command": "id"}})
            .to_string(),
            "!wait [5] 3000".to_string(),
        ];
        let report = prompt(&ed, &sid, json!(12), &lines);
        let reached = ed
            .lines()
            .iter()
            .any(|l| methods_of(l).iter().any(|m| m == "terminal/create"));
        assert_eq!(reached, allow, "allow_terminal = {allow}: {report}");
        let err = &report["responses"]["5"]["error"];
        if allow {
            // The editor answered it (the test editor serves no terminal).
            assert_eq!(err["code"], -32601, "{report}");
        } else {
            assert_eq!(err["code"], -32003, "{report}");
            assert_eq!(err["data"]["rule"], "acp.allow_terminal", "{report}");
        }
        // Audited either way.
        assert!(
            ed.audit_records()
                .iter()
                .any(|r| r["op"] == "terminal/create"),
            "allow_terminal = {allow}"
        );
    }
}
