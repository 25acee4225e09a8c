//! fast-agent (PyPI `fast-agent-mcp`, optional third peer) behind `fsgate acp`: a real
//! agent product, driven without a model service by its `passthrough` model, where a
//! prompt `***CALL_TOOL name {json}` becomes one real tool call.
//!
//! fast-agent registers its read_text_file/write_text_file tools only if `initialize`
//! advertised the matching fs capability, so a working tool call also proves it saw
//! the policy's flags rather than the editor's. It needs ~5 s to start.

use std::time::Duration;

use serde_json::{Value, json};

use super::editor::{Editor, Options, Peer, methods_of, repo};

/// fast-agent imports a lot before it answers `initialize`.
pub(super) const STARTUP: Duration = Duration::from_secs(30);

/// Starts fsgate hosting fast-agent with a private `--home`, initialized with the
/// given (wrong) fs capabilities and one session in the workspace.
fn start(
    test: &str,
    opts: Options,
    read: bool,
    write: bool,
) -> Option<(Editor, String, tempfile::TempDir)> {
    let mut cmd = Peer::FastAgent.command_or_skip(test)?;
    let home = tempfile::tempdir().expect("tempdir");
    cmd.push("--home".into());
    cmd.push(home.path().into());
    let mut ed = Editor::launch(&cmd, opts);
    let id = ed.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": read, "writeTextFile": write}}}),
    );
    let init = ed.response_within(&id, STARTUP);
    assert!(
        init.get("result").is_some(),
        "{init}\nstderr:\n{}",
        ed.stderr()
    );
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    Some((ed, sid, home))
}

/// One tool call; returns the stop reason and the session updates of the turn.
pub(super) fn call_tool(
    ed: &mut Editor,
    sid: &str,
    tool: &str,
    args: Value,
) -> (String, Vec<Value>) {
    let start = ed.line_count();
    let text = format!("***CALL_TOOL {tool} {args}");
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    );
    let resp = ed.response(&id);
    let stop = resp["result"]["stopReason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let updates = ed
        .lines()
        .into_iter()
        .skip(start)
        .filter(|v| v["method"] == "session/update" && v["params"]["sessionId"] == sid)
        .map(|v| v["params"]["update"].clone())
        .collect();
    (stop, updates)
}

/// The final status and output text of the turn's tool call.
pub(super) fn tool_outcome(updates: &[Value]) -> (String, String) {
    let last = updates
        .iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_some())
        .unwrap_or_else(|| panic!("no tool call status in {updates:?}"));
    let text = last["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let raw = last["rawOutput"].as_str().map(str::to_string);
    (
        last["status"].as_str().unwrap_or_default().to_string(),
        raw.unwrap_or(text),
    )
}

fn assert_editor_saw_no_file_requests(ed: &Editor) {
    for line in ed.lines() {
        for m in methods_of(&line) {
            assert!(
                !(m.starts_with("fs/") || m.starts_with("_fsgate/")),
                "the editor received {m}: {line}"
            );
        }
    }
}

#[test]
fn fast_agent_reads_writes_and_is_refused() {
    let Some((mut ed, sid, _home)) = start(
        "fast_agent_reads_writes_and_is_refused",
        Options::default(),
        false,
        false,
    ) else {
        return;
    };
    std::fs::write(ed.root.join("f.txt"), "one\ntwo\nthree\nfour\n").expect("seed");
    std::fs::write(ed.root.join(".env"), "TOKEN=hunter2\n").expect("seed");
    std::fs::write(ed.outside.join("o.txt"), "OUTSIDE\n").expect("seed");
    let r = ed.root.display().to_string();

    let (stop, ups) = call_tool(
        &mut ed,
        &sid,
        "read_text_file",
        json!({"path": format!("{r}/f.txt"), "line": 2, "limit": 2}),
    );
    assert_eq!(stop, "end_turn", "{ups:?}");
    assert_eq!(
        tool_outcome(&ups),
        ("completed".into(), "two\nthree\n".into())
    );

    let (stop, ups) = call_tool(
        &mut ed,
        &sid,
        "write_text_file",
        json!({"path": format!("{r}/new.txt"), "content": "by fast-agent\n"}),
    );
    assert_eq!(stop, "end_turn", "{ups:?}");
    assert_eq!(tool_outcome(&ups).0, "completed", "{ups:?}");
    assert_eq!(
        std::fs::read_to_string(ed.root.join("new.txt")).expect("new.txt"),
        "by fast-agent\n"
    );

    // fast-agent shows its model only the error message: it must name the rule.
    let (_, ups) = call_tool(
        &mut ed,
        &sid,
        "read_text_file",
        json!({"path": format!("{r}/.env")}),
    );
    let (status, text) = tool_outcome(&ups);
    assert_eq!(status, "failed", "{ups:?}");
    assert!(
        text.contains("secrets:dotenv") && !text.contains("hunter2"),
        "{text}"
    );

    let outside = ed.outside.join("o.txt");
    let (_, ups) = call_tool(&mut ed, &sid, "read_text_file", json!({"path": outside}));
    let (status, text) = tool_outcome(&ups);
    assert_eq!(status, "failed", "{ups:?}");
    assert!(
        text.contains("refused") && !text.contains("OUTSIDE\n"),
        "{text}"
    );
    assert_editor_saw_no_file_requests(&ed);
}

#[test]
fn fast_agent_gets_no_write_tool_under_the_readonly_policy() {
    let opts = Options {
        policy: Some(repo().join("policies/readonly.toml")),
        ..Default::default()
    };
    let Some((mut ed, sid, _home)) = start(
        "fast_agent_gets_no_write_tool_under_the_readonly_policy",
        opts,
        true,
        true,
    ) else {
        return;
    };
    std::fs::write(ed.root.join("f.txt"), "one\n").expect("seed");
    let r = ed.root.display().to_string();
    let (stop, ups) = call_tool(
        &mut ed,
        &sid,
        "read_text_file",
        json!({"path": format!("{r}/f.txt")}),
    );
    assert_eq!(stop, "end_turn", "{ups:?}");
    assert_eq!(tool_outcome(&ups), ("completed".into(), "one\n".into()));
    // The editor offered writing; fsgate told the agent it cannot, so it has no tool.
    let (stop, ups) = call_tool(
        &mut ed,
        &sid,
        "write_text_file",
        json!({"path": format!("{r}/w.txt"), "content": "x"}),
    );
    assert!(!ed.root.join("w.txt").exists(), "{ups:?}");
    assert_eq!(stop, "refusal", "{ups:?}");
    assert!(
        ups.iter().all(|u| u["sessionUpdate"] != "tool_call"),
        "fast-agent ran a write tool it should not have: {ups:?}"
    );
    assert_editor_saw_no_file_requests(&ed);
}
