//! The ACP proxy's door (issue 29, point 3): an agent's requests carrying 2 MiB each,
//! in a path, a method name, a session id, an extension name, a parameter name or value,
//! are recorded and answered bounded, as on the other doors (tests/audit_bounds.rs).

use std::time::Duration;

use serde_json::{Value, json};

use super::editor::Editor;
use super::raw::{raw_editor, session};
use crate::audit_bounds::{REQUESTS, big, check_door, cut_records, dir_bytes};

/// Sends a prompt of raw agent lines (request ids `ids`) and returns the responses the
/// agent got, by id (null when its report did not come: answers too long for the
/// relay): a long wait, since every line is 2 MiB.
fn responses(ed: &Editor, sid: &str, prompt_id: u64, lines: &[String], ids: &[u64]) -> Value {
    let mut text = lines.join("\n");
    text.push_str(&format!("\n!wait {} 60000", json!(ids)));
    let start = ed.line_count();
    let id = json!(prompt_id);
    ed.request_with_id(
        id.clone(),
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    );
    ed.response_within(&id, Duration::from_secs(120));
    match ed.finish_prompt(sid, &id, start).into_iter().next() {
        Some(report) => report["responses"].clone(),
        None => {
            eprintln!("no report of the answers; stderr:\n{:.2000}", ed.stderr());
            Value::Null
        }
    }
}

#[test]
fn two_mib_fields_through_the_proxy_are_recorded_and_answered_bounded() {
    let Some(mut ed) =
        raw_editor("two_mib_fields_through_the_proxy_are_recorded_and_answered_bounded")
    else {
        return;
    };
    std::fs::write(ed.root.join("f.txt"), "one line\n").expect("seed");
    let sid = session(&mut ed);
    let file = ed.root.join("f.txt").display().to_string();
    let before = dir_bytes(&ed.state);
    let mut answers = Vec::new();
    for round in 0..REQUESTS / 6 {
        let c = char::from(b'a' + round as u8);
        let req = |id: u64, method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
        };
        let base = 100 * (round as u64 + 1);
        let ids: Vec<u64> = (base..base + 6).collect();
        let long_path = ed.root.join(big(c)).display().to_string();
        let lines = [
            req(
                ids[0],
                "fs/read_text_file",
                json!({"sessionId": sid, "path": long_path}),
            ),
            req(
                ids[1],
                &format!("fs/{}", big(c)),
                json!({"sessionId": sid, "path": file}),
            ),
            req(
                ids[2],
                "fs/read_text_file",
                json!({"sessionId": big(c), "path": file}),
            ),
            req(
                ids[3],
                &format!("_fsgate/{}", big(c)),
                json!({"sessionId": sid}),
            ),
            req(
                ids[4],
                "_fsgate/stat",
                json!({"sessionId": sid, "path": file, big(c): 1}),
            ),
            req(
                ids[5],
                "fs/read_text_file",
                json!({"sessionId": sid, "path": file, "line": big(c)}),
            ),
        ];
        let got = responses(&ed, &sid, 1000 + round as u64, &lines, &ids);
        for id in &ids {
            if let Some(answer) = got.get(id.to_string()) {
                answers.push(answer.to_string().len());
            }
        }
    }
    check_door("acp proxy", &ed.state, before, &answers);
    assert!(
        cut_records(&ed.state.join("audit.jsonl")) >= 12,
        "long fields cut"
    );
}
