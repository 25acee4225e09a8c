//! `ask` rules: a person decides, through the prompt of the client they already use.
//!
//! The gateway decides as always; when the deciding rule asks, the request's thread (a
//! blocking-pool thread, never a door's reader) puts a [`Question`] to the door's
//! [`Asker`] and waits for the [`Answer`] or the policy's `[ask] timeout_secs`. No asker
//! (a client that cannot be asked), no answer in time, or a rejection: the request is
//! refused, naming the rule. The audit record of the request says that a person was
//! asked, what they answered, when, and the rule (`details.asked`).
//!
//! "Allow for this session" holds for the same rule and the same operation class in the
//! same session, until the gateway stops; a reloaded policy keeps it only while the rule
//! of that id is unchanged ([`fsgate_decide::Rule::same_scope`]).
//!
//! A change's `write` and `delete` questions are put last, once every other check of the
//! change passed (just before its first backup or its intent): a change a limit, a size
//! or content rule or a deny refuses anyway asks nobody. A read's are put at once (what
//! it would read must not answer anything before a person allowed it).

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::door::PathStyle;
use fsgate_audit::canonical::now_ts;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::Decision;

/// The longest text of a write or edit put in a question or a change note: a larger
/// one is described by its size only, so a prompt stays bounded.
pub(crate) const MAX_SHOWN_TEXT: usize = 256 * 1024;
/// The most "allow for this session" grants kept; past it, the oldest are not dropped
/// but new ones are not kept (the person is asked again).
pub(crate) const MAX_GRANTS: usize = 4096;

/// A door that can put a question to a person.
pub trait Asker: Send + Sync + fmt::Debug {
    /// Puts `q` to the person and blocks until they answer or `timeout` passes. Called
    /// on a blocking-pool thread: the door must keep reading its client meanwhile.
    fn ask(&self, q: &Question, timeout: Duration) -> Answer;

    /// Whether an "allow for this session" answer may stand for the session's later
    /// requests. False for a door whose requests each stand alone (the stateless MCP
    /// wire): its answers decide their own request only, and no grant answers for it.
    fn keeps_grants(&self) -> bool {
        true
    }

    /// An answer a person already gave that stands for `q` (the view: the open of the
    /// file whose later close applies this write), as the name `details.asked` records
    /// instead of asking again; None: ask.
    fn standing(&self, _q: &Question) -> Option<&'static str> {
        None
    }

    /// Whether the person is shown a write's proposed content (an editor's diff): then
    /// each write is put to them, whatever an earlier question of its open answered.
    fn shows_content(&self) -> bool {
        false
    }
}

/// `details.asked[].answer` of a question a person's allowing of the file's open for
/// writing answered (the view: one `>` is one question, not one per close).
pub const ALLOWED_AT_OPEN: &str = "allowed_at_open";

/// The text a write or edit proposes, for a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// The text replaced: an edit's `oldText`; None for a write (or a new file).
    pub old_text: Option<String>,
    /// The new text: a write's content, an edit's `newText`.
    pub new_text: String,
}

/// What a write replaced, for a door that shows changes as diffs: the file's previous
/// text, or only its size when that is too large to show or is not text (a diff without
/// the old text would read as a new file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// The previous text, whole (at most `MAX_SHOWN_TEXT` bytes).
    Text(String),
    /// Not shown: the previous size in bytes, and why.
    Unshown {
        /// The previous content's size.
        bytes: u64,
        /// Why it is not shown.
        why: &'static str,
    },
}

impl Replaced {
    /// The previous content of a file of `size` bytes, from its first bytes `head` (read
    /// up to one byte past `MAX_SHOWN_TEXT`).
    pub fn of(head: Vec<u8>, size: u64) -> Replaced {
        let unshown = |why| Replaced::Unshown { bytes: size, why };
        if head.len() > MAX_SHOWN_TEXT || size > MAX_SHOWN_TEXT as u64 {
            return unshown("larger than 256 KiB");
        }
        if head.iter().take(8192).any(|&b| b == 0) {
            return unshown("not text");
        }
        String::from_utf8(head).map_or_else(|_| unshown("not text"), Replaced::Text)
    }
}

/// What a person is asked.
#[derive(Debug, Clone)]
pub struct Question {
    /// The request's operation.
    pub op: crate::ops::id::OpId,
    /// The operation class the rule covers here (`read`, `write`, `delete`, `list`).
    pub class: String,
    /// The path decided on, normalised (no `..`), as the request's transport writes
    /// paths: what the person must read, whatever text the agent sent.
    pub path: String,
    /// The same path, absolute (ACP locations and diffs name absolute paths).
    pub abs_path: PathBuf,
    /// The deciding rule's id.
    pub rule: String,
    /// The rule's reason.
    pub reason: String,
    /// For a write or edit: the text it proposes.
    pub proposed: Option<Proposed>,
    /// For a write over a file: what it replaces (a diff without it reads as a new file).
    pub replaced: Option<Replaced>,
    /// The session the request came in.
    pub session: String,
}

impl Question {
    /// One line naming the operation and the path, for a prompt's title.
    pub fn title(&self) -> String {
        format!("{} {}", self.op.name(), self.shown_path())
    }

    /// The path for a person to read: the agent chose it, so control and bidi characters
    /// are escaped (no line of its own, no reordering), and a long one is cut at its
    /// start, keeping the file's name in view.
    pub fn shown_path(&self) -> String {
        const MAX: usize = 240;
        let escaped = fsgate_base::text::escape_for_humans(&self.path);
        fsgate_base::text::tail(&escaped, MAX).into_owned()
    }
}

/// A person's answer, or why there was none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Yes, this once.
    AllowOnce,
    /// Yes, and for the same rule and operation for the rest of the session.
    AllowSession,
    /// No.
    Reject,
    /// No answer within the policy's timeout.
    Timeout,
    /// The client could not be asked (no capability, no connected client, the
    /// connection closed); the text says why.
    Unanswered(String),
}

impl Answer {
    /// The answer's name in the audit record.
    pub fn as_str(&self) -> &'static str {
        match self {
            Answer::AllowOnce => "allow_once",
            Answer::AllowSession => "allow_always",
            Answer::Reject => "reject_once",
            Answer::Timeout => "timeout",
            Answer::Unanswered(_) => "unanswered",
        }
    }

    /// The person's answer a client's option kind names (`allow_once`, `allow_always`,
    /// `reject_once`, the kinds every door offers); None for anything else.
    pub fn from_kind(kind: &str) -> Option<Answer> {
        match kind {
            "allow_once" => Some(Answer::AllowOnce),
            "allow_always" => Some(Answer::AllowSession),
            "reject_once" => Some(Answer::Reject),
            _ => None,
        }
    }

    /// True for a yes.
    pub(crate) fn allows(&self) -> bool {
        matches!(self, Answer::AllowOnce | Answer::AllowSession)
    }

    /// Why the request was refused, for a refusal's message.
    fn refusal(&self, timeout: Duration) -> String {
        match self {
            Answer::Reject => "the person asked said no".into(),
            Answer::Timeout => format!("no answer within {} s", timeout.as_secs()),
            Answer::Unanswered(why) => format!("nobody could be asked: {why}"),
            Answer::AllowOnce | Answer::AllowSession => "allowed".into(),
        }
    }
}

/// "Allow for this session" grants: (session, rule, operation class).
#[derive(Debug, Default)]
pub(crate) struct Grants(Mutex<HashSet<(String, String, String)>>);

impl Grants {
    fn has(&self, session: &str, rule: &str, class: &str) -> bool {
        let key = (session.to_owned(), rule.to_owned(), class.to_owned());
        self.0.lock().is_ok_and(|g| g.contains(&key))
    }

    /// Keeps the grants of the rules `same` says still mean what they meant (a reload).
    pub(crate) fn retain(&self, same: impl Fn(&str) -> bool) {
        if let Ok(mut g) = self.0.lock() {
            g.retain(|(_, rule, _)| same(rule));
        }
    }

    fn add(&self, session: &str, rule: &str, class: &str) {
        if let Ok(mut g) = self.0.lock()
            && g.len() < MAX_GRANTS
        {
            g.insert((session.to_owned(), rule.to_owned(), class.to_owned()));
        }
    }
}

/// What a request needs to ask: its door's asker, the policy's timeout, the gateway's
/// session grants, and the request's own answers so far.
#[derive(Debug)]
pub(crate) struct AskCtx {
    asker: Option<Arc<dyn Asker>>,
    timeout: Duration,
    grants: Arc<Grants>,
    session: String,
    root: PathBuf,
    proposed: Option<Proposed>,
    /// What a write replaces, once known (read only when a question waits for it).
    replaced: Option<Replaced>,
    /// (rule, class) this request was already allowed for: asked once per request.
    allowed: Vec<(String, String)>,
    /// A change's request: its write and delete questions wait in `pending` until the
    /// change is about to be made, so a request a later check refuses asks nobody.
    defer: bool,
    pending: Vec<Pending>,
    /// How the request's transport writes paths, for the question's path.
    style: PathStyle,
    /// The workspace's name when several are served: a WebSocket path starts with it.
    workspace: Option<Arc<str>>,
}

/// A question put off until the change is about to be made.
#[derive(Debug)]
struct Pending {
    rule: String,
    reason: String,
    waived: Vec<String>,
    op: crate::ops::id::OpId,
    class: &'static str,
    path: RelPath,
    shown: String,
    /// The last path the question arose for, and how many others than `path` it
    /// covers (a directory's entries): the person is told, not shown one of many.
    last: RelPath,
    more: usize,
}

impl AskCtx {
    /// The context of one request.
    pub(crate) fn new(
        asker: Option<Arc<dyn Asker>>,
        timeout: Duration,
        grants: Arc<Grants>,
        session: &str,
        root: PathBuf,
        proposed: Option<Proposed>,
    ) -> AskCtx {
        AskCtx {
            asker,
            timeout,
            grants,
            session: session.to_owned(),
            root,
            proposed,
            replaced: None,
            allowed: Vec::new(),
            defer: false,
            pending: Vec::new(),
            style: PathStyle::Absolute,
            workspace: None,
        }
    }

    /// The workspace the request is in, when several are served.
    pub(crate) fn in_workspace(mut self, name: Option<Arc<str>>) -> AskCtx {
        self.workspace = name;
        self
    }

    /// True if questions were put off (see [`settle_pending`]).
    pub(crate) fn waits(&self) -> bool {
        !self.pending.is_empty()
    }

    /// True if a question waits that would show a write's text: it should show the
    /// text that write replaces too ([`AskCtx::replacing`]).
    pub(crate) fn wants_replaced(&self) -> bool {
        self.waits() && self.proposed.as_ref().is_some_and(|p| p.old_text.is_none())
    }

    /// The write's questions show `r` as the text it replaces.
    pub(crate) fn replacing(&mut self, r: Replaced) {
        self.replaced = Some(r);
    }

    /// `from` leads to `to` (a symlink on the way): a question put off about `from` is
    /// asked about `to`, the entry the change really touches.
    pub(crate) fn retarget(&mut self, from: &RelPath, to: &RelPath) {
        for p in self.pending.iter_mut().filter(|p| p.path == *from) {
            p.path = to.clone();
        }
    }

    /// Questions name paths as `style` writes them.
    pub(crate) fn in_style(mut self, style: PathStyle) -> AskCtx {
        self.style = style;
        self
    }

    /// Puts off the write and delete questions of a change (see [`settle_pending`]).
    pub(crate) fn deferring(mut self, defer: bool) -> AskCtx {
        self.defer = defer;
        self
    }

    /// A request with nobody to ask: every ask is refused.
    pub(crate) fn unaskable() -> AskCtx {
        AskCtx::new(
            None,
            Duration::ZERO,
            Arc::default(),
            "",
            PathBuf::new(),
            None,
        )
    }
}

/// One question and its answer, for the audit record.
#[derive(Debug, Clone)]
pub(crate) struct AskRecord {
    rule: String,
    class: String,
    answer: &'static str,
    asked_at: String,
    answered_at: String,
    waited_ms: u64,
    note: Option<String>,
}

impl AskRecord {
    /// The rule asked about.
    pub(crate) fn rule(&self) -> &str {
        &self.rule
    }

    /// True if a person was put the question (not an earlier grant answering it).
    pub(crate) fn put_to_person(&self) -> bool {
        self.answer != "allowed_for_session" && self.answer != ALLOWED_AT_OPEN
    }

    /// The record as `details.asked[]` holds it.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("rule".into(), json!(self.rule));
        m.insert("class".into(), json!(self.class));
        m.insert("answer".into(), json!(self.answer));
        m.insert("askedAt".into(), json!(self.asked_at));
        m.insert("answeredAt".into(), json!(self.answered_at));
        m.insert("waitedMs".into(), json!(self.waited_ms));
        if let Some(n) = &self.note {
            m.insert("note".into(), json!(n));
        }
        Value::Object(m)
    }
}

/// Settles an ask decision: Ok(true) if a person allowed it (now, earlier in this
/// request, or for the session), else the refusal naming the rule. `asked` gets what
/// happened. A change's write or delete question is only noted here (Ok(false)), and put
/// by [`settle_pending`] once every other check of the change has passed.
pub(crate) fn settle(
    ctx: &mut AskCtx,
    d: &Decision<'_>,
    (op, class): (crate::ops::id::OpId, &str),
    path: &RelPath,
    shown: &str,
    asked: &mut Vec<AskRecord>,
) -> Result<bool, GatewayError> {
    // Callers name an operation (`edit`, `rm`) or a class: asked once per rule and class,
    // a write's edit check and its size check are the same question.
    let class = fsgate_decide::Access::parse(class).map_or(class, |a| a.primary().as_str());
    let deferred = match class {
        "write" => Some("write"),
        "delete" => Some("delete"),
        _ => None,
    };
    if let Some(class) = deferred.filter(|_| ctx.defer) {
        let same = |p: &&mut Pending| p.rule == d.rule && p.class == class;
        if let Some(p) = ctx.pending.iter_mut().find(same) {
            if p.path != *path && p.last != *path {
                p.more += 1;
            }
            p.last = path.clone();
        } else {
            ctx.pending.push(Pending {
                rule: d.rule.to_owned(),
                reason: d.reason.to_string(),
                waived: d.waived.iter().map(|w| (*w).to_owned()).collect(),
                op,
                class,
                path: path.clone(),
                shown: shown.to_owned(),
                last: path.clone(),
                more: 0,
            });
        }
        return Ok(false);
    }
    put(ctx, (d.rule, &d.reason), (op, class), (path, shown), asked).map(|()| true)
}

/// Puts the questions [`settle`] put off, in the order they arose; the first one not
/// allowed refuses the change. Each one allowed is passed to `decided`.
pub(crate) fn settle_pending(
    ctx: &mut AskCtx,
    asked: &mut Vec<AskRecord>,
    mut decided: impl FnMut(&Decision<'_>),
) -> Result<(), GatewayError> {
    for p in std::mem::take(&mut ctx.pending) {
        let reason = p.reason.as_str();
        let told = match p.more {
            0 => reason.to_owned(),
            1 => format!(
                "{reason}; this {} also covers 1 more entry under the rule",
                p.op.name()
            ),
            n => format!(
                "{reason}; this {} also covers {n} more entries under the rule",
                p.op.name()
            ),
        };
        put(
            ctx,
            (&p.rule, &told),
            (p.op, p.class),
            (&p.path, &p.shown),
            asked,
        )?;
        decided(&Decision {
            effect: fsgate_decide::Effect::Ask,
            rule: &p.rule,
            reason: reason.into(),
            waived: p.waived.iter().map(String::as_str).collect(),
        });
    }
    Ok(())
}

/// Asks (unless already allowed in this request or the session) and records the answer.
fn put(
    ctx: &mut AskCtx,
    (rule, reason): (&str, &str),
    (op, class): (crate::ops::id::OpId, &str),
    (path, shown): (&RelPath, &str),
    asked: &mut Vec<AskRecord>,
) -> Result<(), GatewayError> {
    let rule = rule.to_string();
    if ctx.allowed.iter().any(|(r, c)| *r == rule && c == class) {
        return Ok(());
    }
    let keeps = ctx.asker.as_ref().is_none_or(|a| a.keeps_grants());
    if keeps && ctx.grants.has(&ctx.session, &rule, class) {
        asked.push(record(&rule, class, "allowed_for_session", None));
        ctx.allowed.push((rule, class.to_owned()));
        return Ok(());
    }
    let started = Instant::now();
    let asked_at = now_ts();
    let answer = match &ctx.asker {
        None => Answer::Unanswered("this client cannot be asked".into()),
        Some(asker) => {
            let q = Question {
                op,
                class: class.to_owned(),
                path: match (ctx.style, &ctx.workspace) {
                    (PathStyle::Rooted, Some(name)) => crate::scope::named(name, path).to_rooted(),
                    (PathStyle::Rooted, None) => path.to_rooted(),
                    _ => path.to_absolute(&ctx.root),
                },
                abs_path: ctx.root.join(path.as_str()),
                rule: rule.clone(),
                reason: reason.to_string(),
                proposed: ctx.proposed.clone(),
                replaced: ctx.replaced.clone(),
                session: ctx.session.clone(),
            };
            if let Some(standing) = asker.standing(&q) {
                asked.push(record(&rule, class, standing, None));
                ctx.allowed.push((rule, class.to_owned()));
                return Ok(());
            }
            asker.ask(&q, ctx.timeout)
        }
    };
    // An asker that keeps no grants (a stateless answer decides its own call only):
    // "allow for this session" allows this call once, and is recorded so.
    let answer = match answer {
        Answer::AllowSession if !keeps => Answer::AllowOnce,
        a => a,
    };
    let note = match &answer {
        Answer::Unanswered(why) => Some(why.clone()),
        _ => None,
    };
    let mut rec = record(&rule, class, answer.as_str(), note);
    rec.asked_at = asked_at;
    rec.waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    asked.push(rec);
    if answer == Answer::AllowSession {
        ctx.grants.add(&ctx.session, &rule, class);
    }
    if answer.allows() {
        ctx.allowed.push((rule, class.to_owned()));
        return Ok(());
    }
    Err(GatewayError::Refused {
        reason: format!(
            "{class} of `{path}` needs a person's approval ({reason}), and {}",
            answer.refusal(ctx.timeout)
        ),
        rule,
        path: shown.to_string(),
    })
}

fn record(rule: &str, class: &str, answer: &'static str, note: Option<String>) -> AskRecord {
    let now = now_ts();
    AskRecord {
        rule: rule.to_owned(),
        class: class.to_owned(),
        answer,
        asked_at: now.clone(),
        answered_at: now,
        waited_ms: 0,
        note,
    }
}

#[cfg(test)]
#[path = "ask_tests.rs"]
mod tests;
