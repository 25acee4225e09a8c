//! `ask` rules and change notes under `fsgate acp`, with real peers on both sides: the
//! Python ACP SDK's client (tests/peers/acp/editor.py) is the editor, answering fsgate's
//! `session/request_permission` as told, and the Python SDK agent (agent.py) writes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::editor::repo;

/// A policy: reads allowed, writes under `ci/` asked, other writes allowed.
fn policy(extra: &str) -> String {
    format!(
        r#"version = 1
{extra}
[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = ["ci/**"]
reason = "CI configuration is reviewed"

[[rule]]
id = "all"
effect = "allow"
ops = ["read", "write", "list", "delete"]
paths = ["**"]
reason = "the workspace"
"#
    )
}

/// What one run of the SDK editor saw, and the workspace it ran in.
struct Run {
    out: Value,
    root: PathBuf,
    records: Vec<Value>,
    dirs: [tempfile::TempDir; 2],
}

/// Runs the SDK editor hosting `fsgate acp -- agent.py` under `policy`, sending
/// `prompts` (with `{root}` replaced) and answering permission requests with `answers`.
fn run(test: &str, policy: &str, prompts: &[&str], answers: &[&str]) -> Option<Run> {
    let python = repo().join(".peers/acp/bin/python");
    if !python.exists() {
        crate::common::skip_or_fail(
            test,
            "the Python ACP SDK peer is missing: run ./scripts/install-peers.sh",
        );
        return None;
    }
    let ws = tempfile::tempdir().expect("workspace");
    let state = tempfile::tempdir().expect("state dir");
    let root = ws.path().canonicalize().expect("canonical root");
    std::fs::create_dir_all(root.join("ci")).expect("mkdir ci");
    std::fs::write(state.path().join("policy.toml"), policy).expect("write policy");
    let agent = repo().join("tests/peers/acp/agent.py");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let command = vec![
        env!("CARGO_BIN_EXE_fsgate").to_string(),
        "acp".into(),
        "--workspace".into(),
        s(&root),
        "--policy".into(),
        s(&state.path().join("policy.toml")),
        "--audit-log".into(),
        s(&state.path().join("audit.jsonl")),
        "--backup-dir".into(),
        s(&state.path().join("backups")),
        "--".into(),
        s(&python),
        s(&agent),
    ];
    let prompts: Vec<String> = prompts
        .iter()
        .map(|p| p.replace("{root}", &s(&root)))
        .collect();
    let config = json!({"command": command, "cwd": root, "prompts": prompts, "answers": answers});
    let cfg = state.path().join("editor.json");
    std::fs::write(&cfg, config.to_string()).expect("write editor config");
    let output = Command::new(&python)
        .arg(repo().join("tests/peers/acp/editor.py"))
        .arg(&cfg)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run the SDK editor");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "SDK editor failed: {}\nstderr:\n{stderr}",
        output.status
    );
    let out: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("SDK editor output: {e}\nstderr:\n{stderr}"));
    let text = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap_or_default();
    let records = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    Some(Run {
        out,
        root,
        records,
        dirs: [ws, state],
    })
}

impl Run {
    fn reports(&self) -> &Vec<Value> {
        self.out["reports"].as_array().expect("reports")
    }

    fn permissions(&self) -> &Vec<Value> {
        self.out["permissions"].as_array().expect("permissions")
    }

    fn updates(&self) -> &Vec<Value> {
        self.out["updates"].as_array().expect("updates")
    }

    /// The `details.asked` of the audit records of writes to `rel`, in order.
    fn asked(&self, rel: &str) -> Vec<Value> {
        self.records
            .iter()
            .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file" && r["path"] == rel)
            .map(|r| r["details"]["asked"].clone())
            .collect()
    }

    fn file(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }
}

fn ok(report: &Value) -> bool {
    report.get("ok").is_some() && report.get("error").is_none()
}

#[test]
fn allow_once_asks_the_editor_with_a_diff_and_writes() {
    let test = "acp_proxy::ask::allow_once_asks_the_editor_with_a_diff_and_writes";
    let prompts =
        ["write {root}/ci/build.yml on: push\nwrite {root}/ci/build.yml on: pull_request"];
    let Some(r) = run(test, &policy(""), &prompts, &["allow_once", "allow_once"]) else {
        return;
    };
    assert!(r.reports().iter().all(ok), "{:#}", r.out);
    assert_eq!(r.file("ci/build.yml").as_deref(), Some("on: pull_request"));
    // Allow once: asked again for the second write.
    let perms = r.permissions();
    assert_eq!(perms.len(), 2, "{:#}", r.out);
    let call = &perms[0]["toolCall"];
    let abs = r.root.join("ci/build.yml").to_string_lossy().into_owned();
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["status"], "pending");
    assert!(call["title"].as_str().unwrap().contains(&abs), "{call}");
    assert_eq!(call["locations"][0]["path"], abs.as_str());
    let diff = call["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "diff")
        .expect("diff");
    assert_eq!(diff["path"], abs.as_str());
    assert_eq!(diff["newText"], "on: push");
    assert!(diff.get("oldText").is_none_or(Value::is_null), "{diff}");
    let kinds: Vec<&str> = perms[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    let asked = r.asked("ci/build.yml");
    assert_eq!(asked.len(), 2);
    for a in &asked {
        assert_eq!(a[0]["rule"], "ask-ci");
        assert_eq!(a[0]["answer"], "allow_once");
        assert_eq!(a[0]["class"], "write");
    }
    // Both changes were shown to the editor, each with its diff.
    let shown: Vec<&Value> = r
        .updates()
        .iter()
        .filter(|u| u["update"]["status"] == "completed")
        .collect();
    assert_eq!(shown.len(), 2, "{:#}", r.out);
    let u = &shown[1]["update"];
    assert!(
        u["toolCallId"]
            .as_str()
            .unwrap()
            .starts_with("fsgate-change-")
    );
    assert_eq!(u["kind"], "edit");
    assert_eq!(u["locations"][0]["path"], abs.as_str());
    assert_eq!(u["content"][0]["type"], "diff");
    assert_eq!(u["content"][0]["newText"], "on: pull_request");
    // An overwrite: the diff has the text it replaced (without, ACP reads a new file).
    assert_eq!(u["content"][0]["oldText"], "on: push");
}

#[test]
fn allow_always_holds_for_the_session() {
    let test = "acp_proxy::ask::allow_always_holds_for_the_session";
    let prompts = ["write {root}/ci/a.yml one\nwrite {root}/ci/b.yml two"];
    let Some(r) = run(test, &policy(""), &prompts, &["allow_always"]) else {
        return;
    };
    assert!(r.reports().iter().all(ok), "{:#}", r.out);
    assert_eq!(
        r.permissions().len(),
        1,
        "the second write asks nothing: {:#}",
        r.out
    );
    assert_eq!(r.file("ci/a.yml").as_deref(), Some("one"));
    assert_eq!(r.file("ci/b.yml").as_deref(), Some("two"));
    assert_eq!(r.asked("ci/a.yml")[0][0]["answer"], "allow_always");
    assert_eq!(r.asked("ci/b.yml")[0][0]["answer"], "allowed_for_session");
}

#[test]
fn reject_and_cancel_refuse_naming_the_rule() {
    let test = "acp_proxy::ask::reject_and_cancel_refuse_naming_the_rule";
    let prompts =
        ["write {root}/ci/a.yml one\nwrite {root}/ci/b.yml two\nwrite {root}/free.txt free"];
    let Some(r) = run(test, &policy(""), &prompts, &["reject_once", "cancel"]) else {
        return;
    };
    let reports = r.reports();
    assert_eq!(reports.len(), 3, "{:#}", r.out);
    for rep in &reports[..2] {
        let msg = rep["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("the person asked said no"), "{rep}");
        assert_eq!(rep["error"]["data"]["rule"], "ask-ci", "{rep}");
    }
    assert!(
        ok(&reports[2]),
        "an allowed write asks nothing: {}",
        reports[2]
    );
    assert_eq!(r.permissions().len(), 2);
    assert_eq!(r.file("ci/a.yml"), None);
    assert_eq!(r.file("ci/b.yml"), None);
    assert_eq!(r.asked("ci/a.yml")[0][0]["answer"], "reject_once");
    assert_eq!(r.asked("ci/b.yml")[0][0]["answer"], "reject_once");
    // Only the one change made was shown.
    let shown: Vec<&Value> = r
        .updates()
        .iter()
        .filter(|u| u["update"]["status"] == "completed")
        .collect();
    assert_eq!(shown.len(), 1, "{:#}", r.out);
    assert!(
        shown[0]["update"]["locations"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("/free.txt")
    );
}

#[test]
fn an_ignored_question_times_out_and_refuses() {
    let test = "acp_proxy::ask::an_ignored_question_times_out_and_refuses";
    let pol = policy("[ask]\ntimeout_secs = 1\n");
    let prompts = ["write {root}/ci/a.yml one\nwrite {root}/free.txt free"];
    let Some(r) = run(test, &pol, &prompts, &["ignore"]) else {
        return;
    };
    let reports = r.reports();
    let msg = reports[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("no answer within 1 s"), "{}", reports[0]);
    // The editor and agent kept talking while the question waited, and after it.
    assert!(ok(&reports[1]), "{}", reports[1]);
    assert_eq!(r.file("ci/a.yml"), None);
    assert_eq!(r.asked("ci/a.yml")[0][0]["answer"], "timeout");
}

#[test]
fn notify_acp_false_shows_no_changes() {
    let test = "acp_proxy::ask::notify_acp_false_shows_no_changes";
    let pol = policy("[notify]\nacp = false\n");
    let prompts = ["write {root}/free.txt free\nwrite {root}/ci/a.yml one"];
    let Some(r) = run(test, &pol, &prompts, &["allow_once"]) else {
        return;
    };
    assert!(r.reports().iter().all(ok), "{:#}", r.out);
    assert_eq!(r.file("free.txt").as_deref(), Some("free"));
    assert_eq!(
        r.permissions().len(),
        1,
        "asking does not depend on [notify]"
    );
    assert!(r.updates().is_empty(), "no change notes: {:#}", r.out);
}

#[test]
fn edits_and_deletes_are_asked_and_shown_with_their_kinds() {
    let test = "acp_proxy::ask::edits_and_deletes_are_asked_and_shown_with_their_kinds";
    let pol = policy(
        "[[rule]]\nid = \"ask-locks\"\neffect = \"ask\"\nops = [\"delete\"]\npaths = [\"locks/**\"]\nreason = \"lock files\"\n",
    );
    let prompts = [
        "write {root}/free.txt alpha beta\nwrite {root}/locks/x.lock held",
        "ext fsgate/edit_text_file {\"path\": \"{root}/free.txt\", \"oldText\": \"beta\", \"newText\": \"gamma\"}\next fsgate/rm {\"path\": \"{root}/locks/x.lock\"}",
    ];
    let Some(r) = run(test, &pol, &prompts, &["allow_once"]) else {
        return;
    };
    assert!(r.reports().iter().all(ok), "{:#}", r.out);
    assert_eq!(r.file("free.txt").as_deref(), Some("alpha gamma"));
    assert_eq!(r.file("locks/x.lock"), None);
    // Only the delete asked (the edit is outside ci/).
    let perms = r.permissions();
    assert_eq!(perms.len(), 1, "{:#}", r.out);
    assert_eq!(perms[0]["toolCall"]["kind"], "delete");
    let updates = r.updates();
    let by_op = |op: &str| {
        updates
            .iter()
            .map(|u| &u["update"])
            .find(|u| u["_meta"]["fsgate"]["op"] == op)
            .unwrap_or_else(|| panic!("no change note for {op}: {:#}", r.out))
    };
    let edit = by_op("edit_text_file");
    assert_eq!(edit["kind"], "edit");
    assert_eq!(edit["content"][0]["oldText"], "beta");
    assert_eq!(edit["content"][0]["newText"], "gamma");
    let rm = by_op("rm");
    assert_eq!(rm["kind"], "delete");
    assert!(
        rm["locations"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("/locks/x.lock")
    );
}

#[test]
fn the_editor_leaving_leaves_the_question_unanswered() {
    let test = "acp_proxy::ask::the_editor_leaving_leaves_the_question_unanswered";
    let prompts = ["write {root}/ci/a.yml one"];
    let Some(r) = run(test, &policy(""), &prompts, &["exit"]) else {
        return;
    };
    assert_eq!(r.permissions().len(), 1, "{:#}", r.out);
    // fsgate outlives the editor by the agent's grace period: wait for its record.
    let log = r.dirs[1].path().join("audit.jsonl");
    let deadline = std::time::Instant::now() + super::editor::TIMEOUT;
    let asked = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["kind"] == "request" && v["path"] == "ci/a.yml");
        if let Some(v) = found {
            break v["details"]["asked"][0].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no record of the write:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(asked["answer"], "unanswered", "{asked}");
    assert!(
        asked["note"]
            .as_str()
            .unwrap_or_default()
            .contains("editor closed"),
        "{asked}"
    );
    assert_eq!(r.file("ci/a.yml"), None);
}
