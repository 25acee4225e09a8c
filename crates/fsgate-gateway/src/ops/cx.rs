//! What an operation is given: the request's policy snapshot and who asks, the
//! workspace, and the change pipeline (backup -> intent -> change -> outcome). Not the
//! gateway: an operation reaches no other workspace, no door, no reload.

use std::sync::{Arc, RwLock};

use crate::budget::Budget;
use crate::facts::Facts;
use crate::ops::open_cache::CleanOpens;
use crate::path_lock::PathLocks;
use crate::request::RequestCtx;
use crate::saver::Saver;
use fsgate_audit::AuditLog;
use fsgate_base::error::GatewayError;
use fsgate_policy::Policy;
use fsgate_workspace::Workspace;

/// One request's context: everything an operation may use, borrowed for the request.
pub(crate) struct Cx<'a> {
    /// The policy the request is decided by (a snapshot: a reload does not change it).
    pub(crate) pol: &'a Policy,
    /// Who asks, through which door, within which roots.
    pub(crate) ctx: &'a RequestCtx,
    /// The workspace's root handle.
    pub(crate) workspace: &'a Workspace,
    /// Its name when several are served (a session's roots name it).
    pub(crate) name: Option<&'a Arc<str>>,
    /// The policy in force now: a change a person allowed under an older one is not made.
    pub(crate) current: &'a RwLock<Arc<Policy>>,
    /// The audit log (None in unit tests and offline tools).
    pub(crate) audit: Option<&'a AuditLog>,
    /// The backups taken before a change.
    pub(crate) saver: Saver<'a>,
    /// File content held by requests in flight, across every door.
    pub(crate) budget: &'a Arc<Budget>,
    /// Paths being written now.
    pub(crate) writing: &'a Arc<PathLocks>,
    /// Files the view opened whose content was found clean.
    pub(crate) clean_opens: &'a CleanOpens,
}

impl<'a> Cx<'a> {
    /// The largest file this request may read (`class` Read) or write, and the limit's
    /// name: a process's through the view (`max_process_file_bytes`, a host limit), or a
    /// model's (`max_read_bytes`, `max_write_bytes`).
    pub(crate) fn file_limit(&self, class: fsgate_decide::OpClass) -> (u64, &'static str) {
        let l = self.pol.limits();
        match (self.ctx.door.for_processes, class) {
            (true, _) => (l.max_process_file_bytes, "limits.max_process_file_bytes"),
            (false, fsgate_decide::OpClass::Write) => (l.max_write_bytes, "limits.max_write_bytes"),
            (false, _) => (l.max_read_bytes, "limits.max_read_bytes"),
        }
    }

    /// Makes the intent of a change durable before the workspace is touched: what
    /// cannot be recorded ahead is not done (fail closed).
    pub(crate) fn intend(&self, facts: &mut Facts) -> Result<(), GatewayError> {
        let queued = self.intend_queued(facts)?;
        self.intended(queued, facts)
    }

    /// The first half of [`intend`](Self::intend): the intent is queued for the log, not
    /// yet durable. Work that leaves the workspace as it is (content staged in a file
    /// nobody can see) may run before [`intended`](Self::intended) waits for it.
    pub(crate) fn intend_queued(
        &self,
        facts: &mut Facts,
    ) -> Result<Option<fsgate_audit::Ticket>, GatewayError> {
        facts.settle_pending()?;
        self.same_policy_since_asked(facts)?;
        let Some(audit) = self.audit else {
            return Ok(None);
        };
        let mut ev = facts.intent_event(self.ctx);
        ev.policy_sha256 = Some(Arc::from(self.pol.sha256()));
        audit
            .append_deferred(&ev)
            .map(Some)
            .map_err(not_recorded_ahead)
    }

    /// The second half of [`intend`](Self::intend): waits until the queued intent is
    /// durable (on the thread that queued it); what cannot be recorded is not done.
    pub(crate) fn intended(
        &self,
        queued: Option<fsgate_audit::Ticket>,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let (Some(audit), Some(ticket)) = (self.audit, queued) else {
            return Ok(());
        };
        let receipt = audit.wait(ticket).map_err(not_recorded_ahead)?;
        facts.intent = Some(receipt.seq);
        Ok(())
    }

    /// A person may take minutes: a change they allowed under a policy since reloaded is
    /// not made (the new policy may deny it, or no longer ask).
    fn same_policy_since_asked(&self, facts: &Facts) -> Result<(), GatewayError> {
        let Some(q) = facts.asked.iter().rev().find(|a| a.put_to_person()) else {
            return Ok(());
        };
        if current_sha(self.current) == self.pol.sha256() {
            return Ok(());
        }
        Err(GatewayError::Refused {
            reason: "the policy was reloaded while a person was asked; nothing was changed (retry under the policy now in force)".into(),
            rule: q.rule().to_string(),
            path: facts.path.clone().unwrap_or_default(),
        })
    }
}

/// The hash of the policy in force now.
fn current_sha(current: &RwLock<Arc<Policy>>) -> String {
    match current.read() {
        Ok(p) => p.sha256().to_string(),
        Err(poisoned) => poisoned.into_inner().sha256().to_string(),
    }
}

/// The refusal of a change whose intent could not be made durable.
pub(crate) fn not_recorded_ahead(e: fsgate_audit::AuditError) -> GatewayError {
    tracing::error!("audit log: {e}");
    GatewayError::Internal(format!(
        "{e}; the change could not be recorded ahead, so nothing was changed"
    ))
}
