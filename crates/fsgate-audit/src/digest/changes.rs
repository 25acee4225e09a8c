//! The changes a digest lists: from a request record, from an intent and its outcome,
//! from a reconciliation after a crash; what an `undo` record says; capped at
//! [`MAX_CHANGES`].

use serde_json::Value;

use super::fields::{change_of, num};
use super::items::Change;
use super::{Digest, MAX_CHANGES, MAX_OPEN_INTENTS};
use crate::rows::text;

impl Digest {
    pub(super) fn observe_intent(&mut self, log: usize, v: &Value) {
        if self.intents.len() >= MAX_OPEN_INTENTS {
            self.intents.pop_first();
        }
        let mut c = change_of(log, v, false);
        c.old_sha256 = text(&v["args"], "oldSha256").to_owned();
        c.backup_count = num(&v["args"], "backupCount").unwrap_or(u64::from(!c.backup.is_empty()));
        self.intents.insert((log, c.seq), c);
    }

    pub(super) fn observe_reconciled(&mut self, log: usize, v: &Value, verified: bool) {
        let d = &v["details"];
        let intent = num(d, "intent").and_then(|seq| self.intents.remove(&(log, seq)));
        let mut c = intent.unwrap_or_default();
        let own = change_of(log, v, verified);
        c.op = format!("{} (reconciled)", own.op);
        c.outcome = text(d, "found").to_owned();
        (c.log, c.seq, c.ts, c.verified) = (log, own.seq, own.ts, verified);
        (c.path, c.other) = (own.path, own.other);
        self.add_change(c);
    }

    pub(super) fn add_change(&mut self, c: Change) {
        let paths = change_paths(&c);
        for (path, other) in paths {
            if self.listed_changes >= MAX_CHANGES {
                self.changes_omitted += 1;
                continue;
            }
            self.listed_changes += 1;
            let mut c = c.clone();
            c.other = other;
            self.changes.entry(path).or_default().push(c);
        }
    }
}

/// The files a change concerns: its path, and a rename's target (which names the
/// source as its other path).
pub(super) fn change_paths(c: &Change) -> Vec<(String, Option<(String, bool)>)> {
    let mut out = vec![(c.path.clone(), c.other.clone())];
    if let Some((target, false)) = &c.other {
        out.push((target.clone(), Some((c.path.clone(), true))));
    }
    out
}
