//! `ask` rules on the files channel: a `permission` message to the connection whose
//! request met the rule, answered by the client's `permission` reply with the same
//! `requestId` (docs/ws-protocol.md, "Permission questions").
//!
//! The request waits on its own blocking-pool thread (or the connection's batch
//! thread); the connection's reader keeps reading and hands a reply over through a
//! one-slot channel. Questions waiting on one connection are bounded
//! ([`MAX_WAITING`]); the question itself waits in the connection's outbox, which is
//! bounded in bytes.

use std::fmt;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

use super::channel::CHANNEL;
use crate::outbox::Outbox;
use crate::questions::{self, Pending, Refused};
use fsgate_gateway::ask::{Answer, Asker, Question};
use fsgate_gateway::ops::OpId;

/// Questions one connection may have waiting for answers at once; past it a request
/// that would ask is refused ("nobody could be asked").
pub(super) const MAX_WAITING: usize = 64;

/// The options a question offers, as the reply's `answer` names them.
pub(super) const OPTIONS: [&str; 3] = ["allow_once", "allow_always", "reject_once"];

/// A reply's `answer`, as the gateway takes it.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReplyError {
    /// No question with this id waits on this connection.
    #[error(
        "no permission question {:?} is waiting on this connection (it was answered already, timed out, or never asked)",
        fsgate_base::error::echo(.0)
    )]
    Unknown(String),
}

/// The questions of one connection.
pub(super) struct Asks {
    pending: Pending,
    /// Where questions go; None once the connection closed.
    out: Mutex<Option<Outbox<Message>>>,
    rt: tokio::runtime::Handle,
    max_message: usize,
}

impl fmt::Debug for Asks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Asks")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Asks {
    /// The questions of a connection that writes to `out`.
    pub(super) fn new(out: Outbox<Message>, max_message: usize) -> Arc<Asks> {
        Arc::new(Asks {
            pending: Pending::new("perm-", MAX_WAITING),
            out: Mutex::new(Some(out)),
            rt: tokio::runtime::Handle::current(),
            max_message,
        })
    }

    /// How many questions wait, as it changes.
    pub(super) fn waiting(&self) -> watch::Receiver<usize> {
        self.pending.waiting()
    }

    /// Hands a reply to the question `id`.
    pub(super) fn deliver(&self, id: &str, answer: Answer) -> Result<(), ReplyError> {
        if self.pending.deliver(id, answer) {
            Ok(())
        } else {
            Err(ReplyError::Unknown(id.to_string()))
        }
    }

    /// The connection closed: every question waiting ends unanswered, and no new one is
    /// put.
    pub(super) fn close(&self) {
        self.pending.close();
        *self.out.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// A new question's id, its answer's receiver, and the outbox to put it in.
    fn open(&self) -> Result<(String, Receiver<Answer>, Outbox<Message>), Answer> {
        let closed = || Answer::Unanswered("the connection closed".into());
        let out = self
            .out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let out = out.ok_or_else(closed)?;
        match self.pending.open() {
            Ok((id, rx)) => Ok((id, rx, out)),
            Err(Refused::Closed) => Err(closed()),
            Err(Refused::Full) => Err(Answer::Unanswered(format!(
                "{MAX_WAITING} permission questions already wait on this connection"
            ))),
        }
    }

    /// Puts `q` to the client and waits for its reply (blocking).
    fn ask(&self, q: &Question, request: Option<&Request>, timeout: Duration) -> Answer {
        if on_connection_thread() {
            // A request run on its connection's own thread (none is while ask rules are
            // in force; a reload may add some meanwhile): the reply could not be read.
            return Answer::Unanswered(
                "the request ran where no reply can be read; send it again".into(),
            );
        }
        let deadline = Instant::now() + timeout;
        let (id, rx, out) = match self.open() {
            Ok(opened) => opened,
            Err(answer) => return answer,
        };
        let text = question_text(&id, q, request, self.max_message);
        let len = text.len();
        let sent = self.rt.block_on(tokio::time::timeout(
            timeout,
            out.send(Message::text(text), len),
        ));
        drop(out);
        let answer = match sent {
            Err(_) => Answer::Timeout,
            Ok(false) => Answer::Unanswered("the connection closed".into()),
            Ok(true) => questions::wait(&rx, deadline, || {
                Answer::Unanswered("the connection closed before an answer came".into())
            }),
        };
        self.pending.withdraw(&id);
        answer
    }
}

/// The client's request that asks: its `type` and `requestId`, named in the question.
#[derive(Debug, Clone)]
pub(super) struct Request {
    /// The request's `type`.
    pub kind: String,
    /// The request's `requestId`.
    pub id: Option<Value>,
}

/// The asker of one connection (and, if known, of one of its requests).
#[derive(Debug, Clone)]
pub(super) struct WsAsker {
    asks: Arc<Asks>,
    request: Option<Request>,
}

impl WsAsker {
    /// The connection's asker.
    pub(super) fn new(asks: Arc<Asks>) -> WsAsker {
        WsAsker {
            asks,
            request: None,
        }
    }

    /// The same asker, naming `request` in its questions.
    pub(super) fn for_request(&self, request: Request) -> WsAsker {
        WsAsker {
            asks: Arc::clone(&self.asks),
            request: Some(request),
        }
    }
}

/// Whether this thread runs a one-thread runtime (a WebSocket connection's own): it
/// cannot block on that runtime, nor read a reply while it waits.
fn on_connection_thread() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

impl Asker for WsAsker {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        self.asks.ask(q, self.request.as_ref(), timeout)
    }
}

/// The `permission` message; without the diff if the message would be over `max`.
fn question_text(id: &str, q: &Question, request: Option<&Request>, max: usize) -> String {
    let op = channel_op(q.op);
    let mut data = json!({
        "op": op,
        "class": q.class,
        "path": q.path,
        "rule": q.rule,
        "reason": q.reason,
        "title": format!("{op} {}", q.shown_path()),
        "options": OPTIONS,
    });
    if let Some(r) = request {
        data["request"] = json!({"type": r.kind, "requestId": r.id});
    }
    let msg = |data: &Value| {
        json!({"channel": CHANNEL, "type": "permission", "requestId": id, "data": data}).to_string()
    };
    let Some(p) = &q.proposed else {
        return msg(&data);
    };
    data["diff"] = json!({"oldText": p.old_text, "newText": p.new_text});
    let text = msg(&data);
    if text.len() <= max {
        return text;
    }
    if let Some(d) = data.as_object_mut() {
        d.remove("diff");
        d.insert("diffOmitted".into(), json!(true));
    }
    msg(&data)
}

/// The channel's name of a gateway operation (its message `type`).
fn channel_op(op: OpId) -> &'static str {
    match op {
        OpId::ReadText | OpId::ReadFile | OpId::Open => "read",
        OpId::Write | OpId::Edit => "write",
        OpId::Ls => "list",
        OpId::Rm => "delete",
        // Every other operation by its record name.
        _ => op.name(),
    }
}

/// A reply's `answer` field.
pub(super) fn parse_answer(v: Option<&Value>) -> Result<Answer, String> {
    let kind = v.and_then(Value::as_str);
    match kind.map(|k| (k, Answer::from_kind(k))) {
        Some((_, Some(answer))) => Ok(answer),
        Some((other, None)) => Err(format!(
            "unknown answer {:?}; use \"allow_once\", \"allow_always\" or \"reject_once\"",
            fsgate_base::error::echo(other)
        )),
        None => {
            Err("missing \"answer\": \"allow_once\", \"allow_always\" or \"reject_once\"".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_gateway::ask::Proposed;

    fn question(proposed: Option<Proposed>) -> Question {
        Question {
            op: OpId::Write,
            class: "write".into(),
            path: "/ci.yml".into(),
            abs_path: "/w/ci.yml".into(),
            rule: "ask-ci".into(),
            reason: "CI config".into(),
            proposed,
            replaced: None,
            session: "ws-1".into(),
        }
    }

    #[test]
    fn the_question_names_the_request_and_carries_the_diff_within_the_limit() {
        let p = Proposed {
            old_text: None,
            new_text: "x".repeat(100),
        };
        let r = Request {
            kind: "write".into(),
            id: Some(json!(7)),
        };
        let v: Value = serde_json::from_str(&question_text(
            "perm-1",
            &question(Some(p.clone())),
            Some(&r),
            4096,
        ))
        .unwrap_or_default();
        assert_eq!(v["type"], "permission");
        assert_eq!(v["requestId"], "perm-1");
        assert_eq!(v["data"]["rule"], "ask-ci");
        assert_eq!(v["data"]["op"], "write");
        assert_eq!(v["data"]["title"], "write /ci.yml");
        assert_eq!(v["data"]["request"]["requestId"], 7);
        assert_eq!(v["data"]["diff"]["oldText"], Value::Null);
        assert_eq!(v["data"]["options"], json!(OPTIONS));
        let small: Value =
            serde_json::from_str(&question_text("perm-2", &question(Some(p)), None, 150))
                .unwrap_or_default();
        assert!(small["data"].get("diff").is_none(), "{small}");
        assert_eq!(small["data"]["diffOmitted"], true);
    }

    #[test]
    fn answers_are_the_three_options() {
        assert_eq!(
            parse_answer(Some(&json!("allow_always"))),
            Ok(Answer::AllowSession)
        );
        assert_eq!(
            parse_answer(Some(&json!("reject_once"))),
            Ok(Answer::Reject)
        );
        assert!(parse_answer(Some(&json!("yes"))).is_err());
        assert!(parse_answer(Some(&json!(1))).is_err());
        assert!(parse_answer(None).is_err());
    }

    /// What a client chose is echoed in an error only as far as every error echoes.
    #[test]
    fn a_huge_answer_or_id_is_echoed_bounded() {
        let huge = "y".repeat(1 << 20);
        let bound = 2 * fsgate_base::error::MAX_ECHO;
        let err = parse_answer(Some(&json!(huge))).expect_err("unknown answer");
        assert!(err.len() < bound, "{} bytes", err.len());
        assert!(err.contains("bytes not shown"), "{err}");
        let unknown = ReplyError::Unknown(huge).to_string();
        assert!(unknown.len() < bound, "{} bytes", unknown.len());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reply_reaches_the_waiting_question_and_only_once() {
        let (out, mut rx) = Outbox::<Message>::new(1 << 20);
        let asks = Asks::new(out, 1 << 20);
        let asker = WsAsker::new(Arc::clone(&asks));
        let waiting = tokio::task::spawn_blocking(move || {
            asker.ask(&question(None), Duration::from_secs(30))
        });
        let Some(q) = rx.recv().await else {
            panic!("no question sent")
        };
        let v: Value =
            serde_json::from_str(q.msg.to_text().unwrap_or_default()).unwrap_or_default();
        let id = v["requestId"].as_str().unwrap_or_default().to_string();
        assert!(matches!(
            asks.deliver("perm-99", Answer::AllowOnce),
            Err(ReplyError::Unknown(_))
        ));
        assert!(asks.deliver(&id, Answer::Reject).is_ok());
        assert!(asks.deliver(&id, Answer::AllowOnce).is_err());
        assert_eq!(waiting.await.ok(), Some(Answer::Reject));
        assert_eq!(*asks.waiting().borrow(), 0);
    }

    /// A question met by a request running on its connection's own thread (a reload
    /// added ask rules after the request was let run there) is unanswered at once: no
    /// panic, nothing sent, no question left waiting.
    #[test]
    fn a_question_on_the_connections_own_thread_is_unanswered() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (out, mut rx) = Outbox::<Message>::new(1 << 20);
            let asks = Asks::new(out, 1 << 20);
            let asker = WsAsker::new(Arc::clone(&asks));
            let answer = asker.ask(&question(None), Duration::from_secs(30));
            assert!(matches!(answer, Answer::Unanswered(_)), "{answer:?}");
            assert!(rx.try_recv().is_err(), "a question was sent");
            assert_eq!(*asks.waiting().borrow(), 0);
        });
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_connection_leaves_questions_unanswered() {
        let (out, _rx) = Outbox::<Message>::new(1 << 20);
        let asks = Asks::new(out, 1 << 20);
        let asker = WsAsker::new(Arc::clone(&asks));
        let waiting = tokio::task::spawn_blocking(move || {
            asker.ask(&question(None), Duration::from_secs(30))
        });
        let mut count = asks.waiting();
        while *count.borrow_and_update() == 0 {
            let _ = count.changed().await;
        }
        asks.close();
        let answer = waiting.await.ok();
        assert!(matches!(answer, Some(Answer::Unanswered(_))), "{answer:?}");
        let after = WsAsker::new(asks).ask(&question(None), Duration::from_secs(30));
        assert!(matches!(after, Answer::Unanswered(_)));
    }
}
