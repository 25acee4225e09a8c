//! A request's audit records: lifecycle records, the record of a message that is no
//! operation, a change's intent made durable before the change, and the outcome's
//! append (beside the sync of a new name when there is one).

use serde_json::{Map, Value};

use crate::batch::Batch;

use crate::gateway::Gateway;
use crate::request::RequestCtx;
use fsgate_audit::{AuditEvent, AuditLog};
use fsgate_base::error::GatewayError;

/// Which lifecycle record [`Gateway::record`] appends: its kind (a `&str` says just
/// that), and the session it is of, if any.
#[derive(Debug, Clone, Copy)]
pub struct Lifecycle<'a> {
    /// The record's kind (`start`, `reload`, `session`, `roots`...).
    kind: &'a str,
    /// The request whose session, transport and peer the record is under.
    of: Option<&'a RequestCtx>,
    /// The `start` record, which starts the audit log's threads.
    start: bool,
}

impl<'a> Lifecycle<'a> {
    /// The `start` record: the audit log's threads start with it, the first of which
    /// writes and syncs it while [`Gateway::record`] returns. Later records queue
    /// behind it, so none is durable (nor, at `fsync = "always"`, answered) before it.
    pub fn start() -> Lifecycle<'a> {
        Lifecycle {
            kind: "start",
            of: None,
            start: true,
        }
    }

    /// A session's record of `kind` (e.g. `roots`: the scope a client's roots put in
    /// force), under the session, transport and peer of `ctx`.
    pub fn of(ctx: &'a RequestCtx, kind: &'a str) -> Lifecycle<'a> {
        Lifecycle {
            kind,
            of: Some(ctx),
            start: false,
        }
    }
}

impl<'a> From<&'a str> for Lifecycle<'a> {
    fn from(kind: &'a str) -> Lifecycle<'a> {
        Lifecycle {
            kind,
            of: None,
            start: false,
        }
    }
}

impl Gateway {
    /// Appends a lifecycle record (start, stop, reload, session...): `what` is its kind,
    /// or a [`Lifecycle`] saying more. Failures are logged: lifecycle records answer no
    /// request.
    pub fn record<'a>(&self, what: impl Into<Lifecycle<'a>>, details: Map<String, Value>) {
        let Some(a) = &self.audit else { return };
        let what = what.into();
        let kind = what.kind;
        let ev = AuditEvent::lifecycle(kind, details);
        if what.start {
            if let Err(e) = a.start_with(&ev) {
                tracing::error!("audit log: {e}");
            }
            return;
        }
        let ev = match what.of {
            Some(ctx) => AuditEvent {
                session: ctx.session.clone(),
                transport: ctx.door.name.to_string(),
                peer: ctx.peer.clone(),
                ..ev
            },
            None => ev,
        };
        if let Err(e) = a.append(ev) {
            tracing::error!("audit log: cannot record `{kind}`: {e}");
        }
    }
}

/// Records a request that is not a workspace operation (initialize, an unknown
/// method, malformed params or JSON): every request gets its audit record before its
/// response. Err if the record could not be written (the caller answers -32603).
pub(crate) fn record_message(
    audit: Option<&AuditLog>,
    ctx: &RequestCtx,
    op: &str,
    outcome: Result<(), (i64, String)>,
    rule: Option<&str>,
) -> Result<(), GatewayError> {
    let Some(audit) = audit else {
        return Ok(());
    };
    // A refusal fsgate makes outside the policy engine (a terminal/* request, an
    // unknown session) is still a denial; anything else took no policy decision.
    let decision = match &outcome {
        Err((code, _)) if *code == fsgate_base::error::code::REFUSED => "deny",
        _ => "none",
    };
    let (outcome, reason) = match outcome {
        Ok(()) => ("ok".to_string(), None),
        Err((code, msg)) => (code.to_string(), Some(msg)),
    };
    let ev = AuditEvent {
        session: ctx.session.clone(),
        transport: ctx.door.name.to_string(),
        peer: ctx.peer.clone(),
        op: op.to_string(),
        decision: decision.into(),
        rule: rule.map(str::to_owned),
        reason,
        outcome,
        ..AuditEvent::default()
    };
    audit.append(ev).map(|_| ()).map_err(|e| {
        tracing::error!("audit log: {e}");
        GatewayError::Internal(format!("{e}; the request could not be recorded"))
    })
}

/// Appends a request's record; its seq once written. In a `batch` (a read-only
/// request's record), it is queued now and the batch keeps its ticket, to be settled
/// before any answer (None).
pub(crate) fn append(
    audit: &AuditLog,
    event: &AuditEvent,
    batch: Option<&Batch>,
) -> Result<Option<u64>, fsgate_audit::AuditError> {
    match batch {
        // Read-only, held with its process's other reads; a refusal queued as below.
        Some(b) if b.coalesces() => audit.append_coalesced(event).map(|ticket| {
            if let Some(t) = ticket {
                b.keep(t);
            }
            None
        }),
        // Read-only, in a batch: queued now, waited for before any answer.
        Some(b) => audit.append_deferred(event).map(|ticket| {
            b.keep(ticket);
            None
        }),
        None => audit.append_ref(event).map(|r| Some(r.seq)),
    }
}

/// Appends the outcome of a write whose new name is not yet durable while its directory
/// is synced: the record's sync and the directory's run at once, and both end before
/// the answer. The record says so (`details.entryPending`); once the directory's sync
/// has succeeded, the next record names the intent (`details.entriesDurable`). A crash
/// before that leaves the change to the next start to reconcile against the disk, as
/// if its outcome were missing (FORMAT.md section 13).
pub(crate) fn record_beside_entry(
    audit: &AuditLog,
    event: &mut AuditEvent,
    entry: fsgate_workspace::EntrySync,
    intent: u64,
) -> Result<Option<u64>, fsgate_audit::AuditError> {
    event
        .details
        .insert(fsgate_audit::ENTRY_PENDING.into(), Value::Bool(true));
    // The outcome is queued (its seq given) before the sync starts, so any record that
    // names the intent as durable comes after it in the log.
    let queued = audit.append_deferred(event);
    // Another thread leading the log's group commit will likely write this record while
    // this thread syncs the directory; else a helper syncs it while this thread leads
    // (a helper's hand-off costs CPU that changes in flight at once cannot spare).
    let (synced, recorded) = if audit.leader_busy() {
        let synced = entry.sync_now();
        (synced, queued.and_then(|ticket| audit.wait(ticket)))
    } else {
        let syncing = entry.start();
        let recorded = queued.and_then(|ticket| audit.wait(ticket));
        (syncing.wait(), recorded)
    };
    match synced {
        Ok(()) if recorded.is_ok() => audit.entry_durable(intent),
        // A filesystem that cannot sync a directory at all: the name is as durable as
        // it can be made (else every write would stay open, start after start).
        Err(e) if cannot_sync_dirs(&e) && recorded.is_ok() => {
            tracing::debug!(intent, "this filesystem does not sync directories: {e}");
            audit.entry_durable(intent);
        }
        // The outcome was not recorded: its intent stays open, and the answer says so.
        Ok(()) => {}
        // The change is made and visible; its outcome stays unconfirmed, so the next
        // start looks at the disk for it.
        Err(e) => tracing::warn!(
            intent,
            "cannot sync a workspace directory after a change: {e}; the next start reconciles it"
        ),
    }
    recorded.map(|r| Some(r.seq))
}

use fsgate_workspace::cannot_sync_dirs;

/// Makes a published write's name durable on this thread (no outcome to record beside
/// it). A failure is logged: the change is made, and undoing it would be worse.
pub(crate) fn sync_entry_now(entry: Option<fsgate_workspace::EntrySync>) {
    if let Some(Err(e)) = entry.map(fsgate_workspace::EntrySync::sync_now) {
        tracing::warn!("cannot sync a workspace directory after a change: {e}");
    }
}

/// The error of a request whose record could not be written: what became of the
/// change (its intent is record `intent`, if it had one), or that the result is
/// withheld.
pub(crate) fn unrecorded(
    e: &fsgate_audit::AuditError,
    intent: Option<u64>,
    succeeded: bool,
    mutating: bool,
) -> GatewayError {
    GatewayError::Internal(match (intent, succeeded) {
        (Some(seq), true) => format!(
            "{e}; the change was made (its intent is record {seq}), but its outcome could not be recorded; the next start reconciles it"
        ),
        (Some(seq), false) => format!(
            "{e}; the change was attempted and failed (its intent is record {seq}), and the failure could not be recorded; the next start reconciles it"
        ),
        (None, _) if mutating => {
            format!("{e}; the request could not be recorded, and nothing was changed")
        }
        (None, _) => format!("{e}; the result is withheld because it could not be recorded"),
    })
}
