//! The questions a door has put to its client and waits on: each under an id of the
//! door's own, answered through a one-slot channel by the door's reader, bounded in
//! number, and all ended (unanswered) when the client goes. Shared by the ACP proxy
//! (`session/request_permission`) and the WebSocket channel (`permission`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

use fsgate_gateway::ask::Answer;

/// Why a question could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The client is gone.
    Closed,
    /// As many questions as allowed already wait.
    Full,
}

/// A door's waiting questions.
#[derive(Debug)]
pub(crate) struct Pending {
    prefix: &'static str,
    max: usize,
    next: AtomicU64,
    state: Mutex<State>,
    /// How many questions wait, as it changes (a reader may keep reading while some do).
    count: watch::Sender<usize>,
}

#[derive(Debug, Default)]
struct State {
    waiting: HashMap<String, SyncSender<Answer>>,
    closed: bool,
}

impl Pending {
    /// At most `max` questions at once, with ids `<prefix>1`, `<prefix>2`...
    pub(crate) fn new(prefix: &'static str, max: usize) -> Pending {
        Pending {
            prefix,
            max,
            next: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            count: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many questions wait, as it changes.
    pub(crate) fn waiting(&self) -> watch::Receiver<usize> {
        self.count.subscribe()
    }

    /// A new question's id and where its answer comes.
    pub(crate) fn open(&self) -> Result<(String, Receiver<Answer>), Refused> {
        let mut st = self.lock();
        if st.closed {
            return Err(Refused::Closed);
        }
        if st.waiting.len() >= self.max {
            return Err(Refused::Full);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{}{n}", self.prefix);
        let (tx, rx) = sync_channel(1);
        st.waiting.insert(id.clone(), tx);
        self.count.send_replace(st.waiting.len());
        Ok((id, rx))
    }

    /// Hands `answer` to the question `id`; false if none such waits (answered already,
    /// timed out, or never asked).
    pub(crate) fn deliver(&self, id: &str, answer: Answer) -> bool {
        let mut st = self.lock();
        let Some(tx) = st.waiting.remove(id) else {
            return false;
        };
        self.count.send_replace(st.waiting.len());
        // Err: the asker gave up this very moment; its timeout stands.
        let _ = tx.try_send(answer);
        true
    }

    /// The question `id` no longer waits (answered, or given up).
    pub(crate) fn withdraw(&self, id: &str) {
        let mut st = self.lock();
        if st.waiting.remove(id).is_some() {
            self.count.send_replace(st.waiting.len());
        }
    }

    /// The client is gone: every waiting question ends unanswered, and no new one opens.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.waiting.clear();
        self.count.send_replace(0);
    }
}

/// Waits (blocking) for the answer on `rx` until `deadline`; `gone` is the answer when
/// the client went first.
pub(crate) fn wait(
    rx: &Receiver<Answer>,
    deadline: Instant,
    gone: impl FnOnce() -> Answer,
) -> Answer {
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(a) => a,
        Err(RecvTimeoutError::Timeout) => Answer::Timeout,
        Err(RecvTimeoutError::Disconnected) => gone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_question_is_answered_once_bounded_and_ended_by_close() {
        let p = Pending::new("q-", 2);
        let (a, rx_a) = p.open().unwrap();
        let (b, rx_b) = p.open().unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("q-1", "q-2"));
        assert_eq!(p.open().unwrap_err(), Refused::Full);
        assert_eq!(*p.waiting().borrow(), 2);
        assert!(p.deliver(&a, Answer::AllowOnce));
        assert!(!p.deliver(&a, Answer::Reject), "answered twice");
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(wait(&rx_a, soon, || Answer::Reject), Answer::AllowOnce);
        p.close();
        let gone = || Answer::Unanswered("gone".into());
        assert_eq!(wait(&rx_b, soon, gone), Answer::Unanswered("gone".into()));
        assert_eq!(p.open().unwrap_err(), Refused::Closed);
        assert_eq!(*p.waiting().borrow(), 0);
    }

    #[test]
    fn no_answer_by_the_deadline_is_a_timeout() {
        let p = Pending::new("q-", 1);
        let (_, rx) = p.open().unwrap();
        assert_eq!(
            wait(&rx, Instant::now(), || Answer::Reject),
            Answer::Timeout
        );
    }
}
