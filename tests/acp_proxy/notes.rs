//! Change notes under `fsgate acp` with the test-only agent binary (no SDK needed): the
//! `session/update` that shows the editor a write carries, for an overwrite, the text it
//! replaced (a diff without it reads as a new file in ACP), and says so in words when
//! that text is too large or not text.

use serde_json::Value;

use super::editor::{Editor, bin_agent};

/// The change notes among fsgate's lines, by the file they name (its last component).
fn notes_by_file(ed: &Editor) -> std::collections::HashMap<String, Value> {
    ed.lines()
        .into_iter()
        .filter(|v| v["method"] == "session/update")
        .map(|v| v["params"]["update"].clone())
        .filter(|u| {
            u["toolCallId"]
                .as_str()
                .is_some_and(|id| id.starts_with("fsgate-change-"))
        })
        .filter_map(|u| {
            let path = u["locations"][0]["path"].as_str()?.to_string();
            let name = path.rsplit('/').next()?.to_string();
            Some((name, u))
        })
        .collect()
}

#[test]
fn an_overwrite_is_shown_with_the_text_it_replaced() {
    let test = "acp_proxy::notes::an_overwrite_is_shown_with_the_text_it_replaced";
    let Some(agent) = bin_agent(test, &[]) else {
        return;
    };
    let mut ed = Editor::start(&agent);
    std::fs::write(ed.root.join("notes.txt"), "old line\n").expect("seed");
    std::fs::write(ed.root.join("big.txt"), "x".repeat(300 * 1024)).expect("seed");
    std::fs::write(ed.root.join("blob.txt"), [0u8, 1, 2, 3]).expect("seed");
    let sid = ed.open_session();
    let root = ed.root.display().to_string();
    let lines: Vec<String> = [
        "notes.txt new line",
        "fresh.txt hello",
        "big.txt small",
        "blob.txt text",
    ]
    .iter()
    .map(|l| format!("write {root}/{l}"))
    .collect();
    let reports = ed.prompt(&sid, &lines.join("\n"));
    assert_eq!(reports.len(), 4, "{reports:?}");
    assert!(
        reports.iter().all(|r| r.get("ok").is_some()),
        "{reports:?}\n{}",
        ed.stderr()
    );
    let notes = notes_by_file(&ed);
    let diff = |name: &str| notes.get(name).map(|u| u["content"][0].clone());
    let over = diff("notes.txt").expect("a note for notes.txt");
    assert_eq!(over["type"], "diff", "{over}");
    assert_eq!(over["oldText"], "old line\n", "{over}");
    assert_eq!(over["newText"], "new line", "{over}");
    let fresh = diff("fresh.txt").expect("a note for fresh.txt");
    assert_eq!(fresh["type"], "diff", "{fresh}");
    assert!(fresh.get("oldText").is_none_or(Value::is_null), "{fresh}");
    for (name, size, why) in [
        ("big.txt", 300 * 1024, "larger than 256 KiB"),
        ("blob.txt", 4, "not text"),
    ] {
        let u = &notes[name];
        let content = u["content"].as_array().expect("content");
        assert_eq!(content.len(), 1, "{u}");
        assert_eq!(
            content[0]["type"], "content",
            "no diff that reads as a new file: {u}"
        );
        let text = content[0]["content"]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains(&format!("({size} bytes; not shown: {why})")),
            "{text}"
        );
    }
}

/// The default policy with `extra` appended.
fn policy_with(extra: &str) -> String {
    let path = super::editor::repo().join("policies/default.toml");
    let text = std::fs::read_to_string(path).expect("default.toml");
    format!("{text}\n{extra}\n")
}

#[test]
fn a_question_before_an_overwrite_shows_the_text_it_replaces() {
    let test = "acp_proxy::notes::a_question_before_an_overwrite_shows_the_text_it_replaces";
    let Some(agent) = bin_agent(test, &[]) else {
        return;
    };
    let rule =
        "[[rule]]\nid = \"ask-notes\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\"notes/**\"]";
    let opts = super::editor::Options {
        policy_text: Some(policy_with(rule)),
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    std::fs::create_dir(ed.root.join("notes")).expect("mkdir");
    std::fs::write(ed.root.join("notes/a.txt"), "old line\n").expect("seed");
    let sid = ed.open_session();
    let root = ed.root.display().to_string();
    let text = format!("write {root}/notes/a.txt new line\nwrite {root}/notes/fresh.txt hello");
    let reports = ed.prompt(&sid, &text);
    assert!(
        reports.len() == 2 && reports.iter().all(|r| r.get("ok").is_some()),
        "{reports:?}\n{}",
        ed.stderr()
    );
    // The editor (which allows once) was asked twice; each question shows its diff.
    let diffs: Vec<Value> = ed
        .lines()
        .into_iter()
        .filter(|v| v["method"] == "session/request_permission")
        .map(|v| v["params"]["toolCall"]["content"][1].clone())
        .collect();
    assert_eq!(diffs.len(), 2, "{diffs:?}");
    assert_eq!(diffs[0]["type"], "diff", "{diffs:?}");
    assert_eq!(diffs[0]["oldText"], "old line\n", "{diffs:?}");
    assert_eq!(diffs[0]["newText"], "new line", "{diffs:?}");
    assert!(diffs[1]["oldText"].is_null(), "a new file: {diffs:?}");
    let written = std::fs::read_to_string(ed.root.join("notes/a.txt")).expect("written");
    assert_eq!(written, "new line");
}
