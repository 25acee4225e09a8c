//! One question per write, not one per close: a person who allowed a process to open
//! a file for writing (an `ask` rule's `write` question) has answered for what that
//! open writes. The file's private copy keeps the questions allowed at its opens
//! ([`Standing`]); the truncation and the content its closes apply are answered by
//! them (recorded as `allowed_at_open`), not asked again. A shell's `>` used to put
//! the same question three times: at the open, at the close that applies the
//! truncation, and at the last close. The copy lives as long as the file is open for
//! writing, and so do its answers; a question about another path, rule or class is
//! put as before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fsgate_gateway::ask::{ALLOWED_AT_OPEN, Answer, Asker, Question};

/// Answers kept per copy at most (a copy's opens by many processes under many rules).
const MAX_KEPT: usize = 16;

/// The questions (rule, class, path) a person allowed at the opens of one copy.
#[derive(Debug, Default)]
pub(crate) struct Standing(Mutex<Vec<(String, String, String)>>);

impl Standing {
    fn key(q: &Question) -> (String, String, String) {
        (q.rule.clone(), q.class.clone(), q.path.clone())
    }

    fn note(&self, q: &Question) {
        self.add(Self::key(q));
    }

    fn add(&self, key: (String, String, String)) {
        if let Ok(mut kept) = self.0.lock()
            && kept.len() < MAX_KEPT
            && !kept.contains(&key)
        {
            kept.push(key);
        }
    }

    fn has(&self, q: &Question) -> bool {
        self.0.lock().is_ok_and(|k| k.contains(&Self::key(q)))
    }

    /// Keeps what `other` (an open's answers) holds too.
    pub(crate) fn absorb(&self, other: &Standing) {
        let taken = other.0.lock().map(|mut o| std::mem::take(&mut *o));
        for key in taken.unwrap_or_default() {
            self.add(key);
        }
    }

    /// `inner`, answering from (and, for an allowed question, adding to) these.
    pub(crate) fn asker(self: &Arc<Self>, inner: Arc<dyn Asker>) -> Arc<dyn Asker> {
        Arc::new(StandingAsker {
            inner,
            standing: Arc::clone(self),
        })
    }
}

/// A request's asker that answers from a copy's [`Standing`] and keeps what a person
/// allows.
#[derive(Debug)]
struct StandingAsker {
    inner: Arc<dyn Asker>,
    standing: Arc<Standing>,
}

impl Asker for StandingAsker {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        let answer = self.inner.ask(q, timeout);
        if matches!(answer, Answer::AllowOnce | Answer::AllowSession) {
            self.standing.note(q);
        }
        answer
    }

    fn keeps_grants(&self) -> bool {
        self.inner.keeps_grants()
    }

    fn standing(&self, q: &Question) -> Option<&'static str> {
        self.standing.has(q).then_some(ALLOWED_AT_OPEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Says(Answer);
    impl Asker for Says {
        fn ask(&self, _q: &Question, _t: Duration) -> Answer {
            self.0.clone()
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

    #[test]
    fn an_allowed_question_stands_for_the_same_rule_class_and_path_only() {
        let open = Arc::new(Standing::default());
        let asker = open.asker(Arc::new(Says(Answer::AllowOnce)));
        let q = question("ask-lock", "/Cargo.lock");
        assert_eq!(asker.standing(&q), None, "nothing allowed yet");
        assert_eq!(asker.ask(&q, Duration::ZERO), Answer::AllowOnce);
        let copy = Arc::new(Standing::default());
        copy.absorb(&open);
        let closing = copy.asker(Arc::new(Says(Answer::Reject)));
        assert_eq!(closing.standing(&q), Some(ALLOWED_AT_OPEN));
        assert_eq!(closing.standing(&question("ask-lock", "/other.lock")), None);
        assert_eq!(closing.standing(&question("ask-ci", "/Cargo.lock")), None);
    }

    #[test]
    fn a_refused_question_does_not_stand() {
        for answer in [
            Answer::Reject,
            Answer::Timeout,
            Answer::Unanswered("x".into()),
        ] {
            let open = Arc::new(Standing::default());
            let asker = open.asker(Arc::new(Says(answer)));
            let q = question("ask-lock", "/Cargo.lock");
            asker.ask(&q, Duration::ZERO);
            assert_eq!(asker.standing(&q), None);
        }
    }
}
