//! An editor that closes its input at once, with a turn under way: the agent still gets
//! fsgate's answers to the file requests of that turn (its stdin is closed once the turn
//! is over), then ends, and fsgate with it.

use std::time::Duration;

use super::editor::{Editor, bin_agent};

#[test]
fn the_agent_gets_its_file_answers_after_the_editor_closed_its_input() {
    let test =
        "acp_proxy::closing::the_agent_gets_its_file_answers_after_the_editor_closed_its_input";
    let Some(agent) = bin_agent(test, &[]) else {
        return;
    };
    let mut ed = Editor::start(&agent);
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    let sid = ed.open_session();
    let a = ed.root.join("a.txt").display().to_string();
    let start = ed.line_count();
    let id = ed.request(
        "session/prompt",
        serde_json::json!({"sessionId": sid, "prompt": [{"type": "text", "text": format!("read {a}\nread {a}")}]}),
    );
    ed.close_stdin();
    let reports = ed.finish_prompt(&sid, &id, start);
    assert_eq!(reports.len(), 2, "{reports:?}\nstderr:\n{}", ed.stderr());
    for r in &reports {
        assert_eq!(
            r["ok"]["content"],
            "inside\n",
            "{reports:?}\nstderr:\n{}",
            ed.stderr()
        );
    }
    let status = ed.wait_exit(Duration::from_secs(20)).expect("fsgate exits");
    assert!(status.success(), "{status:?}\nstderr:\n{}", ed.stderr());
    let reads = ed
        .audit_records()
        .into_iter()
        .filter(|r| {
            r["op"] == "read_text_file" && r["transport"] == "acp" && r["decision"] == "allow"
        })
        .count();
    assert_eq!(reads, 2);
}
