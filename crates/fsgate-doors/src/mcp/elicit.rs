//! `ask` rules under MCP: the person is asked through elicitation (`elicitation/create`,
//! form mode), when the client declared that capability in `initialize`.
//!
//! The form has one required choice, `decision`: `allow_once`, `allow_always` (same rule,
//! same operation class, rest of the session) or `reject_once`, preselected on reject so
//! a client that accepts its defaults unseen allows nothing. `accept` with a choice is the
//! answer; `decline`, `cancel` or an unknown choice is a rejection; the client's error
//! is no person's answer (unanswered); no answer
//! within the policy's timeout is a timeout (the request is cancelled); a closed
//! connection leaves it unanswered.
//!
//! The question is put from the request's blocking-pool thread; the request goes out
//! through the SDK and its answer comes back through the input pump, which keeps reading
//! (the direct path never runs a call that may ask on its batch thread: see
//! [`super::direct`]).

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ElicitationSchema, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::json;

use fsgate_base::text::escape_for_humans;
use fsgate_gateway::ask::{Answer, Asker, Proposed, Question};

/// Why a client without the capability is not asked.
pub(super) const NOT_DECLARED: &str =
    "the MCP client did not declare the `elicitation` capability in `initialize`";
/// Why a client that takes URL elicitation only is not asked.
const URL_ONLY: &str =
    "the MCP client declared URL elicitation only, and the question needs a form";

/// Why a stateless request is not asked.
pub(super) const STATELESS: &str = "a stateless (2026-07-28) request cannot be asked: \
     fsgate puts questions only to a 2025-era session that declared elicitation";

/// The asker of stateless requests: nobody. Nothing a 2025-era session on the same
/// connection declared applies to them.
#[derive(Debug)]
pub(super) struct NoAsking;

impl Asker for NoAsking {
    fn ask(&self, _: &Question, _: Duration) -> Answer {
        Answer::Unanswered(STATELESS.into())
    }

    fn keeps_grants(&self) -> bool {
        false
    }
}

/// The most bytes of a proposed text shown in the prompt.
const SHOWN_TEXT: usize = 2000;

/// The asker of one connection.
pub(super) struct Elicit {
    /// Set in `initialize` when the client declared elicitation: where questions go,
    /// or why none can.
    peer: OnceLock<Result<Peer<RoleServer>, &'static str>>,
    rt: tokio::runtime::Handle,
}

impl fmt::Debug for Elicit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Elicit")
            .field("declared", &self.peer.get().map(|p| p.is_ok()))
            .finish()
    }
}

impl Elicit {
    /// Call inside the runtime.
    pub(super) fn new() -> Elicit {
        Elicit {
            peer: OnceLock::new(),
            rt: tokio::runtime::Handle::current(),
        }
    }

    /// The client declared elicitation: form questions go to `peer` from now on, if it
    /// takes forms (an empty capability means forms, as in the 2025-06-18 revision).
    pub(super) fn declared(&self, cap: &ElicitationCapability, peer: Peer<RoleServer>) {
        let forms = cap.form.is_some() || cap.url.is_none();
        let _ = self.peer.set(if forms { Ok(peer) } else { Err(URL_ONLY) });
    }
}

impl Asker for Elicit {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        let peer = match self.peer.get() {
            Some(Ok(peer)) => peer,
            Some(Err(why)) => return Answer::Unanswered((*why).into()),
            None => return Answer::Unanswered(NOT_DECLARED.into()),
        };
        let params = match params(q, true) {
            Ok(p) => p,
            Err(e) => return Answer::Unanswered(format!("the question could not be built: {e}")),
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let answered = self.rt.block_on(async {
            let options = PeerRequestOptions::with_timeout(timeout);
            peer.send_request_with_option(request, options)
                .await?
                .await_response()
                .await
        });
        answer_of(answered)
    }
}

/// The person's answer, from what came back.
pub(super) fn answer_of(answered: Result<ClientResult, ServiceError>) -> Answer {
    match answered {
        Ok(ClientResult::ElicitResult(r)) => decision(&r),
        // A result of another shape: no yes.
        Ok(_) | Err(ServiceError::UnexpectedResponse) => Answer::Reject,
        // The client's error is no person's answer (say, a client that cannot show forms).
        Err(ServiceError::McpError(e)) => Answer::Unanswered(format!(
            "the MCP client answered the elicitation with error {}: {}",
            e.code.0,
            fsgate_gateway::clip(&escape_for_humans(&e.message))
        )),
        Err(ServiceError::Timeout { .. }) => Answer::Timeout,
        Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
            Answer::Unanswered("the MCP connection closed before an answer came".into())
        }
        Err(e) => Answer::Unanswered(format!("elicitation failed: {e}")),
    }
}

/// The answer an elicitation result gives.
pub(super) fn decision(r: &ElicitResult) -> Answer {
    if r.action != ElicitationAction::Accept {
        return Answer::Reject;
    }
    let chosen = r.content.as_ref().and_then(|c| c.get("decision"));
    chosen
        .and_then(|v| v.as_str())
        .and_then(Answer::from_kind)
        .unwrap_or(Answer::Reject)
}

/// The form: the message and the one-choice schema. `session`: the asker keeps an
/// "allow for this session" (a 2025-era session); a stateless round does not, and is
/// not offered one.
pub(super) fn params(
    q: &Question,
    session: bool,
) -> Result<ElicitRequestParams, serde_json::Error> {
    let mut choices = vec![json!({"const": "allow_once", "title": "Allow once"})];
    if session {
        choices.push(json!({"const": "allow_always", "title": "Allow for this session"}));
    }
    choices.push(json!({"const": "reject_once", "title": "Reject"}));
    let description = match session {
        true => {
            "allow_always holds for the same rule and kind of operation for the rest of this session"
        }
        false => "the answer decides this call only",
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": description,
                "oneOf": choices,
                "default": "reject_once",
            }
        },
        "required": ["decision"],
    });
    let requested_schema: ElicitationSchema = serde_json::from_value(schema)?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(q),
        requested_schema,
    })
}

/// What the person reads: the operation, the path, the rule, the proposed text. What
/// the agent chose (the path, the text) is escaped, so it cannot pose as fsgate's words.
fn message(q: &Question) -> String {
    let path = q.shown_path();
    let mut m = format!(
        "fsgate: may the agent {class} `{path}`? (operation {op})\nRule `{rule}` needs a person's approval: {reason}",
        op = q.op.name(),
        class = q.class,
        rule = escape_for_humans(&q.rule),
        reason = escape_for_humans(&q.reason),
    );
    if let Some(p) = &q.proposed {
        m.push_str(&proposed(p));
    }
    m
}

/// The proposed text of a write or edit, clipped.
fn proposed(p: &Proposed) -> String {
    match &p.old_text {
        Some(old) => format!(
            "\n\nReplacing:\n{}\n\nwith:\n{}",
            shown(old),
            shown(&p.new_text)
        ),
        None => format!("\n\nNew content:\n{}", shown(&p.new_text)),
    }
}

/// A text as shown: each line escaped, cut after [`SHOWN_TEXT`] bytes.
fn shown(text: &str) -> String {
    let mut end = text.len().min(SHOWN_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &text[..end];
    let lines: Vec<String> = cut
        .strip_suffix('\n')
        .unwrap_or(cut)
        .split('\n')
        .map(|l| format!("> {}", escape_for_humans(l)))
        .collect();
    let mut s = lines.join("\n");
    if end < text.len() {
        s.push_str(&format!("\n[... {} more bytes]", text.len() - end));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(action: ElicitationAction, content: Option<serde_json::Value>) -> ElicitResult {
        let r = ElicitResult::new(action);
        match content {
            Some(c) => r.with_content(c),
            None => r,
        }
    }

    #[test]
    fn answers_follow_the_choice_and_anything_else_rejects() {
        let accept = |c| decision(&result(ElicitationAction::Accept, Some(c)));
        assert_eq!(accept(json!({"decision": "allow_once"})), Answer::AllowOnce);
        assert_eq!(
            accept(json!({"decision": "allow_always"})),
            Answer::AllowSession
        );
        assert_eq!(accept(json!({"decision": "reject_once"})), Answer::Reject);
        assert_eq!(accept(json!({"decision": "yes"})), Answer::Reject);
        assert_eq!(accept(json!({})), Answer::Reject);
        assert_eq!(
            decision(&result(ElicitationAction::Accept, None)),
            Answer::Reject
        );
        let allow = Some(json!({"decision": "allow_once"}));
        assert_eq!(
            decision(&result(ElicitationAction::Decline, allow.clone())),
            Answer::Reject
        );
        assert_eq!(
            decision(&result(ElicitationAction::Cancel, allow)),
            Answer::Reject
        );
    }

    #[test]
    fn a_clients_error_is_unanswered_not_a_persons_no() {
        let err = rmcp::model::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "no forms here",
            None,
        );
        match answer_of(Err(ServiceError::McpError(err))) {
            Answer::Unanswered(why) => assert!(why.contains("no forms here"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_form_names_the_operation_and_escapes_the_agents_text() {
        let q = Question {
            op: fsgate_gateway::ops::OpId::Write,
            class: "write".into(),
            path: "ci\n/evil.yml".into(),
            abs_path: "/ws/ci/evil.yml".into(),
            rule: "ask-ci".into(),
            reason: "CI configuration".into(),
            proposed: Some(Proposed {
                old_text: None,
                new_text: format!("line1\nline\u{1b}[2J{}", "x".repeat(5000)),
            }),
            replaced: None,
            session: "s".into(),
        };
        let p = params(&q, true).expect("schema");
        let v = serde_json::to_value(&p).expect("encodes");
        assert_eq!(v["mode"], "form", "{v}");
        assert_eq!(v["requestedSchema"]["required"][0], "decision", "{v}");
        let m = v["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("may the agent write `ci\\n/evil.yml`?") && m.contains("`ask-ci`"),
            "{m}"
        );
        assert!(
            m.contains("> line1\n> line") && !m.contains('\u{1b}'),
            "{m}"
        );
        assert!(m.contains("more bytes]") && m.len() < 3000, "{m}");
    }
}
