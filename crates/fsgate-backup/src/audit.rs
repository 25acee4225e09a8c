//! The audit records of `fsgate backup restore`: an intent before the workspace is
//! touched, then the outcome naming it, in the gateway's own log.

use std::path::Path;

use serde_json::Value;

use super::cli::RestoreAudit;
use super::{BackupRef, RestoreReport};
use fsgate_audit::{AuditEvent, AuditLog, KIND_INTENT};

/// Writes a restore's records into the gateway's audit log.
pub struct Recorder {
    /// The gateway's log (opened by the command; the gateway must not be running).
    log: AuditLog,
    /// pid/uid of whoever ran the command.
    peer: String,
    /// The seq of the restore's intent, once recorded.
    intent: Option<u64>,
    /// The workspace among several the path lies in (`args.workspace`).
    workspace: Option<String>,
}

impl Recorder {
    /// A recorder appending to `log` on behalf of `peer`.
    pub fn new(log: AuditLog, peer: String) -> Recorder {
        Recorder {
            log,
            peer,
            intent: None,
            workspace: None,
        }
    }

    /// Its records name the workspace `name` among several, as the gateway's do.
    pub fn in_workspace(mut self, name: Option<String>) -> Recorder {
        self.workspace = name;
        self
    }

    fn event(&self, kind: &str, rel_path: &str) -> AuditEvent {
        let mut ev = AuditEvent {
            kind: kind.into(),
            transport: "cli".into(),
            peer: self.peer.clone(),
            op: "restore".into(),
            path: Some(rel_path.to_owned()),
            decision: "allow".into(),
            ..AuditEvent::default()
        };
        if let Some(ws) = &self.workspace {
            ev.args.insert("workspace".into(), ws.clone().into());
        }
        ev
    }

    /// Appends the outcome and closes the log (its `stop` record and checkpoint).
    fn finish(&mut self, mut ev: AuditEvent) -> Result<(), String> {
        if let Some(seq) = self.intent {
            ev.args.insert("intent".into(), Value::from(seq));
        }
        self.log.append(ev).map(|_| ()).map_err(|e| e.to_string())?;
        self.log.close().map_err(|e| e.to_string())
    }
}

impl RestoreAudit for Recorder {
    fn intend_restore(
        &mut self,
        rel_path: &str,
        version: &BackupRef,
        previous: Option<&BackupRef>,
    ) -> Result<(), String> {
        let mut ev = self.event(KIND_INTENT, rel_path);
        ev.args
            .insert("restoredFrom".into(), version.id.clone().into());
        if let Some(p) = previous {
            ev.args.insert("oldSha256".into(), p.sha256.clone().into());
        }
        ev.sha256 = Some(version.sha256.clone());
        ev.bytes = Some(version.size);
        ev.backup = previous.map(|b| b.id.clone());
        let receipt = self.log.append(ev).map_err(|e| e.to_string())?;
        self.intent = Some(receipt.seq);
        Ok(())
    }

    fn record_restore(&mut self, _workspace: &Path, report: &RestoreReport) -> Result<(), String> {
        let mut ev = self.event(
            fsgate_audit::record::KIND_REQUEST,
            &report.restored.rel_path,
        );
        ev.outcome = "ok".into();
        ev.sha256 = Some(report.restored.sha256.clone());
        ev.bytes = Some(report.restored.size);
        ev.backup = report.previous.as_ref().map(|b| b.id.clone());
        ev.args
            .insert("restoredFrom".into(), report.restored.id.clone().into());
        self.finish(ev)
    }

    fn record_failure(&mut self, rel_path: &str, error: &str) -> Result<(), String> {
        let mut ev = self.event(fsgate_audit::record::KIND_REQUEST, rel_path);
        ev.outcome = fsgate_base::error::code::INTERNAL.to_string();
        ev.reason = Some(error.to_owned());
        self.finish(ev)
    }
}
