//! One operation through every gate: checks before any work, execution, then its
//! record, and the change's note to the door, the change watch and git.

use crate::notes::{ChangeNote, ChangeWatch};
use fsgate_base::path::RelPath;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::batch::Batch;
use crate::budget::Lease;
use crate::facts::Facts;
use crate::gateway::Gateway;
use crate::ops::Op;
use crate::ops::cx::Cx;
use crate::ops::output::Output;
use crate::record::{append, record_beside_entry, sync_entry_now, unrecorded};
use crate::request::RequestCtx;
use crate::rules::PATH_MAX;
use crate::{ask, budget};
use fsgate_base::error::GatewayError;
use fsgate_policy::Policy;

impl Gateway {
    /// Runs one operation through every gate and records it (the crate's tests' way
    /// in). The audit record is durable before this returns; if it cannot be written,
    /// the request fails (and a change is not attempted while the log is known to be
    /// failing).
    #[cfg(test)]
    pub(crate) fn handle(
        &self,
        ctx: &RequestCtx,
        op: Op,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.handle_with(ctx, op, (serde_json::Map::new(), None, false), Ok(()))
    }

    /// Runs one operation through every gate and records it, with `note` added to the
    /// records' `args`; `pre` may have refused it already (a router's refusal): it is
    /// recorded all the same. In a batch if one is given; `unlinked`: no path may lead
    /// through a symbolic link. The audit record is durable before this returns (or
    /// queued in the batch); if it cannot be written, the request fails (and a change
    /// is not attempted while the log is known to be failing).
    pub(crate) fn handle_with(
        &self,
        ctx: &RequestCtx,
        op: Op,
        (mut note, batch, unlinked): (serde_json::Map<String, Value>, Option<&Batch>, bool),
        pre: Result<(), GatewayError>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        let started = Instant::now();
        let pol = self.policy();
        // A request the router refused lies in no workspace: it names none.
        if let (Some(name), Ok(())) = (&self.name, &pre) {
            note.insert("workspace".into(), Value::String(name.to_string()));
        }
        let mut facts = Facts::new(op.id(), op.audit_args());
        facts.args.extend(note);
        facts.unlinked = unlinked;
        facts.waiting = batch.map_or(budget::Waiting::Wait, Batch::waiting);
        let sane = pre.and_then(|()| refuse_overlong(&op, &mut facts));
        if sane.is_ok() && pol.has_ask_rules() {
            facts.ask = Some(self.ask_ctx(&pol, ctx, &op));
        }
        let preflight = sane.and_then(|()| match (&self.audit, op.is_mutating()) {
            (Some(a), true) => a
                .ready_for_change()
                .map_err(|e| GatewayError::Internal(format!("{e}; nothing was changed"))),
            _ => Ok(()),
        });
        let result = match preflight {
            Ok(()) => op.run(&self.cx(&pol, ctx), &mut facts),
            Err(e) => Err(e),
        };
        // A change that made none (mkdir -p of a directory there) still answers to its
        // questions: nothing an ask rule covers succeeds without a person.
        let result = result.and_then(|out| facts.settle_pending().map(|()| out));
        facts.finish(&result, started.elapsed());
        tracing::debug!(op = op.name(), session = %ctx.session, outcome = %facts.outcome, rule = ?facts.rule, "request");
        let lease = facts.lease.take().filter(|_| result.is_ok());
        let Some(audit) = &self.audit else {
            sync_entry_now(facts.entry_sync.take());
            drop(facts.held.take());
            return (result, lease);
        };
        let intent = facts.intent;
        let real = facts.real.clone();
        let wanted = ctx.notifier.is_some()
            || self.change_watch.get().is_some()
            || (self.vcs.is_some() && pol.vcs_stage());
        let note = match (&result, wanted) {
            (Ok(_), true) if op.is_mutating() => {
                change_note(self.workspace.root_path(), ctx, &op, &facts)
            }
            _ => None,
        };
        let entry = facts.entry_sync.take();
        // Held until the entry is durable (the next write of the path waits for it).
        let _held = facts.held.take();
        let mut event = facts.into_event(ctx);
        event.policy_sha256 = Some(Arc::from(pol.sha256()));
        let deferred = batch.filter(|_| intent.is_none() && !op.is_mutating());
        let appended = match (entry, intent) {
            (Some(entry), Some(seq)) if result.is_ok() => {
                record_beside_entry(audit, &mut event, entry, seq)
            }
            (entry, _) => {
                sync_entry_now(entry);
                append(audit, &event, deferred)
            }
        };
        match appended {
            Ok(seq) => {
                if let Some(mut note) = note {
                    note.seq = seq;
                    if let Some(sink) = &ctx.notifier {
                        sink.changed(&note);
                    }
                    if let Some(watch) = self.change_watch.get() {
                        watch.changed(&note, ctx.door.name);
                    }
                    if pol.vcs_stage() {
                        self.stage(&at_real(note, real));
                    }
                }
                (result, lease)
            }
            Err(e) => {
                tracing::error!("audit log: {e}");
                let err = unrecorded(&e, intent, result.is_ok(), op.is_mutating());
                (Err(err), None)
            }
        }
    }

    /// What an operation of this workspace is given for one request.
    pub(crate) fn cx<'a>(&'a self, pol: &'a Policy, ctx: &'a RequestCtx) -> Cx<'a> {
        Cx {
            pol,
            ctx,
            workspace: &self.workspace,
            name: self.name.as_ref(),
            current: &self.policy,
            audit: self.audit.as_ref(),
            saver: self.saver(),
            budget: &self.budget,
            writing: &self.writing,
            clean_opens: &self.clean_opens,
        }
    }

    /// What a change saves its backups through.
    pub(crate) fn saver(&self) -> crate::saver::Saver<'_> {
        crate::saver::Saver {
            workspace: &self.workspace,
            store: self.backups.as_ref(),
            saves: &self.saves,
            audit: self.audit.as_ref(),
        }
    }

    /// What a request needs to put a question to a person.
    fn ask_ctx(&self, pol: &Policy, ctx: &RequestCtx, op: &Op) -> ask::AskCtx {
        let proposed = ctx.asker.as_ref().and_then(|_| op.proposed());
        ask::AskCtx::new(
            ctx.asker.clone(),
            pol.ask_timeout(),
            self.grants.clone(),
            &ctx.session,
            self.workspace.root_path().to_path_buf(),
            proposed,
        )
        .deferring(op.is_mutating())
        .in_style(ctx.style)
        .in_workspace(self.name.clone())
    }
}

/// Refuses a request that gives a path or pattern longer than [`PATH_MAX`], or a path
/// the audit log could not write whole (longer than [`PATH_MAX`] once its control
/// characters are escaped: an intent names its file exactly), before any work; its
/// record names what it gave (cut, as every long string in a record).
fn refuse_overlong(op: &Op, facts: &mut Facts) -> Result<(), GatewayError> {
    let texts = op.path_texts();
    let over = |(what, t): &&(&str, &str)| {
        t.len() > PATH_MAX || (what.starts_with("path") && fsgate_audit::cut::is_long(t))
    };
    let Some((what, text)) = texts.iter().find(over) else {
        return Ok(());
    };
    for (name, given) in &texts {
        match *name {
            "path" => facts.path = Some((*given).to_string()),
            "path2" => facts.path2 = Some((*given).to_string()),
            _ => {}
        }
    }
    let noun = if what.starts_with("path") {
        "path"
    } else {
        "pattern"
    };
    let shown = fsgate_audit::cut::head(text, 64);
    if text.len() <= PATH_MAX {
        return Err(GatewayError::InvalidParams(format!(
            "{noun} {shown:?} is {} bytes long once its control characters are escaped, over {PATH_MAX}: the audit log could not name it whole",
            fsgate_audit::cut::written_len(text)
        )));
    }
    Err(GatewayError::InvalidParams(format!(
        "{noun} {shown:?} is {} bytes long, over the kernel's PATH_MAX of {PATH_MAX} bytes: no file has such a path",
        text.len()
    )))
}

impl Gateway {
    /// From now on `watch` is told of every change this gateway makes, after its
    /// record is durable. False if a watch was set already (there is one at most).
    pub fn watch_changes(&self, watch: Arc<dyn ChangeWatch>) -> bool {
        self.change_watch.set(watch).is_ok()
    }

    /// Stages a change in git (`[vcs] stage`) and records what was done; a failure is
    /// logged and recorded, never the request's (the change is made and recorded).
    pub(crate) fn stage(&self, note: &ChangeNote) {
        let Some(vcs) = &self.vcs else { return };
        let started = Instant::now();
        let staged = vcs.stage(note.op, &note.path, note.path2.as_ref());
        if staged == crate::vcs::stage::Staged::default() {
            return;
        }
        if let Some(e) = &staged.error {
            tracing::warn!(op = note.op.name(), path = %note.path, "git staging failed: {e}");
        }
        let mut details = staged.details(note.op.name(), &note.session, note.seq);
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        details.insert("duration_us".into(), took.into());
        self.record("vcs-stage", details);
    }
}

/// `note` naming the entries that really changed (a symlink on the way followed):
/// git stages those, not a link that did not change.
pub(crate) fn at_real(
    mut note: ChangeNote,
    (real, real2): (Option<String>, Option<String>),
) -> ChangeNote {
    let parse = |p: String| RelPath::parse_rooted(&format!("/{p}")).ok();
    if let Some(p) = real.and_then(parse) {
        note.path = p;
    }
    if let Some(p) = real2.and_then(parse).filter(|_| note.path2.is_some()) {
        note.path2 = Some(p);
    }
    note
}

/// The note of a change just made in the workspace at `root`, for the door's notifier.
pub(crate) fn change_note(
    root: &std::path::Path,
    ctx: &RequestCtx,
    op: &Op,
    facts: &Facts,
) -> Option<ChangeNote> {
    let parse = |p: &str| RelPath::parse_rooted(&format!("/{p}")).ok();
    Some(ChangeNote {
        op: op.id().change()?,
        session: ctx.session.clone(),
        path: facts.path.as_deref().and_then(parse)?,
        path2: facts.path2.as_deref().and_then(parse),
        root: root.to_path_buf(),
        proposed: ctx
            .notifier
            .as_ref()
            .filter(|n| n.wants_text())
            .and_then(|_| op.proposed()),
        replaced: facts.replaced.clone(),
        seq: None,
    })
}
