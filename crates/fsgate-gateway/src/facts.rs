//! What one request did, gathered while it runs, for its audit record.

use std::time::Duration;

use fsgate_base::sha256::Sha256;
use serde_json::{Map, Value};

use crate::ops::output::Output;

use crate::request::RequestCtx;
use fsgate_audit::AuditEvent;
use fsgate_base::error::GatewayError;
use fsgate_decide::Decision;

/// Facts about one request.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// Which operation.
    pub op: crate::ops::id::OpId,
    /// Workspace-relative path (lexical), once parsed.
    pub path: Option<String>,
    /// Second path (rename target).
    pub path2: Option<String>,
    /// Where `path` and `path2` really are (symlinks followed) for a change: what git
    /// stages, the entries that changed.
    pub real: (Option<String>, Option<String>),
    /// Arguments that matter.
    pub args: Map<String, Value>,
    /// The last policy decision taken: "allow" or "deny".
    pub decision: Option<&'static str>,
    /// The rule behind it.
    pub rule: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Waived secret-name patterns the request's paths matched (`details.waived`).
    pub waived: Vec<String>,
    /// "ok" or the error code.
    pub outcome: String,
    /// Bytes read or written.
    pub bytes: Option<u64>,
    /// SHA-256 (hex) of the content read or written.
    pub sha256: Option<String>,
    /// Backups made before the change.
    pub backups: Vec<String>,
    /// SHA-256 (hex) of the content the change replaces or removes (one file), so that a
    /// start after a crash can tell the old content from the new.
    pub old_sha256: Option<String>,
    /// The file whose content the backup saved (device, inode): a write or edit
    /// replaces only that file (not one that replaced it meanwhile).
    pub saved_file: Option<(u64, u64)>,
    /// The seq of this change's `intent` record, once it is durable.
    pub intent: Option<u64>,
    /// The content budget held by what this request read, handed to the door with the
    /// answer (see `super::budget`).
    pub lease: Option<super::budget::Lease>,
    /// What this request's leases do when the budget has no room (see [`crate::batch::Batch`]).
    pub(crate) waiting: super::budget::Waiting,
    /// Wall time.
    pub duration_us: u64,
    /// What this request needs to ask a person (policies with `ask` rules only).
    pub ask: Option<super::ask::AskCtx>,
    /// The questions put to a person for this request, and their answers.
    pub asked: Vec<super::ask::AskRecord>,
    /// What a write replaced, for a door that shows changes as diffs.
    pub replaced: Option<super::ask::Replaced>,
    /// The directory sync that makes a published write's name durable, run beside its
    /// outcome record (see `Gateway::record_beside_entry`).
    pub entry_sync: Option<fsgate_workspace::EntrySync>,
    /// The written path, held (`path_lock`) until its entry is durable.
    pub held: Option<super::path_lock::Held>,
    /// No path may lead through a symbolic link (`fsgate undo`'s requests).
    pub unlinked: bool,
}

impl Facts {
    /// Puts the questions a change put off ([`crate::ask::settle_pending`]): called before the
    /// change's first side effect (a backup, its intent), after every other check.
    pub(crate) fn settle_pending(&mut self) -> Result<(), GatewayError> {
        let Some(mut ask) = self.ask.take() else {
            return Ok(());
        };
        let mut asked = std::mem::take(&mut self.asked);
        let settled = crate::ask::settle_pending(&mut ask, &mut asked, |d| self.decided(d));
        self.asked = asked;
        self.ask = Some(ask);
        settled
    }

    /// Starts the record of `op`.
    pub(crate) fn new(op: crate::ops::id::OpId, args: Map<String, Value>) -> Facts {
        Facts {
            op,
            args,
            ..Facts::default()
        }
    }

    /// Notes a policy decision (the last one, or the first denial, is what is recorded).
    pub(crate) fn decided(&mut self, d: &Decision<'_>) {
        for w in &d.waived {
            if !self.waived.iter().any(|x| x == w) {
                self.waived.push((*w).to_string());
            }
        }
        if self.decision == Some("deny") {
            return;
        }
        // An ask the person answered yes is an allow by that rule (`details.asked`).
        self.decision = Some(if d.effect == fsgate_decide::Effect::Deny {
            "deny"
        } else {
            "allow"
        });
        self.rule = Some(d.rule.to_string());
        self.reason = Some(d.reason.to_string());
    }

    /// Notes the content read or written.
    pub(crate) fn content(&mut self, bytes: &[u8]) {
        self.content_hashed(bytes.len(), content_digest(bytes));
    }

    /// [`Facts::content`] with the digest already taken (`hex` is
    /// `content_digest` of the `len` bytes).
    pub(crate) fn content_hashed(&mut self, len: usize, hex: String) {
        self.bytes = Some(len as u64);
        self.sha256 = Some(hex);
    }

    /// Records the outcome.
    pub(crate) fn finish(&mut self, result: &Result<Output, GatewayError>, took: Duration) {
        self.duration_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        match result {
            Ok(_) => self.outcome = "ok".into(),
            Err(e) => {
                self.outcome = e.code().to_string();
                if e.is_denial() {
                    self.decision = Some("deny");
                    if let Some(rule) = e.rule() {
                        self.rule = Some(rule.to_string());
                    }
                    self.reason = Some(e.message());
                } else if self.decision.is_none() {
                    self.reason = Some(e.message());
                }
            }
        }
    }
}

impl Facts {
    /// The `intent` record of a change, made durable before the workspace is touched:
    /// what will change (op, paths, the new content's hash), the rule that allowed it,
    /// and the backups already made of what it replaces.
    pub(crate) fn intent_event(&self, ctx: &RequestCtx) -> AuditEvent {
        let mut args = self.args.clone();
        // One replaced file: its old hash tells old from new content after a crash.
        if let Some(old) = self.old_sha256.as_ref().filter(|_| self.backups.len() == 1) {
            args.insert("oldSha256".into(), Value::String(old.clone()));
        }
        if self.backups.len() > 1 {
            args.insert("backups".into(), Value::from(self.backups.clone()));
            args.insert("backupCount".into(), Value::from(self.backups.len()));
        }
        // Where the change really is, when a symlink on the way puts it elsewhere: a
        // start after a crash looks there (for the content, and a temporary file).
        let real = [
            ("realPath", &self.path, &self.real.0),
            ("realPath2", &self.path2, &self.real.1),
        ];
        for (key, asked, real) in real {
            if let Some(real) = real.as_ref().filter(|r| Some(*r) != asked.as_ref()) {
                args.insert(key.into(), Value::String(real.clone()));
            }
        }
        AuditEvent {
            kind: fsgate_audit::KIND_INTENT.to_string(),
            session: ctx.session.clone(),
            transport: ctx.door.name.to_string(),
            peer: ctx.peer.clone(),
            op: self.op.name().to_string(),
            path: self.path.clone(),
            path2: self.path2.clone(),
            args,
            decision: self.decision.unwrap_or("allow").to_string(),
            rule: self.rule.clone(),
            bytes: self.bytes,
            sha256: self.sha256.clone(),
            backup: self.backups.first().cloned(),
            details: self.waived_details(),
            ..AuditEvent::default()
        }
    }

    /// `details.waived`, on the intent as on the outcome: after a crash the intent is
    /// the only record of the change, and must say what the waiver let through.
    fn waived_details(&self) -> Map<String, Value> {
        let mut details = Map::new();
        if !self.waived.is_empty() {
            details.insert("waived".into(), Value::from(self.waived.clone()));
        }
        if !self.asked.is_empty() {
            let asked = self.asked.iter().map(|a| a.to_json()).collect();
            details.insert("asked".into(), Value::Array(asked));
        }
        details
    }

    /// The audit record of this request.
    pub(crate) fn into_event(mut self, ctx: &RequestCtx) -> AuditEvent {
        if let Some(seq) = self.intent {
            self.args.insert("intent".into(), Value::from(seq));
        }
        let backup = match self.backups.len() {
            0 => None,
            1 => self.backups.pop(),
            n => {
                let first = self.backups[0].clone();
                self.args.insert(
                    "backups".into(),
                    Value::from(std::mem::take(&mut self.backups)),
                );
                self.args.insert("backupCount".into(), Value::from(n));
                Some(first)
            }
        };
        let details = self.waived_details();
        AuditEvent {
            session: ctx.session.clone(),
            transport: ctx.door.name.to_string(),
            peer: ctx.peer.clone(),
            op: self.op.name().to_string(),
            path: self.path,
            path2: self.path2,
            args: self.args,
            decision: self.decision.unwrap_or("none").to_string(),
            rule: self.rule,
            reason: self.reason,
            outcome: self.outcome,
            bytes: self.bytes,
            sha256: self.sha256,
            backup,
            duration_us: self.duration_us,
            details,
            ..AuditEvent::default()
        }
    }
}

/// The record's digest of content: SHA-256, lowercase hex.
pub(crate) fn content_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RequestCtx;
    use fsgate_decide::{EntryKind, OpClass};
    use fsgate_policy::Policy;

    #[test]
    fn the_intent_names_the_waiver_too() {
        let text = "version = 1\n[secrets]\ndisabled_patterns = [\"secret\"]\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n";
        let pol = Policy::from_toml(text, "t").unwrap();
        let path = fsgate_base::path::RelPath::parse_rooted("/docs/secret-rotation.md").unwrap();
        let mut facts = Facts::default();
        facts.decided(&pol.decide(OpClass::Write, &path, EntryKind::File));
        let ctx = RequestCtx {
            style: crate::door::PathStyle::Absolute,
            session: String::new(),
            door: &crate::door::TEST_DOOR,
            peer: String::new(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        };
        let intent = facts.intent_event(&ctx);
        assert_eq!(
            intent.details.get("waived"),
            Some(&Value::from(vec!["secrets:secret"]))
        );
        let outcome = facts.into_event(&ctx);
        assert_eq!(outcome.details.get("waived"), intent.details.get("waived"));
    }
}
