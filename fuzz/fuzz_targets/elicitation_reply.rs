//! The MCP client's answers to fsgate's questions. The input is read twice: as the
//! client's result to `elicitation/create` (2025 sessions), and as the `tools/call`
//! params of a stateless (2026-07-28) retry after an `InputRequiredResult`, `@STATE`
//! standing for the `requestState` a real first round issued. No panic; only an
//! `accept` whose `decision` names an allow option allows, and only that option; a
//! retry is refused unless it carries exactly the issued state for the same tool,
//! arguments and principal; an accepted state serves once; a retry that brings no
//! answer asks again, and one that answers does not.
#![no_main]

use std::path::PathBuf;

use fsgate_gateway::ask::{Answer, Question};
use fsgate_doors::mcp::fuzz::{MRTR_TOOL, elicitation_answer, mrtr_args, mrtr_retry};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn question() -> Question {
    Question {
        op: fsgate_gateway::ops::OpId::Write,
        class: "write".into(),
        path: "notes/a.txt".into(),
        abs_path: PathBuf::from("/ws/notes/a.txt"),
        rule: "ask-notes".into(),
        reason: "notes are reviewed".into(),
        proposed: None,
        replaced: None,
        session: "s-stateless".into(),
    }
}

/// An allowing answer must come from `accept` naming that very option.
fn check_allow(answer: &Answer, result: &Value) {
    let kind = match answer {
        Answer::AllowOnce => "allow_once",
        Answer::AllowSession => "allow_always",
        _ => return,
    };
    assert_eq!(result["action"], "accept", "{answer:?} from {result}");
    assert_eq!(
        result["content"]["decision"], kind,
        "{answer:?} from {result}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let value = serde_json::from_str::<Value>(text).ok();
    if let Some(v) = &value
        && let Some(answer) = elicitation_answer(v)
    {
        check_allow(&answer, v);
        assert!(!matches!(answer, Answer::Timeout), "{v}");
    }

    let q = question();
    let Some(retry) = mrtr_retry(&q, text) else {
        return;
    };
    let p = &retry.params;
    let args = p.arguments.clone().unwrap_or_default();
    let same_call = p.request_state.as_deref() == Some(retry.issued.as_str())
        && p.name == MRTR_TOOL
        && args == mrtr_args();
    // The same call written the same way (the state binds the call as written).
    let genuine =
        same_call && serde_json::to_vec(&args).ok() == serde_json::to_vec(&mrtr_args()).ok();
    let Ok((answer, asks_again)) = &retry.outcome else {
        assert!(!genuine, "the issued state refused: {:?}", retry.outcome);
        return;
    };
    if p.request_state.is_none() {
        // No state: a first round, which the person has not answered yet.
        assert!(matches!(answer, Answer::Unanswered(_)) && *asks_again);
        return;
    }
    assert!(retry.replay_refused, "a state served twice");
    assert!(
        same_call,
        "accepted a state that is not the issued one: {p:?}"
    );
    let response = serde_json::to_value(&p.input_responses).unwrap_or_default();
    check_allow(answer, &response["fsgate_ask"]);
    assert_eq!(
        *asks_again,
        matches!(answer, Answer::Unanswered(_)),
        "{answer:?}"
    );
});
