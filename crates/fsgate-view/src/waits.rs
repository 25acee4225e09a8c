//! The view's request threads that wait for something only another can end: a
//! replaced node's writeback (which the view's own threads serve) and a person's
//! answer (which may never come before its timeout). At most [`AT_MOST`] of its eight
//! threads (`THREADS`, held to this in lib.rs) wait so at once, so that two are always
//! left to serve the rest: a writeback waited for, a read, the next question's refusal.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fsgate_gateway::ask::{Answer, Asker, Question};

/// How many of the view's threads may wait at once.
pub(crate) const AT_MOST: usize = 6;

/// The threads waiting now.
#[derive(Debug, Default)]
pub(crate) struct Waits(AtomicUsize);

/// A place among the waiting threads, given back when dropped.
pub(crate) struct Wait(Arc<Waits>);

impl Waits {
    /// A place among the waiting threads, if one is free.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<Wait> {
        let before = self.0.fetch_add(1, Ordering::AcqRel);
        if before < AT_MOST {
            return Some(Wait(Arc::clone(self)));
        }
        self.0.fetch_sub(1, Ordering::AcqRel);
        None
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `inner`, asking only while a thread may wait: a question beyond is refused unasked.
pub(crate) fn bounded(inner: Arc<dyn Asker>, waits: Arc<Waits>) -> Arc<dyn Asker> {
    Arc::new(Bounded { inner, waits })
}

#[derive(Debug)]
struct Bounded {
    inner: Arc<dyn Asker>,
    waits: Arc<Waits>,
}

impl Asker for Bounded {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        match self.waits.enter() {
            Some(_wait) => self.inner.ask(q, timeout),
            None => Answer::Unanswered(format!(
                "{AT_MOST} of the view's threads wait already (for answers or writebacks)"
            )),
        }
    }

    fn keeps_grants(&self) -> bool {
        self.inner.keeps_grants()
    }

    fn standing(&self, q: &Question) -> Option<&'static str> {
        self.inner.standing(q)
    }

    fn shows_content(&self) -> bool {
        self.inner.shows_content()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_six_wait_and_a_place_is_given_back() {
        let waits = Arc::new(Waits::default());
        let held: Vec<Wait> = (0..AT_MOST).filter_map(|_| waits.enter()).collect();
        assert_eq!(held.len(), AT_MOST);
        assert!(waits.enter().is_none());
        drop(held);
        assert!(waits.enter().is_some());
    }
}
