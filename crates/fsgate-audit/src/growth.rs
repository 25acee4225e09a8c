//! The log's growth guard (`[audit] max_bytes_per_minute`, `max_session_bytes_per_minute`):
//! a budget of record bytes per minute for the whole process and for each session.
//!
//! Every record's bytes count against the process's minute; a request's (and an
//! intent's) also against its session's. Once a budget is spent, requests (of that
//! session, or of every session) are refused until its minute is over: the gateway asks
//! `Growth::admit` before any work. The first refusal of a minute is recorded like any
//! request; the others are only counted, and one `growth-limit` record says how many
//! when the minute is over (at the next request of that scope, or when the log closes).
//! So an agent at line speed adds a bounded number of bytes per minute, and one record
//! per minute about being refused.
//!
//! A minute starts with the first record or request of its scope after the previous
//! one ended (fixed windows, not a sliding one). Sessions are told apart by a hash of
//! their id; at most `MAX_SESSIONS` are followed at once (beyond that, and once no
//! minute of theirs has ended, a new session is held to the process's budget only).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Map;

use super::canonical;
use crate::record::AuditEvent;

/// The length of a budget's window.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Sessions followed at once.
pub(crate) const MAX_SESSIONS: usize = 4096;
/// The lifecycle kind saying how many refusals of a minute had no record of their own.
pub(crate) const KIND_GROWTH_LIMIT: &str = "growth-limit";
/// Rule id (and key) of the process's budget.
pub(crate) const RULE_PROCESS: &str = "audit.max_bytes_per_minute";
/// Rule id (and key) of a session's budget.
pub(crate) const RULE_SESSION: &str = "audit.max_session_bytes_per_minute";
/// The most bytes of a session id kept for the `growth-limit` record.
const SESSION_KEPT: usize = 256;

/// Which budget refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every session together.
    Process,
    /// One session.
    Session,
}

impl Scope {
    /// The policy key (and rule id) of this budget.
    pub fn rule(self) -> &'static str {
        match self {
            Scope::Process => RULE_PROCESS,
            Scope::Session => RULE_SESSION,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scope::Process => "process",
            Scope::Session => "session",
        }
    }
}

/// A request refused because a budget is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which budget.
    pub scope: Scope,
    /// Its bytes per minute.
    pub limit: u64,
    /// Seconds until its minute is over.
    pub retry_after_secs: u64,
    /// The first refusal of its minute: record it (the others are only counted).
    pub first: bool,
}

impl Refusal {
    /// The refusal's one-line reason.
    pub fn reason(&self) -> String {
        let whose = match self.scope {
            Scope::Process => "the gateway's sessions together have",
            Scope::Session => "this session has",
        };
        format!(
            "{whose} added {} bytes of audit records within a minute, the most [audit] {} allows; \
             requests are refused for {} s more (only the first refusal of the minute is recorded)",
            self.limit,
            self.scope.rule().trim_start_matches("audit."),
            self.retry_after_secs
        )
    }
}

/// One scope's current minute.
#[derive(Debug)]
struct Window {
    start: Instant,
    /// Bytes recorded in it.
    used: u64,
    /// Whether a refusal of this minute was recorded already.
    recorded: bool,
    /// Refusals of this minute with no record of their own.
    unrecorded: u64,
    /// When the first and the last of those came.
    since: String,
    until: String,
    /// The session's id (its first bytes), for the `growth-limit` record.
    session: String,
    /// Its length, when longer than what is kept.
    session_len: usize,
}

impl Window {
    fn new(now: Instant, session: &str) -> Window {
        Window {
            start: now,
            used: 0,
            recorded: false,
            unrecorded: 0,
            since: String::new(),
            until: String::new(),
            session: super::cut::head(session, SESSION_KEPT).to_string(),
            session_len: session.len(),
        }
    }

    fn over(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.start) >= WINDOW
    }

    /// The `growth-limit` record of this window, if refusals went unrecorded.
    fn summary(&self, scope: Scope, limit: u64) -> Option<AuditEvent> {
        if self.unrecorded == 0 {
            return None;
        }
        let mut d = Map::new();
        d.insert("scope".into(), scope.name().into());
        d.insert("limit".into(), limit.into());
        d.insert("refused".into(), self.unrecorded.into());
        d.insert("since".into(), self.since.clone().into());
        d.insert("until".into(), self.until.clone().into());
        if self.session_len > self.session.len() {
            d.insert("sessionBytes".into(), self.session_len.into());
        }
        let mut ev = AuditEvent::lifecycle(KIND_GROWTH_LIMIT, d);
        if scope == Scope::Session {
            ev.session = self.session.clone();
        }
        Some(ev)
    }

    /// Notes a refusal; true if it is the minute's first (to be recorded).
    fn refuse(&mut self) -> bool {
        if !self.recorded {
            self.recorded = true;
            return true;
        }
        let now = canonical::now_ts();
        if self.unrecorded == 0 {
            self.since.clone_from(&now);
        }
        self.until = now;
        self.unrecorded += 1;
        false
    }
}

#[derive(Debug)]
struct State {
    process: Window,
    sessions: HashMap<u64, Window>,
    /// `growth-limit` records due, found while charging a record.
    pending: Vec<AuditEvent>,
}

/// The guard: both budgets and their current minutes.
#[derive(Debug)]
pub(crate) struct Growth {
    /// Bytes per minute for the process (0: no limit).
    process_limit: u64,
    /// Bytes per minute for one session (0: no limit).
    session_limit: u64,
    hasher: RandomState,
    state: Mutex<State>,
}

impl Growth {
    /// A guard with these budgets (bytes per minute; 0 turns one off).
    pub(crate) fn new(process_limit: u64, session_limit: u64) -> Growth {
        Growth {
            process_limit,
            session_limit,
            hasher: RandomState::new(),
            state: Mutex::new(State {
                process: Window::new(Instant::now(), ""),
                sessions: HashMap::new(),
                pending: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a request of `session` may go on now; with the `growth-limit` records
    /// due (minutes that ended with refusals unrecorded), which the caller appends.
    pub(crate) fn admit(
        &self,
        session: &str,
        now: Instant,
    ) -> (Result<(), Refusal>, Vec<AuditEvent>) {
        let mut st = self.lock();
        let mut due = std::mem::take(&mut st.pending);
        self.roll_process(&mut st, now, &mut due);
        let key = self.hasher.hash_one(session);
        if self.session_limit > 0 {
            self.roll_session(&mut st, key, session, now, &mut due);
        }
        let refused = if self.process_limit > 0 && st.process.used >= self.process_limit {
            Some((Scope::Process, self.process_limit, &mut st.process))
        } else {
            match st.sessions.get_mut(&key) {
                Some(w) if self.session_limit > 0 && w.used >= self.session_limit => {
                    Some((Scope::Session, self.session_limit, w))
                }
                _ => None,
            }
        };
        let verdict = match refused {
            None => Ok(()),
            Some((scope, limit, w)) => {
                let left = WINDOW.saturating_sub(now.saturating_duration_since(w.start));
                Err(Refusal {
                    scope,
                    limit,
                    retry_after_secs: left.as_secs().max(1),
                    first: w.refuse(),
                })
            }
        };
        (verdict, due)
    }

    /// Counts a record of `bytes` against the process and, for a request's record,
    /// against `session`.
    pub(crate) fn charge(&self, session: Option<&str>, bytes: u64, now: Instant) {
        let mut due = Vec::new();
        let mut st = self.lock();
        self.roll_process(&mut st, now, &mut due);
        st.process.used = st.process.used.saturating_add(bytes);
        if let Some(session) = session.filter(|_| self.session_limit > 0) {
            let key = self.hasher.hash_one(session);
            self.roll_session(&mut st, key, session, now, &mut due);
            if let Some(w) = st.sessions.get_mut(&key) {
                w.used = w.used.saturating_add(bytes);
            }
        }
        // A minute that ended here with refusals unrecorded keeps its count for the
        // next admission or the close (never appended from inside an append).
        if !due.is_empty() {
            st.pending.extend(due);
        }
    }

    /// The `growth-limit` records still due (at close: every minute with refusals
    /// unrecorded so far, ended or not).
    pub(crate) fn drain(&self) -> Vec<AuditEvent> {
        let mut st = self.lock();
        let mut due = std::mem::take(&mut st.pending);
        let (pl, sl) = (self.process_limit, self.session_limit);
        due.extend(st.process.summary(Scope::Process, pl));
        st.process.unrecorded = 0;
        for w in st.sessions.values_mut() {
            due.extend(w.summary(Scope::Session, sl));
            w.unrecorded = 0;
        }
        due
    }

    fn roll_process(&self, st: &mut State, now: Instant, due: &mut Vec<AuditEvent>) {
        if st.process.over(now) {
            due.extend(st.process.summary(Scope::Process, self.process_limit));
            st.process = Window::new(now, "");
        }
    }

    /// Makes sure `key` has a current window (unless too many sessions are followed).
    fn roll_session(
        &self,
        st: &mut State,
        key: u64,
        session: &str,
        now: Instant,
        due: &mut Vec<AuditEvent>,
    ) {
        if let Some(w) = st.sessions.get_mut(&key) {
            if w.over(now) {
                due.extend(w.summary(Scope::Session, self.session_limit));
                *w = Window::new(now, session);
            }
            return;
        }
        if st.sessions.len() >= MAX_SESSIONS {
            let limit = self.session_limit;
            st.sessions.retain(|_, w| {
                let keep = !w.over(now);
                if !keep {
                    due.extend(w.summary(Scope::Session, limit));
                }
                keep
            });
        }
        if st.sessions.len() < MAX_SESSIONS {
            st.sessions.insert(key, Window::new(now, session));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_over_its_budget_is_refused_until_its_minute_ends_and_once_recorded() {
        let g = Growth::new(0, 1000);
        let t0 = Instant::now();
        assert_eq!(g.admit("s", t0).0, Ok(()));
        g.charge(Some("s"), 600, t0);
        assert_eq!(g.admit("s", t0).0, Ok(()));
        g.charge(Some("s"), 600, t0);
        let first = g.admit("s", t0).0.unwrap_err();
        assert_eq!((first.scope, first.first), (Scope::Session, true));
        assert!(first.reason().contains("max_session_bytes_per_minute"));
        for _ in 0..5 {
            assert!(!g.admit("s", t0).0.unwrap_err().first);
        }
        // Another session is not held back by this one.
        assert_eq!(g.admit("other", t0).0, Ok(()));
        // The next minute: admitted again, and one record counts the five.
        let (verdict, due) = g.admit("s", t0 + WINDOW);
        assert_eq!(verdict, Ok(()));
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].kind, KIND_GROWTH_LIMIT);
        assert_eq!(due[0].session, "s");
        assert_eq!(due[0].details["refused"], 5);
        assert_eq!(due[0].details["scope"], "session");
    }

    #[test]
    fn the_process_budget_holds_every_session_and_its_count_is_written_at_close() {
        let g = Growth::new(1000, 0);
        let t0 = Instant::now();
        g.charge(None, 400, t0);
        g.charge(Some("a"), 700, t0);
        for s in ["a", "b", "c"] {
            let r = g.admit(s, t0).0.unwrap_err();
            assert_eq!(r.scope, Scope::Process);
        }
        let due = g.drain();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].details["refused"], 2);
        assert_eq!(due[0].session, "");
        assert!(g.drain().is_empty(), "counted once");
    }

    #[test]
    fn no_limit_refuses_nothing_and_sessions_followed_are_bounded() {
        let g = Growth::new(0, 0);
        let t0 = Instant::now();
        g.charge(Some("s"), u64::MAX, t0);
        assert_eq!(g.admit("s", t0).0, Ok(()));
        let g = Growth::new(0, 10);
        for i in 0..MAX_SESSIONS + 10 {
            let _ = g.admit(&format!("s{i}"), t0);
        }
        assert_eq!(g.lock().sessions.len(), MAX_SESSIONS);
        // Once their minutes are over, new sessions are followed again.
        let _ = g.admit("late", t0 + WINDOW);
        assert!(g.lock().sessions.len() <= MAX_SESSIONS);
        assert!(g.lock().sessions.contains_key(&g.hasher.hash_one("late")));
    }

    #[test]
    fn a_long_session_id_is_kept_short_in_its_record() {
        let g = Growth::new(0, 100);
        let t0 = Instant::now();
        let long = "x".repeat(2 << 20);
        g.charge(Some(&long), 200, t0);
        let _ = g.admit(&long, t0);
        let _ = g.admit(&long, t0);
        let due = g.drain();
        assert_eq!(due[0].session.len(), SESSION_KEPT);
        assert_eq!(due[0].details["sessionBytes"], long.len());
    }
}
