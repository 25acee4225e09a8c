//! The ACP sessions a confined agent holds (`fsgate acp --confine-agent`), for the
//! records of what its processes do through the view. A process does not say which
//! session it works for, so the view's records carry the one session that can be
//! told: the only one with a prompt in flight, else the only one opened; otherwise (none
//! opened yet, or several and no single prompt) the view's own session. Each change of
//! it is a `view-session` record naming the sessions opened and prompted then.

use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::gateway::Gateway;

/// Sessions remembered at most (the oldest is let go first).
const MAX_SESSIONS: usize = 64;
/// Prompts in flight followed at most.
const MAX_PROMPTS: usize = 256;
/// Sessions named in a `view-session` record at most (the newest).
const MAX_NAMED: usize = 16;

/// The sessions the proxy saw opened and prompted, and the one the view records under.
#[derive(Debug)]
pub struct AgentSessions {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The view's own session (`acp-<hex>`).
    own: String,
    /// Opened by the agent's answers, oldest first.
    opened: Vec<String>,
    /// How many sessions were opened in all (`opened` keeps the newest).
    opened_ever: u64,
    /// Prompts in flight: (the editor's request id as JSON text, its session).
    prompts: Vec<(String, String)>,
    /// What the view's records carry now.
    current: String,
}

impl AgentSessions {
    /// No session opened yet: the view records under `own`.
    pub fn new(own: String) -> AgentSessions {
        let state = State {
            current: own.clone(),
            own,
            opened: Vec::new(),
            opened_ever: 0,
            prompts: Vec::new(),
        };
        AgentSessions {
            state: Mutex::new(state),
        }
    }

    /// The session the view's records carry now.
    pub fn current(&self) -> String {
        match self.state.lock() {
            Ok(s) => s.current.clone(),
            Err(p) => p.into_inner().current.clone(),
        }
    }

    /// The view's own session, the ACP sessions the agent opened (the newest
    /// 64, oldest first) and how many it opened in all: what the view's
    /// records may have been carried under.
    pub fn recorded_under(&self) -> (String, Vec<String>, u64) {
        let s = match self.state.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        (s.own.clone(), s.opened.clone(), s.opened_ever)
    }

    /// The agent opened (or loaded) session `sid`.
    pub fn opened(&self, gw: &Gateway, sid: &str) {
        self.change(gw, |s| {
            if !s.opened.iter().any(|o| o == sid) {
                if s.opened.len() >= MAX_SESSIONS {
                    s.opened.remove(0);
                }
                s.opened.push(sid.to_owned());
                s.opened_ever += 1;
            }
        });
    }

    /// The editor sent `session/prompt` for `sid` as request `id` (JSON text).
    pub fn prompted(&self, gw: &Gateway, id: String, sid: &str) {
        self.change(gw, |s| {
            if s.prompts.len() >= MAX_PROMPTS {
                s.prompts.remove(0);
            }
            s.prompts.push((id, sid.to_owned()));
        });
    }

    /// The agent answered the editor's request `id` (JSON text): a prompt's turn ended.
    pub fn answered(&self, gw: &Gateway, id: &str) {
        let prompted = self
            .state
            .lock()
            .is_ok_and(|s| s.prompts.iter().any(|(i, _)| i == id));
        if prompted {
            self.change(gw, |s| s.prompts.retain(|(i, _)| i != id));
        }
    }

    /// Applies `f`; records the sessions when what the view records under changed.
    fn change(&self, gw: &Gateway, f: impl FnOnce(&mut State)) {
        let details = {
            let Ok(mut s) = self.state.lock() else {
                return;
            };
            f(&mut s);
            let now = s.told();
            if now == s.current {
                return;
            }
            s.current = now;
            s.details()
        };
        gw.record("view-session", details);
    }
}

impl State {
    /// The one session the agent's processes work for, when it can be told.
    fn told(&self) -> String {
        let mut prompted: Vec<&str> = self.prompts.iter().map(|(_, s)| s.as_str()).collect();
        prompted.sort_unstable();
        prompted.dedup();
        match (prompted.as_slice(), self.opened.as_slice()) {
            ([one], _) => (*one).to_owned(),
            ([], [one]) => one.clone(),
            _ => self.own.clone(),
        }
    }

    /// The `view-session` record's details.
    fn details(&self) -> Map<String, Value> {
        let newest = |l: Vec<&String>| -> Value {
            let skip = l.len().saturating_sub(MAX_NAMED);
            l.into_iter().skip(skip).cloned().collect::<Vec<_>>().into()
        };
        let mut prompted: Vec<&String> = self.prompts.iter().map(|(_, s)| s).collect();
        prompted.sort_unstable();
        prompted.dedup();
        let mut d = Map::new();
        d.insert("session".into(), self.current.clone().into());
        d.insert("viewSession".into(), self.own.clone().into());
        d.insert("acpSessions".into(), newest(self.opened.iter().collect()));
        d.insert("prompted".into(), newest(prompted));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(opened: &[&str], prompts: &[&str]) -> State {
        State {
            own: "acp-1".into(),
            opened: opened.iter().map(|s| s.to_string()).collect(),
            opened_ever: opened.len() as u64,
            prompts: (prompts.iter().enumerate())
                .map(|(i, s)| (i.to_string(), s.to_string()))
                .collect(),
            current: String::new(),
        }
    }

    #[test]
    fn the_session_told_is_the_one_prompted_or_the_only_one_opened() {
        assert_eq!(state(&[], &[]).told(), "acp-1");
        assert_eq!(state(&["a"], &[]).told(), "a");
        assert_eq!(state(&["a", "b"], &[]).told(), "acp-1");
        assert_eq!(state(&["a", "b"], &["b", "b"]).told(), "b");
        assert_eq!(state(&["a", "b"], &["a", "b"]).told(), "acp-1");
    }
}
