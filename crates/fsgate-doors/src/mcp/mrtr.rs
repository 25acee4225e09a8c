//! `ask` rules on the stateless (2026-07-28) wire: multi round-trip requests (MRTR).
//! That revision has no server-initiated requests; a `tools/call` that meets an `ask`
//! rule, from a client whose request declares elicitation in its `_meta`, is answered
//! with an `InputRequiredResult`: the question as an `elicitation/create` form under
//! [`INPUT_KEY`], and a `requestState`. The client asks its person and retries the call
//! with `inputResponses` and that state; the retry is decided with the answer.
//!
//! The state is the question's rule and class, the answers given in earlier rounds of
//! the same call, the principal it was given to (the door's stateless session), a
//! digest of the call (tool and arguments) and an expiry (the policy's `[ask]
//! timeout_secs`), signed with HMAC-SHA-256 under a key of this process. A state that
//! fails the check, lapsed, names another principal or another call, or was used once
//! already is refused (-32602): a person's "allow once" allows one call.
//!
//! The first round changes nothing: the call is refused as any unanswered question is,
//! its record saying why (`details.asked[].note`), and only the answer the client's
//! person gave in the retry decides.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use fsgate_base::sha256::Sha256;
use rmcp::model::{ElicitRequest, InputRequest, InputRequests, InputRequiredResult, JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use fsgate_gateway::ask::{Answer, Asker, Question};

/// The key of fsgate's question in `inputRequests` and `inputResponses`.
pub(super) const INPUT_KEY: &str = "fsgate_ask";

/// Why the first round's question has no answer yet (its record's note).
const SENT_BACK: &str = "the question went back to the MCP client in an InputRequiredResult \
     (2026-07-28 multi round-trip request); its retry carries the person's answer";

/// States used at most, remembered until they lapse (a fuller table refuses new ones).
const MAX_USED: usize = 16_384;

/// One round's question: its rule and class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    rule: String,
    class: String,
}

/// An answer a person gave in an earlier round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Given {
    rule: String,
    class: String,
    /// `allow_once`, `allow_always` or `reject_once`.
    answer: String,
}

/// What a `requestState` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    /// The principal: the door's stateless session.
    p: String,
    /// The call: SHA-256 of its tool and arguments, hex.
    c: String,
    /// Expiry, seconds since the epoch.
    e: u64,
    /// The question this round asked.
    q: Asked,
    /// Answers of earlier rounds.
    a: Vec<Given>,
    /// Its number at this door: two rounds of the same call are two states.
    n: u64,
}

/// The states of one door: their key, and those used already.
pub(super) struct States {
    key: ring::hmac::Key,
    used: Mutex<HashMap<[u8; 32], u64>>,
    issued: std::sync::atomic::AtomicU64,
}

impl States {
    /// A fresh key; Err if the system has no randomness to give.
    pub(super) fn new() -> Result<States, String> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("no randomness for MRTR state keys: {e}"))?;
        Ok(States {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
            used: Mutex::new(HashMap::new()),
            issued: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn seal(&self, state: &State) -> String {
        let body = serde_json::to_vec(state).unwrap_or_default();
        let tag = ring::hmac::sign(&self.key, &body);
        format!("{}.{}", B64.encode(&body), B64.encode(tag.as_ref()))
    }

    /// The state `text` holds, if its tag is this door's and it has not lapsed.
    fn open(&self, text: &str, now: u64) -> Result<State, &'static str> {
        let (body, tag) = text.split_once('.').ok_or("requestState is not fsgate's")?;
        let body = B64
            .decode(body)
            .map_err(|_| "requestState is not fsgate's")?;
        let tag = B64
            .decode(tag)
            .map_err(|_| "requestState is not fsgate's")?;
        ring::hmac::verify(&self.key, &body, &tag).map_err(|_| "requestState failed its check")?;
        let state: State =
            serde_json::from_slice(&body).map_err(|_| "requestState is not fsgate's")?;
        if state.e < now {
            return Err("requestState lapsed (the policy's [ask] timeout_secs)");
        }
        Ok(state)
    }

    /// Marks `text` used; false if it was used before (or the table is full).
    fn consume(&self, text: &str, expiry: u64, now: u64) -> bool {
        let digest: [u8; 32] = Sha256::digest(text.as_bytes());
        let Ok(mut used) = self.used.lock() else {
            return false;
        };
        used.retain(|_, e| *e >= now);
        if used.len() >= MAX_USED || used.contains_key(&digest) {
            return false;
        }
        used.insert(digest, expiry);
        true
    }
}

/// One round of a call: the answers it brings, and the question it leaves, if any.
#[derive(Debug)]
pub(super) struct Round {
    principal: String,
    call: String,
    answers: Vec<Given>,
    pending: Mutex<Option<Question>>,
}

impl Round {
    /// The round of a call of `tool` with `args` by `principal`, from its `requestState`
    /// and `inputResponses`. Err: the state is refused (why).
    pub(super) fn begin(
        states: &States,
        principal: &str,
        (tool, args): (&str, &JsonObject),
        (state, responses): (Option<&str>, Option<&Value>),
    ) -> Result<Round, String> {
        let call = call_digest(tool, args);
        let mut answers = Vec::new();
        if let Some(text) = state {
            let now = now_secs();
            let st = states.open(text, now).map_err(str::to_string)?;
            if st.p != principal || st.c != call {
                return Err("requestState belongs to another call".into());
            }
            if !states.consume(text, st.e, now) {
                return Err("requestState was used already".into());
            }
            answers = st.a;
            if let Some(answer) = responses.and_then(answer_of) {
                answers.push(Given {
                    rule: st.q.rule,
                    class: st.q.class,
                    answer: answer.as_str().to_owned(),
                });
            }
        }
        Ok(Round {
            principal: principal.to_owned(),
            call,
            answers,
            pending: Mutex::new(None),
        })
    }

    /// The `InputRequiredResult` if the call met a question no round answered: the
    /// question as a form, and the state of this round (valid for `ttl`).
    pub(super) fn input_required(
        &self,
        states: &States,
        ttl: Duration,
    ) -> Option<InputRequiredResult> {
        let q = self.pending.lock().ok()?.take()?;
        let params = super::elicit::params(&q, false).ok()?;
        let state = State {
            p: self.principal.clone(),
            c: self.call.clone(),
            e: now_secs().saturating_add(ttl.as_secs().max(1)),
            q: Asked {
                rule: q.rule.clone(),
                class: q.class.clone(),
            },
            a: self.answers.clone(),
            n: states
                .issued
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        let mut requests = InputRequests::new();
        let ask = InputRequest::Elicitation(ElicitRequest::new(params));
        requests.insert(INPUT_KEY.to_owned(), ask);
        Some(InputRequiredResult::new(
            Some(requests),
            Some(states.seal(&state)),
        ))
    }
}

impl Asker for Round {
    fn ask(&self, q: &Question, _: Duration) -> Answer {
        let given = self
            .answers
            .iter()
            .find(|g| g.rule == q.rule && g.class == q.class);
        if let Some(g) = given {
            // "Allow for this session" (which the question did not offer) allows this
            // call once: this asker keeps no grants (see `put`).
            return Answer::from_kind(&g.answer).unwrap_or(Answer::Reject);
        }
        if let Ok(mut p) = self.pending.lock() {
            p.get_or_insert_with(|| q.clone());
        }
        Answer::Unanswered(SENT_BACK.into())
    }

    fn keeps_grants(&self) -> bool {
        false
    }
}

/// The person's answer in `inputResponses`, if fsgate's question was answered.
fn answer_of(responses: &Value) -> Option<Answer> {
    let r: rmcp::model::ElicitResult =
        serde_json::from_value(responses.get(INPUT_KEY)?.clone()).ok()?;
    Some(super::elicit::decision(&r))
}

/// SHA-256 of a call's tool and arguments, hex.
fn call_digest(tool: &str, args: &JsonObject) -> String {
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(serde_json::to_vec(args).unwrap_or_default());
    hex::encode(h.finalize())
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Question {
        Question {
            op: fsgate_gateway::ops::OpId::Write,
            class: "write".into(),
            path: "notes/a.txt".into(),
            abs_path: "/ws/notes/a.txt".into(),
            rule: "ask-notes".into(),
            reason: "notes are reviewed".into(),
            proposed: None,
            replaced: None,
            session: "s-stateless".into(),
        }
    }

    fn args() -> JsonObject {
        serde_json::from_value(serde_json::json!({"path": "notes/a.txt", "content": "x"}))
            .unwrap_or_default()
    }

    /// The first round's state, as the client would echo it.
    fn first_state(states: &States) -> String {
        let round =
            Round::begin(states, "p", ("write_text_file", &args()), (None, None)).expect("round");
        assert!(matches!(
            round.ask(&question(), Duration::ZERO),
            Answer::Unanswered(_)
        ));
        let r = round
            .input_required(states, Duration::from_secs(60))
            .expect("input required");
        assert!(
            r.input_requests
                .as_ref()
                .is_some_and(|m| m.contains_key(INPUT_KEY))
        );
        r.request_state.expect("state")
    }

    fn accept(decision: &str) -> Value {
        serde_json::json!({INPUT_KEY: {"action": "accept", "content": {"decision": decision}}})
    }

    #[test]
    fn the_retry_is_decided_by_the_answer_and_its_state_serves_once() {
        let states = States::new().expect("states");
        let text = first_state(&states);
        let yes = accept("allow_once");
        let round = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&text), Some(&yes)),
        )
        .expect("retry");
        assert_eq!(round.ask(&question(), Duration::ZERO), Answer::AllowOnce);
        assert!(
            round
                .input_required(&states, Duration::from_secs(60))
                .is_none()
        );
        let again = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&text), Some(&yes)),
        );
        assert!(again.is_err(), "a state serves one retry");
    }

    #[test]
    fn a_state_for_another_call_principal_or_forged_is_refused() {
        let states = States::new().expect("states");
        let text = first_state(&states);
        let yes = accept("allow_once");
        let mut other = args();
        other.insert("content".into(), "y".into());
        let r = Round::begin(
            &states,
            "p",
            ("write_text_file", &other),
            (Some(&text), Some(&yes)),
        );
        assert!(r.is_err());
        let r = Round::begin(
            &states,
            "q",
            ("write_text_file", &args()),
            (Some(&text), Some(&yes)),
        );
        assert!(r.is_err());
        let mut forged = text.clone();
        forged.insert(0, 'A');
        let r = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&forged), Some(&yes)),
        );
        assert!(r.is_err());
        let foreign = first_state(&States::new().expect("states"));
        let r = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&foreign), Some(&yes)),
        );
        assert!(r.is_err(), "another door's key");
    }

    #[test]
    fn a_declined_or_missing_answer_is_no_yes() {
        let states = States::new().expect("states");
        let text = first_state(&states);
        let no = serde_json::json!({INPUT_KEY: {"action": "decline"}});
        let round = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&text), Some(&no)),
        )
        .expect("retry");
        assert_eq!(round.ask(&question(), Duration::ZERO), Answer::Reject);
        let text = first_state(&states);
        let round = Round::begin(
            &states,
            "p",
            ("write_text_file", &args()),
            (Some(&text), None),
        )
        .expect("retry");
        assert!(matches!(
            round.ask(&question(), Duration::ZERO),
            Answer::Unanswered(_)
        ));
        assert!(
            round
                .input_required(&states, Duration::from_secs(60))
                .is_some(),
            "asked again"
        );
    }
}
