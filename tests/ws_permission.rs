//! `ask` rules on the WebSocket files channel: the real `fsgate serve --transport ws`
//! puts a `permission` question to the connection whose request met the rule, and the
//! harness's Rust client answers it, refuses, or stays silent.

use std::path::Path;

use serde_json::{Value, json};

use crate::ws_harness::{WsClient, WsGate};

const INVALID_PARAMS: i64 = -32602;
const REFUSED: i64 = -32003;
const LIMIT: i64 = -32004;

/// Reads and writes allowed everywhere, but writes under `.github/` ask a person.
fn policy(extra: &str) -> String {
    format!(
        r#"version = 1
{extra}

[[rule]]
id = "workspace-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]

[[rule]]
id = "workspace-write"
effect = "allow"
ops = ["write", "delete"]
paths = ["**"]

[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = [".github/**"]
reason = "CI configuration runs with the repository's secrets"
"#
    )
}

fn setup(root: &Path) {
    std::fs::create_dir_all(root.join(".github")).expect("mkdir .github");
}

/// The audit record of request `path` written by `op`, the last one.
fn record_of(gate: &WsGate, path: &str) -> Value {
    let records = gate.audit_requests();
    records
        .iter()
        .rev()
        .find(|r| {
            r["path"].as_str().is_some_and(|p| p.ends_with(path))
                && r["details"]["asked"].is_array()
        })
        .cloned()
        .unwrap_or_else(|| panic!("no record with details.asked for {path}: {records:#?}"))
}

/// Replies `answer` to the question `q`.
fn reply(c: &mut WsClient, q: &Value, answer: &str) {
    let msg = json!({
        "channel": "files",
        "type": "permission",
        "requestId": q["requestId"],
        "answer": answer,
    });
    c.send_text(&msg.to_string());
}

#[test]
fn allow_once_lets_one_write_through_and_the_record_says_who_allowed_it() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = gate.client();
    let id = c.send(
        "write",
        json!({"path": "/.github/ci.yml", "content": "on: push\n"}),
    );
    let q = c.next_question();
    assert_eq!(q["channel"], "files", "{q}");
    let d = &q["data"];
    assert_eq!(d["op"], "write", "{q}");
    assert_eq!(d["path"], "/.github/ci.yml", "{q}");
    assert_eq!(d["rule"], "ask-ci", "{q}");
    assert_eq!(
        d["reason"], "CI configuration runs with the repository's secrets",
        "{q}"
    );
    assert!(
        d["title"]
            .as_str()
            .is_some_and(|t| t.contains("/.github/ci.yml")),
        "{q}"
    );
    assert_eq!(
        d["options"],
        json!(["allow_once", "allow_always", "reject_once"]),
        "{q}"
    );
    assert_eq!(d["diff"]["newText"], "on: push\n", "{q}");
    assert_eq!(d["diff"]["oldText"], Value::Null, "{q}");
    assert_eq!(d["request"]["requestId"], id, "{q}");
    // Not written before the answer.
    assert!(!gate.root.join(".github/ci.yml").exists());
    // A malformed answer is an error, and the question still waits.
    let bad = json!({"channel": "files", "type": "permission", "requestId": q["requestId"], "answer": "yes please"});
    c.send_text(&bad.to_string());
    let err = c.answer(&q["requestId"]);
    assert_eq!(err["errorInfo"]["code"], INVALID_PARAMS, "{err}");
    reply(&mut c, &q, "allow_once");
    let done = c.answer(&id);
    assert!(done.get("data").is_some(), "{done}");
    assert_eq!(
        std::fs::read_to_string(gate.root.join(".github/ci.yml")).expect("written"),
        "on: push\n"
    );
    let rec = record_of(&gate, ".github/ci.yml");
    let asked = &rec["details"]["asked"][0];
    assert_eq!(asked["answer"], "allow_once", "{rec}");
    assert_eq!(asked["rule"], "ask-ci", "{rec}");
    assert!(
        asked["askedAt"].is_string() && asked["answeredAt"].is_string(),
        "{rec}"
    );
    // Once means once: the next write asks again.
    let again = c.send("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    let q2 = c.next_question();
    assert_ne!(q2["requestId"], q["requestId"]);
    reply(&mut c, &q2, "reject_once");
    assert!(c.answer(&again).get("error").is_some());
}

#[test]
fn allow_always_holds_for_the_rest_of_the_session_only() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = gate.client();
    let first = c.send("write", json!({"path": "/.github/a.yml", "content": "a"}));
    let q = c.next_question();
    reply(&mut c, &q, "allow_always");
    assert!(c.answer(&first).get("data").is_some());
    // The same rule and operation again: nobody is asked.
    c.ok("write", json!({"path": "/.github/b.yml", "content": "b"}));
    assert!(!c.has_question(), "asked again after allow_always");
    assert_eq!(
        std::fs::read_to_string(gate.root.join(".github/b.yml")).expect("written"),
        "b"
    );
    let rec = record_of(&gate, ".github/b.yml");
    assert_eq!(
        rec["details"]["asked"][0]["answer"], "allowed_for_session",
        "{rec}"
    );
    // Another connection is another session: it is asked.
    let mut other = gate.client();
    let id = other.send("write", json!({"path": "/.github/c.yml", "content": "c"}));
    let q = other.next_question();
    reply(&mut other, &q, "reject_once");
    assert!(other.answer(&id).get("error").is_some());
}

#[test]
fn reject_once_refuses_with_the_rule_and_writes_nothing() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = gate.client();
    let id = c.send("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    let q = c.next_question();
    reply(&mut c, &q, "reject_once");
    let resp = c.answer(&id);
    let info = &resp["errorInfo"];
    assert_eq!(info["code"], REFUSED, "{resp}");
    assert_eq!(info["rule"], "ask-ci", "{resp}");
    assert!(
        info["message"]
            .as_str()
            .is_some_and(|m| m.contains("said no")),
        "{resp}"
    );
    assert!(!gate.root.join(".github/ci.yml").exists());
    let rec = record_of(&gate, ".github/ci.yml");
    assert_eq!(rec["details"]["asked"][0]["answer"], "reject_once", "{rec}");
    assert_eq!(rec["rule"], "ask-ci", "{rec}");
    // The question is gone: answering it again is an error.
    reply(&mut c, &q, "allow_once");
    let late = c.answer(&q["requestId"]);
    assert_eq!(late["errorInfo"]["code"], INVALID_PARAMS, "{late}");
}

#[test]
fn a_silent_client_is_refused_when_the_policy_timeout_passes() {
    let gate = WsGate::start(Some(&policy("[ask]\ntimeout_secs = 1")), setup);
    let mut c = gate.client();
    let id = c.send("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    let q = c.next_question();
    assert_eq!(q["data"]["rule"], "ask-ci");
    let resp = c.answer(&id);
    assert_eq!(resp["errorInfo"]["code"], REFUSED, "{resp}");
    assert_eq!(resp["errorInfo"]["rule"], "ask-ci", "{resp}");
    assert!(
        resp["errorInfo"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no answer within 1 s")),
        "{resp}"
    );
    assert!(!gate.root.join(".github/ci.yml").exists());
    let rec = record_of(&gate, ".github/ci.yml");
    assert_eq!(rec["details"]["asked"][0]["answer"], "timeout", "{rec}");
}

#[test]
fn a_reply_to_no_waiting_question_is_an_error() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = gate.client();
    let msg = json!({"channel": "files", "type": "permission", "requestId": "perm-999", "answer": "allow_once"});
    c.send_text(&msg.to_string());
    let resp = c.answer(&json!("perm-999"));
    assert_eq!(resp["type"], "permission", "{resp}");
    assert_eq!(resp["errorInfo"]["code"], INVALID_PARAMS, "{resp}");
    assert!(
        resp["error"]
            .as_str()
            .is_some_and(|e| e.contains("perm-999")),
        "{resp}"
    );
    // The connection still serves.
    c.ok("write", json!({"path": "/plain.txt", "content": "ok"}));
}

#[test]
fn a_client_that_declines_questions_is_refused_without_being_asked() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = WsClient::open_at(&gate.addr, &gate.token, "?permissions=off");
    let resp = c.request("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    assert_eq!(resp["errorInfo"]["code"], REFUSED, "{resp}");
    assert_eq!(resp["errorInfo"]["rule"], "ask-ci", "{resp}");
    assert!(!c.has_question());
    let rec = record_of(&gate, ".github/ci.yml");
    assert_eq!(rec["details"]["asked"][0]["answer"], "unanswered", "{rec}");
}

#[test]
fn the_reply_is_read_while_every_slot_waits_and_later_requests_are_refused_as_busy() {
    let gate = WsGate::start(Some(&policy("[ws]\nmax_in_flight = 1")), setup);
    let mut c = gate.client();
    let asking = c.send("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    let q = c.next_question();
    // The one slot is taken: this waits for it, and the next is refused as busy.
    let waits = c.send("mkdir", json!({"path": "/d1"}));
    let refused = c.send("mkdir", json!({"path": "/d2"}));
    let busy = c.answer(&refused);
    assert_eq!(busy["errorInfo"]["code"], LIMIT, "{busy}");
    assert_eq!(busy["errorInfo"]["rule"], "ws.max_in_flight", "{busy}");
    reply(&mut c, &q, "allow_once");
    assert!(c.answer(&asking).get("data").is_some());
    assert!(c.answer(&waits).get("data").is_some());
    assert!(gate.root.join("d1").is_dir());
    assert!(!gate.root.join("d2").exists());
}

#[test]
fn closing_the_connection_leaves_its_question_unanswered_and_refused() {
    let gate = WsGate::start(Some(&policy("")), setup);
    let mut c = gate.client();
    c.send("write", json!({"path": "/.github/ci.yml", "content": "x"}));
    c.next_question();
    c.close();
    // The request is recorded once it ends; wait for its record (not for a time).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let rec = loop {
        let found = gate.audit_requests().into_iter().find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(".github/ci.yml"))
                && r["details"]["asked"].is_array()
        });
        if let Some(r) = found {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no record of the asking write"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let asked = &rec["details"]["asked"][0];
    assert_eq!(asked["answer"], "unanswered", "{rec}");
    assert!(
        asked["note"].as_str().is_some_and(|n| n.contains("closed")),
        "{rec}"
    );
    assert!(!gate.root.join(".github/ci.yml").exists());
}
