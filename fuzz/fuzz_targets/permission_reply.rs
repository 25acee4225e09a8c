//! The editor's answer to fsgate's `session/request_permission` under `fsgate acp`: a
//! question (its path from the input's first line: the agent chose it) is put through
//! the proxy's real asker, and the input's second line, with `@ID` standing for the
//! question's id, is routed as the proxy routes the editor's lines. No panic; the
//! request is a JSON-RPC request in fsgate's id namespace whose title shows the path
//! with no control character; the line is taken exactly when it is a response (no
//! string `method`) under an id of fsgate's; only a `selected` outcome naming an allow
//! option allows, an error is no person's answer, and anything the proxy did not take
//! leaves the question unanswered.
#![no_main]

use std::path::PathBuf;

use fsgate_gateway::ask::{Answer, Question};
use fsgate_doors::fuzz::permission_round;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn question(path: &str) -> Question {
    Question {
        op: fsgate_gateway::ops::OpId::Write,
        class: "write".into(),
        path: path.into(),
        abs_path: PathBuf::from("/ws").join(path.trim_start_matches('/')),
        rule: "ask-ci".into(),
        reason: "CI config is reviewed".into(),
        proposed: None,
        replaced: None,
        session: "s-1".into(),
    }
}

/// The answer a reply under the question's own id should give.
fn expected(reply: &Value) -> Answer {
    if reply.get("error").is_some() {
        return Answer::Unanswered(String::new());
    }
    let outcome = &reply["result"]["outcome"];
    if outcome["outcome"] != "selected" {
        return Answer::Reject;
    }
    match outcome["optionId"].as_str() {
        Some("fsgate-allow-once") => Answer::AllowOnce,
        Some("fsgate-allow-always") => Answer::AllowSession,
        _ => Answer::Reject,
    }
}

fn same_kind(a: &Answer, b: &Answer) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fuzz_target!(|data: &[u8]| {
    let mut lines = data.splitn(3, |&b| b == b'\n');
    let path = String::from_utf8_lossy(lines.next().unwrap_or_default());
    let reply = lines.next().unwrap_or_default();
    let Some(round) = permission_round(&question(&path), reply) else {
        panic!("no question was put");
    };
    let req = &round.request;
    assert_eq!(req["jsonrpc"], "2.0");
    assert_eq!(req["method"], "session/request_permission");
    let id = req["id"].as_str().expect("a string id");
    assert!(id.starts_with("fsgate-ask-"), "{id}");
    assert_eq!(req["params"]["toolCall"]["toolCallId"], id);
    assert_eq!(req["params"]["options"].as_array().map(Vec::len), Some(3));
    let title = req["params"]["toolCall"]["title"].as_str().expect("title");
    assert!(!title.chars().any(char::is_control), "{title:?}");

    let parsed = std::str::from_utf8(reply)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t.replace("@ID", id)).ok());
    let response_to_ours = parsed.as_ref().is_some_and(|v| {
        v.get("method").and_then(Value::as_str).is_none()
            && v.get("id")
                .and_then(Value::as_str)
                .is_some_and(|i| i.starts_with("fsgate-ask-"))
    });
    assert_eq!(round.taken, response_to_ours, "{parsed:?}");
    let want = match parsed {
        Some(v) if round.taken && v["id"] == id => expected(&v),
        _ => Answer::Unanswered(String::new()),
    };
    assert!(
        same_kind(&round.answer, &want),
        "{:?} for {want:?}",
        round.answer
    );
    if let Answer::Unanswered(why) = &round.answer {
        assert!(!why.chars().any(char::is_control), "{why:?}");
    }
});
