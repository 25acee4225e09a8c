//! The relay from the agent to the editor passes only exactly one unambiguous message
//! naming no file or terminal method: every spelling an editor could take for one
//! (case, whitespace, escapes, full-width letters, a member named twice or in capitals,
//! a batch, a method that is not a string) is answered by fsgate with an error, recorded,
//! and never reaches the editor (the raw-JSON fake agent sends the lines).

use serde_json::{Value, json};

use super::raw::{prompt, raw_editor, session};

/// Marks the probes' params: no error message repeats params, so an editor line holding
/// it means a probe reached the editor.
const MARK: &str = "probeMarker";

#[test]
fn file_method_look_alikes_never_reach_the_editor() {
    let Some(mut ed) = raw_editor("file_method_look_alikes_never_reach_the_editor") else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "AAA\n").expect("seed");
    let sid = session(&mut ed);
    let path = ed.root.join("a.txt");
    let params = json!({"sessionId": sid, "path": path, MARK: 1}).to_string();
    let with = |id: u32, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"sessionId": sid, "path": path, MARK: 1}})
            .to_string()
    };
    // (line, id, error code)
    let probes: Vec<(String, u32, i64)> = vec![
        (with(21, "FS/read_text_file"), 21, -32003),
        (with(22, " fs/read_text_file"), 22, -32003),
        (with(23, "fs/read_text_file\t"), 23, -32003),
        (with(24, "Fs/Write_Text_File"), 24, -32003),
        (with(25, "\u{FF46}\u{FF53}/read_text_file"), 25, -32003),
        (with(26, "_FSGATE/read_file"), 26, -32003),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":27,"method":"fs\/read_text_file","params":{params}}}"#
            ),
            27,
            -32003,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":28,"method":"session/x","method":"fs/read_text_file","params":{params}}}"#
            ),
            28,
            -32600,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":29,"method":"fs/read_text_file","method":"session/x","params":{params}}}"#
            ),
            29,
            -32600,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":30,"id":31,"method":"session/x","params":{params}}}"#
            ),
            30,
            -32600,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":32,"method":"session/x","METHOD":"fs/read_text_file","params":{params}}}"#
            ),
            32,
            -32600,
        ),
        (
            format!(
                r#"[{{"jsonrpc":"2.0","id":33,"method":"fs/read_text_file","params":{params}}}]"#
            ),
            33,
            -32600,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":34,"method":["fs/read_text_file"],"params":{params}}}"#
            ),
            34,
            -32600,
        ),
    ];
    let mut lines: Vec<String> = probes.iter().map(|(l, _, _)| l.clone()).collect();
    let ids: Vec<u32> = probes.iter().map(|(_, id, _)| *id).collect();
    lines.push(format!("!wait {} 4000", json!(ids)));
    let report = prompt(&ed, &sid, json!(12), &lines);
    for (line, id, code) in &probes {
        let got = &report["responses"][id.to_string()];
        assert_eq!(got["error"]["code"], *code, "{line}\n{report}");
        assert!(got.get("result").is_none(), "{line}: {got}");
    }
    for line in ed.raw_lines() {
        assert!(!line.contains(MARK), "the editor received a probe: {line}");
    }
    // Each refused line is one audit record, under the probe's session.
    let refusals: Vec<Value> = ed
        .audit_records()
        .into_iter()
        .filter(|r| {
            r["kind"] == "request" && (r["outcome"] == "-32600" || r["outcome"] == "-32003")
        })
        .collect();
    assert_eq!(refusals.len(), probes.len(), "{refusals:#?}");
    assert!(
        refusals.iter().all(|r| r["session"] == sid.as_str()),
        "{refusals:#?}"
    );
}

#[test]
fn other_messages_still_relay_byte_for_byte() {
    let Some(mut ed) = raw_editor("other_messages_still_relay_byte_for_byte") else {
        return;
    };
    let sid = session(&mut ed);
    let request = format!(
        r#"{{"id":40,  "jsonrpc":"2.0","method":"session/request_permission","params":{{"sessionId":"{sid}","n":12345678901234567890123,"x":1.50,"toolCall":{{"toolCallId":"t"}},"options":[{{"optionId":"yes","name":"Yes","kind":"allow_once"}}]}}}}"#
    );
    let note = r#"{"jsonrpc":"2.0","method":"_vendor/fs-like","params":{"a":"fs/read_text_file","s":"\u00e9\/"}}"#;
    let lines = [
        request.clone(),
        note.to_string(),
        "!wait [40] 4000".to_string(),
    ];
    let report = prompt(&ed, &sid, json!(13), &lines);
    assert_eq!(
        report["responses"]["40"]["result"]["outcome"]["optionId"], "yes",
        "{report}"
    );
    let raw = ed.raw_lines();
    assert!(raw.contains(&request), "{raw:#?}");
    assert!(raw.iter().any(|l| l == note), "{raw:#?}");
}

/// The agent's answer to `initialize` reaches the editor with fsgate's own
/// `_meta.fsgate` (where the audit log is, the policy, the sandbox), the agent's other
/// `_meta` kept; the editor learns them from fsgate, not from the agent.
#[test]
fn the_initialize_answer_carries_fsgates_own_meta() {
    let Some(mut ed) = raw_editor("the_initialize_answer_carries_fsgates_own_meta") else {
        return;
    };
    let result = ed.initialize(true, true);
    let meta = &result["_meta"];
    assert!(
        meta["clientCapabilities"].is_object(),
        "agent's _meta kept: {result}"
    );
    let log = meta["fsgate"]["auditLog"].as_str().unwrap_or_default();
    assert_eq!(
        std::path::Path::new(log),
        ed.state.join("audit.jsonl"),
        "{result}"
    );
    assert!(meta["fsgate"]["backupDir"].is_string(), "{result}");
    assert!(meta["fsgate"]["sandbox"].is_object(), "{result}");
}
