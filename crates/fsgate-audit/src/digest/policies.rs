//! The policies a digest shows: each stretch of records made under one policy, and the
//! gateway starts, reloads and rejected reloads.

use serde_json::Value;

use super::Digest;
use super::fields::num;
use super::items::{PolicyEvent, PolicySpan};
use crate::rows::{MAX_ROWS, text};

impl Digest {
    pub(super) fn observe_policy(&mut self, log: usize, v: &Value) {
        let sha = text(v, "policy_sha256");
        if sha.is_empty() {
            return;
        }
        let (seq, ts) = (num(v, "seq").unwrap_or_default(), text(v, "ts"));
        let full = self.policies.len() >= MAX_ROWS;
        match self.policies.last_mut() {
            Some(p) if p.log == log && p.sha256 == sha => {
                (p.last_seq, p.last_ts) = (seq, ts.to_owned());
                p.records += 1;
            }
            _ if full => {}
            _ => self.policies.push(PolicySpan {
                log,
                sha256: sha.to_owned(),
                first_seq: seq,
                last_seq: seq,
                first_ts: ts.to_owned(),
                last_ts: ts.to_owned(),
                records: 1,
            }),
        }
    }

    /// The gateway's `start` (the one naming its policy).
    pub(super) fn observe_start(&mut self, v: &Value) {
        let d = &v["details"];
        let Some(policy) = d.get("policy") else {
            return;
        };
        let mut e = self.event(v);
        e.origin = text(policy, "origin").to_owned();
        e.new_sha256 = text(policy, "sha256").to_owned();
        e.note = format!(
            "transport {}, workspace {}",
            text(d, "transport"),
            text(d, "workspace")
        );
        self.push_event(e);
    }

    pub(super) fn observe_reload(&mut self, v: &Value) {
        let d = &v["details"];
        let mut e = self.event(v);
        e.origin = text(d, "policy").to_owned();
        if e.kind == "reload" {
            e.old_sha256 = text(d, "old_sha256").to_owned();
            e.new_sha256 = text(d, "new_sha256").to_owned();
        } else {
            e.new_sha256 = text(d, "in_force_sha256").to_owned();
            e.note = text(d, "error").to_owned();
        }
        self.push_event(e);
    }

    pub(super) fn event(&self, v: &Value) -> PolicyEvent {
        PolicyEvent {
            seq: num(v, "seq").unwrap_or_default(),
            ts: text(v, "ts").to_owned(),
            kind: text(v, "kind").to_owned(),
            ..Default::default()
        }
    }

    pub(super) fn push_event(&mut self, e: PolicyEvent) {
        if self.policy_events.len() < MAX_ROWS {
            self.policy_events.push(e);
        }
    }
}
