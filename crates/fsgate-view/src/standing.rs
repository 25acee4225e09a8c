//! One question per open for writing, not one per close: a person who allowed a process
//! to open a file for writing (an `ask` rule's `write` question, at the open or at the
//! create) has answered for what that open writes. Each handle open for writing keeps
//! the questions allowed at its open ([`Standing`]); a close that applies the file's
//! private copy (the truncation, the content) is answered by them, recorded as
//! `allowed_at_open`, only if every handle open for writing on the copy holds the
//! same answer under the policy now in force: a handle nobody was asked about (opened
//! under another name before a rename, or before a reload made the rule ask) has its
//! questions put as before. So is every question when the person is shown a write's
//! content (the editor's diff under `--confine-agent`): that review is not skipped.
//! Only an open's answers are kept, never a close's. A shell's `>` used to put the same
//! question three times: at the open, at the close that applies the truncation, and at
//! the last close.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsgate_gateway::ask::{ALLOWED_AT_OPEN, Answer, Asker, Question};

/// Answers kept per handle at most (an open decided under several rules).
const MAX_KEPT: usize = 16;

/// (rule, class, path, policy hash) of a question a person allowed.
type Key = (String, String, String, Arc<str>);

fn key(q: &Question, policy: &Arc<str>) -> Key {
    (
        q.rule.clone(),
        q.class.clone(),
        q.path.clone(),
        Arc::clone(policy),
    )
}

/// The questions a person allowed at one handle's open for writing.
#[derive(Debug, Default)]
pub(crate) struct Standing(Mutex<Vec<Key>>);

impl Standing {
    fn note(&self, k: Key) {
        if let Ok(mut kept) = self.0.lock()
            && kept.len() < MAX_KEPT
            && !kept.contains(&k)
        {
            kept.push(k);
        }
    }

    fn has(&self, k: &Key) -> bool {
        self.0.lock().is_ok_and(|kept| kept.contains(k))
    }

    /// `inner`, keeping in these what a person allows (an open's, a create's asker),
    /// under the policy of hash `policy`.
    pub(crate) fn keeping(
        self: &Arc<Self>,
        inner: Arc<dyn Asker>,
        policy: Arc<str>,
    ) -> Arc<dyn Asker> {
        Arc::new(Keeping {
            inner,
            standing: Arc::clone(self),
            policy,
        })
    }
}

/// `inner`, answering a question that every one of `open` holds (a close's asker: the
/// standings of every handle open for writing on the copy), under the policy of hash
/// `policy`; it keeps nothing.
pub(crate) fn answering(
    open: Vec<Arc<Standing>>,
    inner: Arc<dyn Asker>,
    policy: Arc<str>,
) -> Arc<dyn Asker> {
    Arc::new(Answering {
        inner,
        open,
        policy,
    })
}

/// An open's asker: keeps what a person allows.
#[derive(Debug)]
struct Keeping {
    inner: Arc<dyn Asker>,
    standing: Arc<Standing>,
    policy: Arc<str>,
}

impl Asker for Keeping {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        let answer = self.inner.ask(q, timeout);
        if matches!(answer, Answer::AllowOnce | Answer::AllowSession) {
            self.standing.note(key(q, &self.policy));
        }
        answer
    }

    fn keeps_grants(&self) -> bool {
        self.inner.keeps_grants()
    }

    fn shows_content(&self) -> bool {
        self.inner.shows_content()
    }
}

/// A close's asker: answers from the open handles' standings.
#[derive(Debug)]
struct Answering {
    inner: Arc<dyn Asker>,
    open: Vec<Arc<Standing>>,
    policy: Arc<str>,
}

impl Asker for Answering {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        self.inner.ask(q, timeout)
    }

    fn keeps_grants(&self) -> bool {
        self.inner.keeps_grants()
    }

    fn shows_content(&self) -> bool {
        self.inner.shows_content()
    }

    fn standing(&self, q: &Question) -> Option<&'static str> {
        let k = key(q, &self.policy);
        let all = !self.open.is_empty() && self.open.iter().all(|s| s.has(&k));
        (all && !self.inner.shows_content()).then_some(ALLOWED_AT_OPEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Says(Answer, bool);
    impl Asker for Says {
        fn ask(&self, _q: &Question, _t: Duration) -> Answer {
            self.0.clone()
        }
        fn shows_content(&self) -> bool {
            self.1
        }
    }

    fn question(rule: &str, path: &str) -> Question {
        Question {
            op: fsgate_gateway::ops::OpId::Open,
            class: "write".into(),
            path: path.into(),
            abs_path: path.into(),
            rule: rule.into(),
            reason: String::new(),
            proposed: None,
            replaced: None,
            session: "s".into(),
        }
    }

    /// A handle whose open a person allowed.
    fn allowed_open(q: &Question, policy: &Arc<str>) -> Arc<Standing> {
        let s = Arc::new(Standing::default());
        let asker = s.keeping(Arc::new(Says(Answer::AllowOnce, false)), Arc::clone(policy));
        assert_eq!(asker.ask(q, Duration::ZERO), Answer::AllowOnce);
        s
    }

    #[test]
    fn an_open_allowed_answers_its_close_for_the_same_rule_class_path_and_policy_only() {
        let policy: Arc<str> = "p1".into();
        let q = question("ask-lock", "/Cargo.lock");
        let open = allowed_open(&q, &policy);
        let says = || Arc::new(Says(Answer::Reject, false)) as Arc<dyn Asker>;
        let close = answering(vec![Arc::clone(&open)], says(), Arc::clone(&policy));
        assert_eq!(close.standing(&q), Some(ALLOWED_AT_OPEN));
        assert_eq!(close.standing(&question("ask-lock", "/other.lock")), None);
        assert_eq!(close.standing(&question("ask-ci", "/Cargo.lock")), None);
        let reloaded = answering(vec![Arc::clone(&open)], says(), "p2".into());
        assert_eq!(reloaded.standing(&q), None, "a reload asks again");
        let nobody = answering(Vec::new(), says(), Arc::clone(&policy));
        assert_eq!(nobody.standing(&q), None);
    }

    #[test]
    fn every_handle_open_for_writing_must_hold_the_answer() {
        let policy: Arc<str> = "p1".into();
        let q = question("ask-lock", "/Cargo.lock");
        let open = allowed_open(&q, &policy);
        let unasked = Arc::new(Standing::default());
        let says = Arc::new(Says(Answer::Reject, false));
        let close = answering(vec![open, unasked], says, policy);
        assert_eq!(close.standing(&q), None);
    }

    #[test]
    fn a_close_keeps_nothing_and_a_refused_open_does_not_stand() {
        let policy: Arc<str> = "p1".into();
        let q = question("ask-lock", "/Cargo.lock");
        let open = Arc::new(Standing::default());
        let says = Arc::new(Says(Answer::AllowOnce, false));
        let close = answering(vec![Arc::clone(&open)], says, Arc::clone(&policy));
        assert_eq!(close.ask(&q, Duration::ZERO), Answer::AllowOnce);
        assert_eq!(close.standing(&q), None, "a close's answer was kept");
        for answer in [
            Answer::Reject,
            Answer::Timeout,
            Answer::Unanswered("x".into()),
        ] {
            let s = Arc::new(Standing::default());
            let asker = s.keeping(Arc::new(Says(answer, false)), Arc::clone(&policy));
            asker.ask(&q, Duration::ZERO);
            let close = answering(
                vec![s],
                Arc::new(Says(Answer::Reject, false)),
                policy.clone(),
            );
            assert_eq!(close.standing(&q), None);
        }
    }

    #[test]
    fn a_person_shown_the_content_is_asked_at_the_close_too() {
        let policy: Arc<str> = "p1".into();
        let q = question("ask-lock", "/Cargo.lock");
        let open = allowed_open(&q, &policy);
        let editor = Arc::new(Says(Answer::AllowOnce, true));
        let close = answering(vec![open], editor, policy);
        assert_eq!(close.standing(&q), None);
    }
}
