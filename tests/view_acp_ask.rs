//! `ask` rules under `fsgate acp --confine-agent`: a process of the agent's reading
//! through the view is asked about at the editor, as the agent's file tools are, with
//! ACP's `session/request_permission` in the session the editor opened (docs/agents.md).
//! Here the agent is a shell that answers `session/new` itself and then runs `cat`.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp_proxy::editor::{Editor, Options, Permission};
use crate::common::view::ask_policy;

/// The session the shell agent names in its answer to `session/new`.
const SESSION: &str = "sess-view-ask";

/// `fsgate acp --confine-agent -- sh -c ...` whose shell reads the workspace's path,
/// answers the editor's `session/new` for each of `sessions` (in turn, named so), waits
/// for the editor's next line (a go, or a `session/prompt` in `prompt_in`), then runs
/// `cat asked.txt`, its output on fsgate's stderr. The editor answers permission
/// requests as `permission` says. Returns once fsgate ended.
fn cat_asked(
    permission: Permission,
    timeout_secs: u32,
    sessions: &[&str],
    prompt_in: Option<&str>,
) -> Editor {
    let (_cwd_dir, cwd) = crate::common::canonical_tempdir("fsgate-acp-ask-cwd");
    let mut open = String::new();
    for (n, sid) in sessions.iter().enumerate() {
        open.push_str(&format!(
            "read req; echo '{{\"jsonrpc\":\"2.0\",\"id\":\"new-{n}\",\"result\":{{\"sessionId\":\"{sid}\"}}}}'; "
        ));
    }
    if !sessions.is_empty() {
        open.push_str("read go; ");
    }
    let script =
        format!("read root; cd \"$root\" || exit 9; {open}cat asked.txt >&2; echo cat=$? >&2");
    let agent: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    let opts = Options {
        confine: true,
        cwd: Some(cwd),
        policy_text: Some(ask_policy(timeout_secs)),
        permission,
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    let root = ed.root.clone();
    std::fs::write(root.join("asked.txt"), "the answer\n").expect("seed");
    ed.send_raw(&root.to_string_lossy());
    for (n, sid) in sessions.iter().enumerate() {
        let id = json!(format!("new-{n}"));
        let params = json!({"cwd": root, "mcpServers": []});
        ed.request_with_id(id.clone(), "session/new", params);
        let resp = ed.response(&id);
        assert_eq!(resp["result"]["sessionId"], *sid, "{resp}");
    }
    match prompt_in {
        Some(sid) => {
            let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "cat it"}]});
            ed.request_with_id(json!("prompt-1"), "session/prompt", prompt);
        }
        None if !sessions.is_empty() => ed.send_raw("go"),
        None => {}
    }
    let status = ed.wait_exit(Duration::from_secs(60));
    assert!(status.is_some(), "the agent did not end\n{}", ed.stderr());
    ed
}

/// The record of the shell's open of `asked.txt`.
fn open_record(ed: &Editor) -> Value {
    let records = ed.audit_records();
    records
        .iter()
        .find(|r| r["kind"] == "request" && r["op"] == "open" && r["path"] == "asked.txt")
        .cloned()
        .unwrap_or_else(|| panic!("no open record: {records:#?}\n{}", ed.stderr()))
}

/// The `session/request_permission` requests the editor got.
fn questions(ed: &Editor) -> Vec<Value> {
    ed.lines()
        .into_iter()
        .filter(|l| l["method"] == "session/request_permission")
        .collect()
}

/// The one question the editor got: in `session`, naming the path, the rule and the
/// process that asked (`cat`).
fn the_question(ed: &Editor, session: &str) -> Value {
    let asked = questions(ed);
    assert_eq!(asked.len(), 1, "{asked:#?}\n{}", ed.stderr());
    let q = asked[0]["params"].clone();
    assert_eq!(q["sessionId"], session, "{q}");
    let call = &q["toolCall"];
    let abs = ed.root.join("asked.txt");
    assert_eq!(
        call["locations"][0]["path"],
        abs.to_string_lossy().as_ref(),
        "{q}"
    );
    assert!(
        call["title"]
            .as_str()
            .is_some_and(|t| t.ends_with("asked.txt")),
        "{q}"
    );
    let texts = call["content"].as_array().cloned().unwrap_or_default();
    let text: Vec<&str> = (texts.iter())
        .filter_map(|c| c["content"]["text"].as_str())
        .collect();
    let text = text.join("\n");
    assert!(text.contains("ask-asked"), "{q}");
    let process = call["_meta"]["fsgate"]["process"]
        .as_str()
        .unwrap_or_default();
    assert!(process.contains("pid ") && process.contains("cat"), "{q}");
    assert!(text.contains(process), "the person reads the process: {q}");
    q
}

#[test]
fn view_acp_the_shells_ask_is_put_to_the_editor_and_allowed() {
    let ed = cat_asked(Permission::Kind("allow_once"), 60, &[SESSION], None);
    let stderr = ed.stderr();
    assert!(
        stderr.contains("the answer") && stderr.contains("cat=0"),
        "{stderr}"
    );
    the_question(&ed, SESSION);
    let open = open_record(&ed);
    assert_eq!(open["decision"], "allow", "{open}");
    assert_eq!(
        open["details"]["asked"][0]["answer"], "allow_once",
        "{open}"
    );
    assert_eq!(open["details"]["asked"][0]["rule"], "ask-asked", "{open}");
}

#[test]
fn view_acp_the_shells_ask_rejected_at_the_editor_is_eacces() {
    let ed = cat_asked(Permission::Kind("reject_once"), 60, &[SESSION], None);
    let stderr = ed.stderr();
    assert!(
        stderr.contains("Permission denied") && stderr.contains("cat=1"),
        "{stderr}"
    );
    assert!(!stderr.contains("the answer"), "{stderr}");
    the_question(&ed, SESSION);
    let open = open_record(&ed);
    assert_eq!(
        open["details"]["asked"][0]["answer"], "reject_once",
        "{open}"
    );
    assert_ne!(open["outcome"], "ok", "{open}");
}

#[test]
fn view_acp_the_shells_ask_unanswered_by_the_editor_times_out_with_eacces() {
    let started = Instant::now();
    let ed = cat_asked(Permission::Ignore, 1, &[SESSION], None);
    let stderr = ed.stderr();
    assert!(
        stderr.contains("Permission denied") && stderr.contains("cat=1"),
        "{stderr}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
    the_question(&ed, SESSION);
    let open = open_record(&ed);
    assert_eq!(open["details"]["asked"][0]["answer"], "timeout", "{open}");
}

/// Before the editor opened a session there is nowhere to ask: refused at once, and
/// the record says why.
#[test]
fn view_acp_the_shells_ask_before_any_session_is_refused_and_says_why() {
    let ed = cat_asked(Permission::First, 60, &[], None);
    let stderr = ed.stderr();
    assert!(
        stderr.contains("Permission denied") && stderr.contains("cat=1"),
        "{stderr}"
    );
    assert!(questions(&ed).is_empty(), "{:#?}", questions(&ed));
    let open = open_record(&ed);
    let asked = &open["details"]["asked"][0];
    assert_eq!(asked["answer"], "unanswered", "{open}");
    let note = asked["note"].as_str().unwrap_or_default();
    assert!(note.contains("no ACP session"), "{open}");
}

/// With two sessions open, the question goes to the one the editor last prompted in
/// (the turn the agent's shell serves), not merely the last opened.
#[test]
fn view_acp_the_shells_ask_goes_to_the_session_last_prompted() {
    let ed = cat_asked(
        Permission::Kind("allow_once"),
        60,
        &["sess-a", "sess-b"],
        Some("sess-a"),
    );
    let stderr = ed.stderr();
    assert!(
        stderr.contains("the answer") && stderr.contains("cat=0"),
        "{stderr}"
    );
    the_question(&ed, "sess-a");
}
