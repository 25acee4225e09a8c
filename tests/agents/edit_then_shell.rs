//! The core agent loop under `fsgate acp --confine-agent`: the agent's shell reads a
//! file (so the kernel holds its name, size and pages), the agent's file tool (the
//! server `fsgate acp` hosts) rewrites it longer, and the shell reads it again in the
//! same turn: the whole new content, not the old size's worth of it (docs/run.md,
//! "What the kernel keeps").

use std::time::Duration;

use serde_json::{Value, json};

use super::scenario::{Agent, launch, open_session};

const OLD: &str = "v1\n";
const NEW: &str = "version two of app.txt, much longer than the first one\n";

/// Runs the three steps through `agent`'s shell tool `tool` (in session mode `mode`,
/// if any) and its hosted `write_text_file`, and checks the second read.
pub fn edit_then_shell(agent: &Agent, (tool, mode): (&str, Option<&str>), args: fn(&str) -> Value) {
    let (mut ed, fake, _stub) = launch(agent, true);
    let root = ed.root.clone();
    std::fs::write(root.join("app.txt"), OLD).expect("seed");
    let sid = open_session(&mut ed, agent);
    if let Some(mode) = mode {
        let id = ed.request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        );
        let resp = ed.response_within(&id, Duration::from_secs(30));
        assert!(resp["error"].is_null(), "{}: set_mode: {resp}", agent.name);
    }
    // `stat` after the read leaves the kernel's attributes of app.txt fresh, so the
    // next `cat`'s `fstat` is answered from them (as after Claude Code's own lookups).
    let cat = |marker: &str| {
        args(&format!(
            "echo {marker}; cat app.txt; stat app.txt >/dev/null"
        ))
    };
    let write = json!({"path": root.join("app.txt"), "content": NEW});
    let steps = json!({"steps": [
        [{"tool": tool, "args": cat("FIRST-READ")}],
        [{"mcp": "write_text_file", "args": write}],
        [{"tool": tool, "args": cat("SECOND-READ")}],
    ]});
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": format!("FSGATE-STEP {steps}")}]}),
    );
    let resp = ed.response_within(&id, Duration::from_secs(180));
    let name = agent.name;
    assert_eq!(
        resp["result"]["stopReason"],
        "end_turn",
        "{name}: {resp}\n{}",
        ed.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("app.txt"))
            .ok()
            .as_deref(),
        Some(NEW)
    );
    let results: Vec<String> = fake
        .main_requests()
        .iter()
        .flat_map(|r| r["received"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["text"].as_str().map(str::to_owned))
        .collect();
    let result = |marker: &str| {
        results
            .iter()
            .find(|t| t.contains(marker) && !t.contains("echo"))
            .cloned()
            .unwrap_or_else(|| panic!("{name}: no {marker} result: {results:#?}\n{}", ed.stderr()))
    };
    assert!(
        result("FIRST-READ").contains(OLD.trim()),
        "{name}: {results:#?}"
    );
    let second = result("SECOND-READ");
    assert!(
        second.contains(NEW.trim()),
        "{name}: the shell read app.txt as it was before the file tool's write: {second:?}"
    );
}
