//! An editor that closes its input at once, with a turn under way: the agent still gets
//! fsgate's answers to the file requests of that turn, `fs/*` or calls of the hosted
//! MCP server over the ACP connection (its stdin is closed once the turn is over), then
//! ends, and fsgate with it.

use std::time::Duration;

use serde_json::json;

use super::editor::{Editor, bin_agent};

#[test]
fn the_agent_gets_its_file_answers_after_the_editor_closed_its_input() {
    let test =
        "acp_proxy::closing::the_agent_gets_its_file_answers_after_the_editor_closed_its_input";
    answers_after_close(test, &[], "read", "acp");
}

#[test]
fn the_agent_gets_its_mcp_answers_over_acp_after_the_editor_closed_its_input() {
    let test = "acp_proxy::closing::the_agent_gets_its_mcp_answers_over_acp_after_the_editor_closed_its_input";
    answers_after_close(test, &["--mcp", "acp"], "mcp-read", "acp-mcp");
}

/// Two reads by `command` in a prompt the editor closes its input right after: both
/// are answered, and recorded under `transport`.
fn answers_after_close(test: &str, args: &[&str], command: &str, transport: &str) {
    let Some(agent) = bin_agent(test, args) else {
        return;
    };
    let mut ed = Editor::start(&agent);
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    let sid = ed.open_session();
    let a = ed.root.join("a.txt").display().to_string();
    let start = ed.line_count();
    let text = format!("{command} {a}\n{command} {a}");
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    );
    ed.close_stdin();
    let reports = ed.finish_prompt(&sid, &id, start);
    assert_eq!(reports.len(), 2, "{reports:?}\nstderr:\n{}", ed.stderr());
    for r in &reports {
        let content = match transport {
            "acp" => &r["ok"]["content"],
            _ => &r["ok"]["content"][0]["text"],
        };
        assert_eq!(content, "inside\n", "{reports:?}\nstderr:\n{}", ed.stderr());
    }
    let status = ed.wait_exit(Duration::from_secs(20)).expect("fsgate exits");
    assert!(status.success(), "{status:?}\nstderr:\n{}", ed.stderr());
    let reads = ed
        .audit_records()
        .into_iter()
        .filter(|r| r["op"] == "read_text_file" && r["transport"] == transport)
        .filter(|r| r["decision"] == "allow")
        .count();
    assert_eq!(reads, 2);
}

/// Issue 57: an agent that ends on its input's end while a process it started still
/// holds its stdout (Gemini CLI's relaunched child did) does not keep fsgate waiting
/// for that stdout: fsgate exits promptly with the agent's status, and the process the
/// agent left is ended with its tree.
#[test]
fn fsgate_ends_when_the_agent_exits_though_its_child_keeps_its_stdout() {
    // `read` ends at the closed input; `sleep` keeps the shell's stdout open.
    let agent: Vec<std::ffi::OsString> = ["sh", "-c", "sleep 60 & read line; exit 3"]
        .iter()
        .map(Into::into)
        .collect();
    let mut ed = Editor::start(&agent);
    ed.close_stdin();
    let closed = std::time::Instant::now();
    let status = ed.wait_exit(Duration::from_secs(4));
    let status = status.unwrap_or_else(|| {
        panic!(
            "fsgate still runs {:?} after its agent exited\nstderr:\n{}",
            closed.elapsed(),
            ed.stderr()
        )
    });
    assert_eq!(status.code(), Some(3), "stderr:\n{}", ed.stderr());
}
