//! Issue 17 under MCP: an `ask` rule is put to the person through elicitation
//! (`elicitation/create`) when the client declared it, and refused with the reason when
//! it did not; each change is told as an `info` log message once the client set a
//! logging level, unless `[notify] mcp = false`. Driven by the official MCP Python SDK
//! 1.x (tests/peers/mcp/ask_v1.py) and on the wire.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp_harness::{Dirs, McpGate, TIMEOUT, text_of};

/// Writes under ci/ ask; everything else is allowed.
fn policy(extra: &str) -> String {
    format!(
        r#"version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "list", "write", "delete"]
paths = ["**"]
reason = "the workspace"

[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = ["ci/**"]
reason = "CI configuration needs a look"
{extra}"#
    )
}

/// Which SDK: 1.x, or 2.x (its initialize-handshake session).
#[derive(Clone, Copy)]
enum Sdk {
    V1,
    V2,
}

fn python(sdk: Sdk) -> Option<PathBuf> {
    let (var, venv) = match sdk {
        Sdk::V1 => ("FSGATE_MCP1_PYTHON", "mcp1"),
        Sdk::V2 => ("FSGATE_MCP2_PYTHON", "mcp2"),
    };
    let py = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(".peers/{venv}/bin/python"))
    });
    py.exists().then_some(py)
}

/// Runs ask_v1.py with `sdk` in `mode` on fresh directories; None if skipped.
fn drive(
    (test, sdk): (&str, Sdk),
    mode: &str,
    policy: &str,
    log_wait: &str,
) -> Option<(Value, Dirs)> {
    let Some(py) = python(sdk) else {
        let why = "no Python for it: set FSGATE_MCP1_PYTHON / FSGATE_MCP2_PYTHON or run ./scripts/install-peers.sh";
        crate::common::skip_or_fail(test, why);
        return None;
    };
    let dirs = Dirs::new();
    dirs.put("ci/README", "ci\n");
    let file = dirs.state.join("policy.toml");
    std::fs::write(&file, policy).expect("policy");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/mcp/ask_v1.py");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let out = std::process::Command::new(&py)
        .arg(script)
        .args([
            "--mode",
            mode,
            "--policy",
            &s(&file),
            "--log-wait",
            log_wait,
        ])
        .args(["--bin", env!("CARGO_BIN_EXE_fsgate")])
        .args(["--workspace", &s(&dirs.root), "--state", &s(&dirs.state)])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run the Python driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(77) {
        crate::common::skip_or_fail(test, stdout.trim());
        return None;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{err}");
    let last = stdout.lines().last().unwrap_or_default();
    let summary = serde_json::from_str(last).expect("summary");
    Some((summary, dirs))
}

/// The `details.asked` of the request record of the call on `rel`.
fn asked(dirs: &Dirs, rel: &str) -> Value {
    let recs = dirs.audit_records();
    let rec = recs
        .iter()
        .find(|r| r["kind"] == "request" && r["path"] == rel)
        .unwrap_or_else(|| panic!("no request record for {rel}: {recs:#?}"));
    rec["details"]["asked"].clone()
}

/// The paths the log messages name, in order, and each message's shape checked.
fn logged(summary: &Value) -> Vec<String> {
    let logs = summary["logs"].as_array().cloned().unwrap_or_default();
    for l in &logs {
        assert_eq!(l["level"], "info", "{l}");
        assert_eq!(l["logger"], "fsgate", "{l}");
        assert!(l["data"]["seq"].is_u64(), "the audit seq: {l}");
        assert!(l["data"]["op"].is_string(), "{l}");
    }
    logs.iter()
        .map(|l| l["data"]["path"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_python_sdk_1x_client_answers_elicitation() {
    let test = "a_python_sdk_1x_client_answers_elicitation";
    if let Some((r, dirs)) = drive((test, Sdk::V1), "elicit", &policy(""), "20") {
        check_answers(&r, &dirs);
        check_logs(&r, &dirs);
    }
}

#[test]
fn a_python_sdk_2x_client_answers_elicitation() {
    let test = "a_python_sdk_2x_client_answers_elicitation";
    if let Some((r, dirs)) = drive((test, Sdk::V2), "elicit", &policy(""), "20") {
        check_answers(&r, &dirs);
        check_logs(&r, &dirs);
    }
}

/// The elicit scenario's answers were followed, its questions and records say so.
fn check_answers(r: &Value, dirs: &Dirs) {
    let calls = &r["calls"];
    for ok in [
        "notes.txt",
        "ci/yes.yml",
        "ci/yes-sdk.yml",
        "ci/always.yml",
        "ci/again.yml",
    ] {
        assert_eq!(calls[ok]["error"], json!(false), "{ok}: {r}");
        // notes.txt was renamed at the end.
        let on_disk = if ok == "notes.txt" { "notes2.txt" } else { ok };
        assert!(dirs.root.join(on_disk).exists(), "{ok} written");
    }
    for no in ["ci/no.yml", "ci/no-sdk.yml"] {
        let text = calls[no]["text"].as_str().unwrap_or_default();
        assert_eq!(calls[no]["error"], json!(true), "{no}: {r}");
        assert!(
            text.contains("rule ask-ci") && text.contains("said no"),
            "{text}"
        );
        assert!(!dirs.root.join(no).exists(), "{no} not written");
    }
    // Asked once per call on ci/, both paths into the server; not for notes.txt, and not
    // again once allowed for the session.
    let asked_about: Vec<String> = r["asked"]
        .as_array()
        .map(|a| a.iter().map(|q| q["message"].to_string()).collect())
        .unwrap_or_default();
    assert_eq!(asked_about.len(), 5, "{asked_about:#?}");
    let names = [
        "yes.yml",
        "no.yml",
        "yes-sdk.yml",
        "no-sdk.yml",
        "always.yml",
    ];
    for (m, name) in asked_about.iter().zip(names) {
        assert!(m.contains(&format!("ci/{name}`?")), "{name}: {m}");
        assert!(
            m.contains("Rule `ask-ci`") && m.contains("may the agent write"),
            "{m}"
        );
    }
    assert!(
        asked_about[0].contains("> ok: 1"),
        "the proposed text: {}",
        asked_about[0]
    );
    let schema = &r["asked"][0]["schema"];
    assert_eq!(schema["required"], json!(["decision"]), "{schema}");
    assert_eq!(
        schema["properties"]["decision"]["default"], "reject_once",
        "{schema}"
    );

    let one = |rel: &str| asked(dirs, rel)[0].clone();
    let (yes, no, always) = (one("ci/yes.yml"), one("ci/no.yml"), one("ci/always.yml"));
    assert_eq!(yes["answer"], "allow_once", "{yes}");
    assert_eq!(yes["rule"], "ask-ci", "{yes}");
    assert!(
        yes["askedAt"].is_string() && yes["answeredAt"].is_string(),
        "{yes}"
    );
    assert_eq!(no["answer"], "reject_once", "{no}");
    assert_eq!(always["answer"], "allow_always", "{always}");
    assert_eq!(one("ci/again.yml")["answer"], "allowed_for_session");
    assert!(
        asked(dirs, "notes.txt").is_null(),
        "nobody asked for notes.txt"
    );
}

/// The elicit scenario's changes were told as log messages.
fn check_logs(r: &Value, dirs: &Dirs) {
    // One info message per change, after setLevel; none for the refused writes.
    let root = dirs.root.display();
    let paths = logged(r);
    let want: Vec<String> = ["notes.txt", "ci/yes.yml", "ci/yes-sdk.yml", "ci/always.yml"]
        .iter()
        .chain(&["ci/again.yml", "notes.txt"])
        .map(|p| format!("{root}/{p}"))
        .collect();
    let mut got = paths.clone();
    got.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got, want_sorted, "{r}");
    let rename = r["logs"]
        .as_array()
        .and_then(|l| l.iter().find(|m| m["data"]["op"] == "rename"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        rename["data"]["path2"],
        format!("{root}/notes2.txt"),
        "{rename}"
    );
    assert_eq!(
        r["logging"],
        json!(true),
        "the logging capability is declared"
    );
}

#[test]
fn a_python_sdk_client_without_elicitation_is_refused_with_the_reason() {
    let test = "a_python_sdk_client_without_elicitation_is_refused_with_the_reason";
    let Some((r, dirs)) = drive((test, Sdk::V1), "plain", &policy(""), "20") else {
        return;
    };
    let text = r["calls"]["ci/yes.yml"]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(r["calls"]["ci/yes.yml"]["error"], json!(true), "{r}");
    assert!(
        text.contains("rule ask-ci")
            && text.contains("nobody could be asked")
            && text.contains("did not declare the `elicitation` capability"),
        "{text}"
    );
    assert!(!dirs.root.join("ci/yes.yml").exists());
    let a = asked(&dirs, "ci/yes.yml")[0].clone();
    assert_eq!(a["answer"], "unanswered", "{a}");
    assert!(
        a["note"]
            .as_str()
            .is_some_and(|n| n.contains("elicitation")),
        "{a}"
    );
    // Before setLevel nothing was told; after it, the marker's change.
    let root = dirs.root.display();
    assert_eq!(logged(&r), vec![format!("{root}/marker.txt")], "{r}");
}

#[test]
fn no_change_notes_when_the_policy_turns_them_off() {
    let test = "no_change_notes_when_the_policy_turns_them_off";
    let off = policy("[notify]\nmcp = false\n");
    let Some((r, dirs)) = drive((test, Sdk::V1), "elicit", &off, "2") else {
        return;
    };
    assert_eq!(r["calls"]["ci/yes.yml"]["error"], json!(false), "{r}");
    assert!(dirs.root.join("notes2.txt").exists(), "the rename ran");
    assert_eq!(r["logs"], json!([]), "{r}");
}

/// A gate with the ask policy (`timeout_secs`), initialized declaring elicitation.
fn asking_gate(timeout_secs: u32) -> McpGate {
    let mut g = McpGate::start(Some(&policy(&format!(
        "[ask]\ntimeout_secs = {timeout_secs}\n"
    ))));
    g.dirs.put("ci/README", "ci\n");
    g.dirs.put("notes.txt", "notes\n");
    g.initialize_with("2025-06-18", json!({"elicitation": {}}));
    g
}

fn write_args(g: &McpGate, rel: &str) -> Value {
    json!({"name": "write_file", "arguments": {"path": g.dirs.abs(rel), "content": "x: 1\n"}})
}

#[test]
fn the_reader_keeps_going_while_a_question_waits_and_silence_times_out() {
    let mut g = asking_gate(1);
    g.request(1, "tools/call", write_args(&g, "ci/a.yml"));
    let q = g
        .server_request("elicitation/create", TIMEOUT)
        .unwrap_or_else(|| panic!("no elicitation/create; stderr:\n{}", g.stderr()));
    assert_eq!(q["params"]["mode"], "form", "{q}");
    // While it waits, other messages are read and answered, reads included.
    g.call(2, "ping", json!({}));
    let read = g.tool(
        3,
        "read_text_file",
        json!({"path": g.dirs.abs("notes.txt")}),
    );
    assert_eq!(text_of(&read), "notes\n");
    let r = g.response(1);
    let text = text_of(&r["result"]);
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(
        text.contains("no answer within 1 s") && text.contains("rule ask-ci"),
        "{text}"
    );
    assert_eq!(asked(&g.dirs, "ci/a.yml")[0]["answer"], "timeout");
    assert!(g.finish().success());
}

#[test]
fn an_answer_on_the_wire_allows_and_a_closed_connection_leaves_it_unanswered() {
    let mut g = asking_gate(60);
    g.request(1, "tools/call", write_args(&g, "ci/a.yml"));
    let q = g
        .server_request("elicitation/create", TIMEOUT)
        .unwrap_or_else(|| panic!("no elicitation/create; stderr:\n{}", g.stderr()));
    let answer = json!({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "accept", "content": {"decision": "allow_once"}}});
    g.send_line(&answer.to_string());
    assert_eq!(g.response(1)["result"]["isError"], json!(false));
    assert!(g.dirs.root.join("ci/a.yml").exists());
    // Asked again (allowed once only); the client leaves instead of answering.
    g.request(2, "tools/call", write_args(&g, "ci/b.yml"));
    g.server_request("elicitation/create", TIMEOUT)
        .unwrap_or_else(|| panic!("no second elicitation/create; stderr:\n{}", g.stderr()));
    assert!(g.finish().success(), "{}", g.stderr());
    let a = asked(&g.dirs, "ci/b.yml")[0].clone();
    assert_eq!(a["answer"], "unanswered", "{a}");
    assert!(
        a["note"].as_str().is_some_and(|n| n.contains("closed")),
        "{a}"
    );
    assert!(!g.dirs.root.join("ci/b.yml").exists());
}

#[test]
fn a_question_about_a_read_holds_up_no_other_read() {
    let extra = r#"
[[rule]]
id = "ask-private"
effect = "ask"
ops = ["read"]
paths = ["private/**"]
reason = "private notes"
"#;
    let mut g = McpGate::start(Some(&policy(extra)));
    g.dirs.put("private/p.txt", "private\n");
    g.dirs.put("notes.txt", "notes\n");
    g.initialize_with("2025-06-18", json!({"elicitation": {}}));
    let private =
        json!({"name": "read_text_file", "arguments": {"path": g.dirs.abs("private/p.txt")}});
    g.request(1, "tools/call", private);
    let q = g
        .server_request("elicitation/create", TIMEOUT)
        .unwrap_or_else(|| panic!("no elicitation/create; stderr:\n{}", g.stderr()));
    assert!(
        q["params"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("may the agent read")),
        "{q}"
    );
    // Quick reads usually share one batch thread: this one must not wait behind the
    // question (the question is answered only after it).
    let read = g.tool(
        2,
        "read_text_file",
        json!({"path": g.dirs.abs("notes.txt")}),
    );
    assert_eq!(text_of(&read), "notes\n");
    let answer = json!({"jsonrpc": "2.0", "id": q["id"], "result": {"action": "accept", "content": {"decision": "allow_once"}}});
    g.send_line(&answer.to_string());
    assert_eq!(text_of(&g.response(1)["result"]), "private\n");
    assert!(g.finish().success());
}

#[test]
fn a_client_that_takes_url_elicitation_only_is_not_sent_a_form() {
    let mut g = McpGate::start(Some(&policy("")));
    g.dirs.put("ci/README", "ci\n");
    g.initialize_with("2025-06-18", json!({"elicitation": {"url": {}}}));
    let r = g.call(1, "tools/call", write_args(&g, "ci/a.yml"));
    let text = text_of(&r);
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text.contains("URL elicitation only") && text.contains("rule ask-ci"),
        "{text}"
    );
    assert!(
        g.server_request("elicitation/create", std::time::Duration::ZERO)
            .is_none()
    );
    assert!(g.finish().success());
}
