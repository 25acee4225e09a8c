//! `fsgate acp` and the person at the editor: an `ask` rule's question goes to the
//! editor as ACP's own `session/request_permission` ([`EditorAsker`]), and each change
//! fsgate made for the agent is shown there as a `session/update` tool call of its own
//! (`acp_notes::EditorNotes`).
//!
//! fsgate's requests to the editor carry string ids in a namespace of its own
//! ([`ASK_ID_PREFIX`]); the proxy refuses agent requests whose ids claim it, so the
//! editor's answers under those ids are always fsgate's, never relayed to the agent.
//!
//! How a change is shown in ACP's words is `acp_shown.rs`; the notes of changes made
//! are `acp_notes.rs`.

use std::fmt;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::outbox::Outbox;
use crate::questions::{self, Pending, Refused};
use fsgate_gateway::ask::{Answer, Asker, Question};
use fsgate_gateway::ops::OpId;

use crate::acp_shown::{change_kind, diff_content, line_of};

/// Ids of fsgate's own requests to the editor start with this.
pub(crate) const ASK_ID_PREFIX: &str = "fsgate-ask-";
/// At most this many questions wait for the editor at once; more are not asked.
pub(crate) const MAX_PENDING: usize = 64;

/// The options offered, as (optionId, name, kind).
const OPTIONS: [(&str, &str, &str); 3] = [
    ("fsgate-allow-once", "Allow once", "allow_once"),
    (
        "fsgate-allow-always",
        "Allow for this session",
        "allow_always",
    ),
    ("fsgate-reject-once", "Reject", "reject_once"),
];

/// True if `id` lies in fsgate's own id namespace.
pub(crate) fn is_ours(id: &Value) -> bool {
    id.as_str().is_some_and(|s| s.starts_with(ASK_ID_PREFIX))
}

/// The id of the question `msg` answers, if it is the editor's answer to one of
/// fsgate's own requests (no method, an id in fsgate's namespace): the proxy takes it
/// and never relays it.
pub(crate) fn answer_id(msg: &Value) -> Option<&Value> {
    let id = msg.get("id")?;
    (msg.get("method").and_then(Value::as_str).is_none() && is_ours(id)).then_some(id)
}

/// ACP's tool kind for an operation.
fn kind_of(op: OpId) -> &'static str {
    match op.change() {
        Some(change) => change_kind(change),
        None if op.lists() => "search",
        None => "read",
    }
}

/// The `session/request_permission` request putting `q` to the editor; `by`: the
/// process of the agent's view that asked, as the view names it.
pub(crate) fn permission_request(id: &str, q: &Question, by: Option<&str>) -> Value {
    let why = format!(
        "fsgate: rule `{}` asks a person before this {}: {}",
        q.rule, q.class, q.reason
    );
    let mut content = vec![json!({"type": "content", "content": {"type": "text", "text": why}})];
    // The process chose its own name and arguments: escaped for the person.
    let by = by.map(|p| fsgate_base::text::escape_for_humans(p).into_owned());
    if let Some(p) = &by {
        let text = format!("asked by a process of the agent's, through fsgate's view: {p}");
        content.push(json!({"type": "content", "content": {"type": "text", "text": text}}));
    }
    if let Some(p) = &q.proposed {
        content.extend(diff_content(&q.abs_path, p, q.replaced.as_ref(), true));
    }
    let options: Vec<Value> = OPTIONS
        .iter()
        .map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind}))
        .collect();
    let mut meta = json!({"op": q.op.name(), "class": q.class, "rule": q.rule});
    if let Some(p) = by {
        meta["process"] = p.into();
    }
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "session/request_permission",
        "params": {
            "sessionId": q.session,
            "toolCall": {
                "toolCallId": id,
                "title": q.title(),
                "kind": kind_of(q.op),
                "status": "pending",
                "content": content,
                "locations": [{"path": q.abs_path}],
                "_meta": {"fsgate": meta},
            },
            "options": options,
        },
    })
}

/// The answer an editor's response carries: a selected option by its kind; anything
/// else (cancelled, an unknown option) is a no. An error is no person's answer (an
/// editor without the method): unanswered, refused all the same.
pub(crate) fn answer_of(response: &Value) -> Answer {
    if let Some(err) = response.get("error") {
        let msg = err["message"].as_str().unwrap_or_default();
        // Any JSON the editor sent: a code of the wrong type is shown escaped and clipped
        // like the message (JSON text leaves C1 controls raw).
        let code = err["code"].to_string();
        let shown = |s: &str| fsgate_gateway::clip(&fsgate_base::text::escape_for_humans(s));
        return Answer::Unanswered(format!(
            "the editor answered with error {}: {}",
            shown(&code),
            shown(msg)
        ));
    }
    let outcome = &response["result"]["outcome"];
    if outcome["outcome"] != "selected" {
        return Answer::Reject;
    }
    let chosen = outcome["optionId"].as_str().unwrap_or_default();
    OPTIONS
        .iter()
        .find(|(id, ..)| *id == chosen)
        .and_then(|(_, _, kind)| Answer::from_kind(kind))
        .unwrap_or(Answer::Reject)
}

/// Puts questions to the editor through the proxy's editor outbox.
pub(crate) struct EditorAsker {
    to_editor: Outbox<Vec<u8>>,
    rt: tokio::runtime::Handle,
    pending: Pending,
}

impl fmt::Debug for EditorAsker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EditorAsker").finish_non_exhaustive()
    }
}

impl EditorAsker {
    /// An asker writing to `to_editor`, waiting on the runtime `rt`.
    pub(crate) fn new(to_editor: Outbox<Vec<u8>>, rt: tokio::runtime::Handle) -> EditorAsker {
        EditorAsker {
            to_editor,
            rt,
            pending: Pending::new(ASK_ID_PREFIX, MAX_PENDING),
        }
    }

    /// Takes the editor's response to one of fsgate's requests. Late or unknown ones
    /// are dropped (the question timed out).
    pub(crate) fn take_response(&self, id: &Value, response: &Value) {
        let Some(id) = id.as_str() else { return };
        if !self.pending.deliver(id, answer_of(response)) {
            tracing::debug!(%id, "editor answered a question no longer waiting");
        }
    }

    /// The editor is gone: every waiting question, and every later one, goes unanswered.
    pub(crate) fn close(&self) {
        self.pending.close();
    }
}

fn gone() -> Answer {
    Answer::Unanswered("the editor closed the connection".into())
}

impl Asker for EditorAsker {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        self.ask_by(q, timeout, None)
    }
}

impl EditorAsker {
    /// Puts `q` to the editor (see [`Asker::ask`]), naming `by`, the view's process
    /// that asked, if it was one.
    pub(crate) fn ask_by(&self, q: &Question, timeout: Duration, by: Option<&str>) -> Answer {
        let deadline = Instant::now() + timeout;
        let (id, rx) = match self.pending.open() {
            Ok(r) => r,
            Err(Refused::Closed) => return gone(),
            Err(Refused::Full) => {
                return Answer::Unanswered(format!(
                    "{MAX_PENDING} questions are already waiting for the editor"
                ));
            }
        };
        let bytes = line_of(&permission_request(&id, q, by));
        // On a blocking-pool thread or a view's thread (never a reader task): waiting
        // here stalls only this request; sending counts against the timeout too. The
        // timer is made inside `block_on`, where the runtime is (a view's thread has none).
        let sent = self.rt.block_on(async {
            tokio::time::timeout(timeout, self.to_editor.send_bytes(bytes)).await
        });
        let answer = match sent {
            Err(_) => Answer::Timeout,
            Ok(false) => gone(),
            Ok(true) => questions::wait(&rx, deadline, gone),
        };
        self.pending.withdraw(&id);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_gateway::ask::{Proposed, Replaced};
    use std::sync::Arc;

    #[test]
    fn answers_map_by_the_option_kind_and_anything_else_is_no() {
        let sel =
            |id: &str| json!({"result": {"outcome": {"outcome": "selected", "optionId": id}}});
        assert_eq!(answer_of(&sel("fsgate-allow-once")), Answer::AllowOnce);
        assert_eq!(answer_of(&sel("fsgate-allow-always")), Answer::AllowSession);
        assert_eq!(answer_of(&sel("fsgate-reject-once")), Answer::Reject);
        assert_eq!(answer_of(&sel("something-else")), Answer::Reject);
        let cancelled = json!({"result": {"outcome": {"outcome": "cancelled"}}});
        assert_eq!(answer_of(&cancelled), Answer::Reject);
        let error = json!({"error": {"code": -32601, "message": "no such method"}});
        assert_eq!(
            answer_of(&error),
            Answer::Unanswered("the editor answered with error -32601: no such method".into())
        );
    }

    #[test]
    fn an_error_code_of_the_wrong_type_is_shown_escaped_and_clipped() {
        // Found by fuzzing (permission_reply): a C1 control (CSI) in a string code.
        let csi = json!({"error": {"code": "\u{9b}31m", "message": "m"}});
        let Answer::Unanswered(why) = answer_of(&csi) else {
            panic!("an error is no person's answer");
        };
        assert!(!why.chars().any(char::is_control), "{why:?}");
        let huge = json!({"error": {"code": {"x": "y".repeat(100_000)}, "message": "m"}});
        let Answer::Unanswered(why) = answer_of(&huge) else {
            panic!("an error is no person's answer");
        };
        assert!(why.len() < 2_000, "{} bytes", why.len());
    }

    fn question() -> Question {
        Question {
            op: fsgate_gateway::ops::OpId::Write,
            class: "write".into(),
            path: "/ws/ci/a.yml".into(),
            abs_path: "/ws/ci/a.yml".into(),
            rule: "ask-ci".into(),
            reason: "reviewed".into(),
            proposed: Some(Proposed {
                old_text: None,
                new_text: "on: push".into(),
            }),
            replaced: None,
            session: "s1".into(),
        }
    }

    #[test]
    fn a_question_before_an_overwrite_shows_the_text_it_replaces() {
        let mut q = question();
        q.replaced = Some(Replaced::of(b"on: pull_request\n".to_vec(), 17));
        let req = permission_request("fsgate-ask-1", &q, None);
        let diff = &req["params"]["toolCall"]["content"][1];
        assert_eq!(diff["type"], "diff", "{req}");
        assert_eq!(diff["oldText"], "on: pull_request\n", "{req}");
        assert_eq!(diff["newText"], "on: push", "{req}");
        q.replaced = Some(Replaced::of(vec![0, 1, 2], 3));
        let req = permission_request("fsgate-ask-2", &q, None);
        let said = &req["params"]["toolCall"]["content"][1];
        assert_eq!(
            said["type"], "content",
            "no diff that reads as a new file: {req}"
        );
        let text = said["content"]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("would replace") && text.contains("(3 bytes; not shown: not text)"),
            "{text}"
        );
    }

    /// Asks on a blocking thread; returns the request fsgate wrote and the pending answer.
    async fn asked(
        timeout: Duration,
    ) -> (Arc<EditorAsker>, Value, tokio::task::JoinHandle<Answer>) {
        let (out, mut rx) = Outbox::<Vec<u8>>::new(1 << 20);
        let asker = Arc::new(EditorAsker::new(out, tokio::runtime::Handle::current()));
        let a2 = Arc::clone(&asker);
        let task = tokio::task::spawn_blocking(move || a2.ask(&question(), timeout));
        let line = rx.recv().await.expect("a request").msg;
        let req: Value = serde_json::from_slice(&line).expect("json");
        (asker, req, task)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_editors_answer_under_the_request_id_settles_the_question() {
        let (asker, req, task) = asked(Duration::from_secs(30)).await;
        assert_eq!(req["method"], "session/request_permission");
        assert!(is_ours(&req["id"]));
        let call = &req["params"]["toolCall"];
        assert_eq!(call["content"][1]["type"], "diff");
        assert_eq!(call["content"][1]["oldText"], Value::Null);
        assert_eq!(call["locations"][0]["path"], "/ws/ci/a.yml");
        let resp = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": {"outcome": "selected", "optionId": "fsgate-allow-always"}}});
        asker.take_response(&req["id"], &resp);
        assert_eq!(task.await.expect("join"), Answer::AllowSession);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_answer_times_out_and_a_closed_editor_is_unanswered() {
        let (_asker, _req, task) = asked(Duration::from_millis(50)).await;
        assert_eq!(task.await.expect("join"), Answer::Timeout);
        let (asker, _req, task) = asked(Duration::from_secs(30)).await;
        asker.close();
        assert!(matches!(task.await.expect("join"), Answer::Unanswered(_)));
        let a2 = Arc::clone(&asker);
        let later =
            tokio::task::spawn_blocking(move || a2.ask(&question(), Duration::from_secs(30)));
        assert!(matches!(later.await.expect("join"), Answer::Unanswered(_)));
    }

    #[test]
    fn only_string_ids_with_the_prefix_are_ours() {
        assert!(is_ours(&json!("fsgate-ask-3")));
        assert!(!is_ours(&json!("fsgate-change-3")));
        assert!(!is_ours(&json!(3)));
    }
}
