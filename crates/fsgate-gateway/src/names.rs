//! Sessions named late: a door that must start serving before it knows the session its
//! requests belong to (the MCP server `fsgate acp` hosts for its agent, which the agent
//! may reach before the agent has answered `session/new` with the session's id) serves
//! under a provisional name, and the name is given once known. From then on every
//! request under the provisional name is served, recorded and asked about under the
//! real one.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// At most this many names are remembered; beyond it a name is not given (records
/// keep the provisional name, which the naming door records beside the real one).
const MAX_NAMES: usize = 4096;

/// Provisional session names and the names they stand for.
#[derive(Debug, Default)]
pub(crate) struct SessionNames {
    /// Set once any name is given: until then a request costs no lock.
    any: AtomicBool,
    names: RwLock<HashMap<String, String>>,
}

impl SessionNames {
    /// From now on, `provisional` means `real`. False when the table is full.
    pub(crate) fn give(&self, provisional: &str, real: &str) -> bool {
        let mut names = self.names.write().unwrap_or_else(|e| e.into_inner());
        if names.len() >= MAX_NAMES && !names.contains_key(provisional) {
            return false;
        }
        names.insert(provisional.to_owned(), real.to_owned());
        self.any.store(true, Ordering::Release);
        true
    }

    /// The real name of `session`, if it is a provisional one that was given a name.
    pub(crate) fn real(&self, session: &str) -> Option<String> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let names = self.names.read().unwrap_or_else(|e| e.into_inner());
        names.get(session).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_name_stands_for_the_provisional_one() {
        let names = SessionNames::default();
        assert_eq!(names.real("acp-pending-1"), None);
        assert!(names.give("acp-pending-1", "sess-9"));
        assert_eq!(names.real("acp-pending-1").as_deref(), Some("sess-9"));
        assert_eq!(names.real("sess-9"), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let names = SessionNames::default();
        for i in 0..MAX_NAMES {
            assert!(names.give(&format!("p{i}"), "r"));
        }
        assert!(!names.give("one-more", "r"));
        // A name already there may still be given again.
        assert!(names.give("p0", "r2"));
    }
}
