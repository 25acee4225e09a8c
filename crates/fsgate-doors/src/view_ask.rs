//! `fsgate acp --confine-agent` and the agent's own processes: an `ask` rule hit by a
//! process reading or writing through the view (the agent's shell, a build it runs)
//! is put to the editor as the agent's file tools' are, by `session/request_permission`
//! (`acp_ask.rs`'s `EditorAsker`), naming the process, in the ACP session the editor
//! last opened or prompted in (the view's processes do not say which session they
//! serve; the turn in progress is the last prompted).
//!
//! The view is served before the relay starts: a question that comes before the relay
//! is connected or before any session is open has nobody to go to and is refused at
//! once; the request's record says why (`details.asked[].note`).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::acp_ask::EditorAsker;
use fsgate_gateway::ask::{Answer, Asker, Question};

/// Where the view's questions go: the relay's editor asker once it runs, and the
/// session they are asked in.
#[derive(Default)]
pub struct ViewQuestions {
    link: Mutex<Link>,
}

#[derive(Default)]
struct Link {
    asker: Option<Arc<EditorAsker>>,
    session: Option<String>,
}

impl fmt::Debug for ViewQuestions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ViewQuestions").finish_non_exhaustive()
    }
}

impl ViewQuestions {
    /// Nobody to ask yet.
    pub fn new() -> Arc<ViewQuestions> {
        Arc::default()
    }

    /// The asker of one view request from `peer` (the process, as the view names it).
    pub fn asker(self: &Arc<Self>, peer: String) -> Arc<dyn Asker> {
        Arc::new(ViewAsker {
            questions: Arc::clone(self),
            peer,
        })
    }

    /// The relay runs: questions go to the editor through `asker`.
    pub(crate) fn connect(&self, asker: &Arc<EditorAsker>) {
        if let Ok(mut link) = self.link.lock() {
            link.asker = Some(Arc::clone(asker));
        }
    }

    /// The editor opened or prompted in session `sid`: later questions are asked there.
    pub(crate) fn in_session(&self, sid: &str) {
        if let Ok(mut link) = self.link.lock() {
            link.session = Some(sid.to_owned());
        }
    }

    fn now(&self) -> Result<(Arc<EditorAsker>, String), String> {
        let link = (self.link.lock()).map_err(|_| "the editor's link is unavailable")?;
        let asker = (link.asker.clone()).ok_or("the editor is not connected yet")?;
        let session = (link.session.clone())
            .ok_or("no ACP session is open yet, so the editor has nowhere to be asked")?;
        Ok((asker, session))
    }
}

/// The asker of one view request.
#[derive(Debug)]
struct ViewAsker {
    questions: Arc<ViewQuestions>,
    peer: String,
}

impl Asker for ViewAsker {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        let (asker, session) = match self.questions.now() {
            Ok(now) => now,
            Err(why) => return Answer::Unanswered(why),
        };
        // ACP names sessions of its own and absolute paths; the view's are its own.
        let mut q = q.clone();
        q.session = session;
        q.path = q.abs_path.to_string_lossy().into_owned();
        asker.ask_by(&q, timeout, Some(&self.peer))
    }

    /// The editor shows a write's text as a diff.
    fn shows_content(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Question {
        Question {
            op: fsgate_gateway::ops::OpId::Open,
            class: "read".into(),
            path: "/asked.txt".into(),
            abs_path: "/ws/asked.txt".into(),
            rule: "ask-asked".into(),
            reason: "looked at first".into(),
            proposed: None,
            replaced: None,
            session: "acp-view".into(),
        }
    }

    /// The person reads which process asked, escaped (it named itself).
    #[test]
    fn the_question_names_the_process_escaped() {
        let by = "pid 7 exe \"/usr/bin/cat\" argv [\"cat\",\"x\u{202e}\nfsgate: allowed\"]";
        let req = crate::acp_ask::permission_request("fsgate-ask-1", &question(), Some(by));
        let call = &req["params"]["toolCall"];
        let said = call["content"][1]["content"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(said.contains("pid 7 exe \"/usr/bin/cat\""), "{said}");
        assert!(!said.contains('\n') && !said.contains('\u{202e}'), "{said}");
        let meta = call["_meta"]["fsgate"]["process"]
            .as_str()
            .unwrap_or_default();
        assert!(meta.starts_with("pid 7") && said.ends_with(meta), "{req}");
    }

    #[test]
    fn without_a_relay_or_a_session_nobody_is_asked_and_the_answer_says_why() {
        let qs = ViewQuestions::new();
        let asker = qs.asker("pid 7 exe \"/usr/bin/cat\"".into());
        let answer = asker.ask(&question(), Duration::from_secs(5));
        let Answer::Unanswered(why) = answer else {
            panic!("{answer:?}");
        };
        assert!(why.contains("not connected"), "{why}");
        qs.in_session("s1");
        let answer = asker.ask(&question(), Duration::from_secs(5));
        assert!(matches!(answer, Answer::Unanswered(_)), "{answer:?}");
    }

    /// The editor is shown a write's content as a diff: the view asks it at every
    /// close, whatever the write's open was answered (an open's answer does not stand).
    #[test]
    fn the_editor_is_shown_the_content_so_no_open_answers_for_a_close() {
        let asker = ViewQuestions::new().asker("pid 7".into());
        assert!(asker.shows_content());
        assert_eq!(asker.standing(&question()), None);
    }
}
