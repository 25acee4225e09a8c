//! The gateway: one value owning the policy, the workspace, the backups and the audit
//! log, running each request through path -> policy -> workspace -> audit.
//!
//! # Layer
//!
//! Owns: one request, whichever door it came through: the operation ([`ops::Op`]), the
//! path's resolution, the policy's decision, the backup, the intent and outcome
//! records, the execution, and git staging ([`vcs`]); a client's roots as directories
//! of the workspace; the change watcher ([`watch`]): what changed, and which of it a
//! client may see. Depends on every layer below but the sandbox. May not touch: wire
//! formats (the doors own them).

pub mod agent_sessions;
pub mod ask;
mod batch;
mod budget;
mod change;
mod door;
mod facts;
mod growth;
mod listing;
mod names;
pub mod ops;
mod path_lock;
mod read;
mod reconcile;
mod regex_bound;
mod roots;
mod route;
mod scope;
pub mod vcs;
pub mod watch;
mod write;

use std::sync::{Arc, RwLock};
use std::time::Instant;

use serde_json::Value;

use crate::ops::{Op, Output, PathStyle, RequestCtx};
use fsgate_audit::{AuditEvent, AuditLog};
use fsgate_backup::BackupStore;
use fsgate_base::error::GatewayError;
use fsgate_base::path::{PathError, RelPath};
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_policy::Policy;
use fsgate_workspace::{Entry, FileKind, Follow, Resolved, Workspace, WsError};

pub use batch::Batch;
pub use budget::{Lease, escape_json_bytes_into, escape_json_into, json_string_len, json_text_len};
pub use door::DoorSpec;
pub(crate) use facts::Facts;
pub use ops::tree::tree_exclusions;
pub use roots::RootError;
pub(crate) use route::named;
use scope::RULE_ROOTS;
pub(crate) use scope::ReqPath;
pub use scope::{Ceiling, Roots, Scope, within};
pub use write::occurrences;

/// Rule id for refusals of paths outside the workspace (lexically or via symlinks).
pub(crate) const RULE_BOUNDARY: &str = "workspace-boundary";
/// Rule id for refusals of files that are not plain (FIFOs, devices, hard links).
pub(crate) const RULE_FILE_TYPE: &str = "workspace-file-type";
/// Rule id for what the operating system refused (permissions, the Landlock sandbox).
pub(crate) const RULE_OS: &str = "os-permission";
/// Rule id for the nesting limit: what the gateway will not inspect, it will not change
/// (nor create).
pub(crate) const RULE_DEPTH: &str = "workspace.max_depth";
/// Rule id for a path that leads through a symbolic link, refused to `fsgate undo`.
pub(crate) const RULE_LINK: &str = "workspace-link";
/// Rule id for a tree that changed between its inspection and its removal.
pub(crate) const RULE_UNINSPECTED: &str = "workspace-uninspected";
/// Rule id for a rename asked never to replace: its destination exists, or the
/// filesystem cannot rename without replacing.
pub const RULE_NO_REPLACE: &str = "workspace-no-replace";

/// The longest path (or pattern) a request may give, in bytes: the kernel's `PATH_MAX`.
/// A longer one is refused before any work (no path could be that long).
pub(crate) const PATH_MAX: usize = 4096;

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

/// A path for an error message: long ones are cut, so a 10 KB path is not echoed whole.
pub fn clip(shown: &str) -> String {
    const MAX: usize = 200;
    if shown.len() <= MAX {
        return shown.to_string();
    }
    let mut end = MAX;
    while !shown.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &shown[..end], shown.len())
}

/// The gateway.
pub struct Gateway {
    /// The policy in force; replaced whole on reload.
    policy: RwLock<Arc<Policy>>,
    /// The workspace root handle.
    workspace: Workspace,
    /// Extra facts for `initialize`'s `_meta.fsgate` (sandbox status...).
    meta: RwLock<serde_json::Map<String, Value>>,
    /// Whether the kernel sandbox lets this process write the workspace: a reloaded
    /// policy may not need more than what was granted at start.
    kernel_allows_write: RwLock<bool>,
    /// The audit log: one record per request, durable before the reply (None in unit
    /// tests and offline tools only).
    audit: Option<AuditLog>,
    /// Where previous versions go before a change (None only where nothing changes).
    backups: Option<BackupStore>,
    /// File content held by requests in flight, across every door (see [`budget`]).
    budget: std::sync::Arc<budget::Budget>,
    /// Backups saved since start: each save prunes its own file's versions, and the pass
    /// over the whole store runs at most every [`PRUNE_EVERY`] saves (see
    /// `BackupStore::sweep_due`), so a long-running gateway keeps to the policy's limits.
    saves: std::sync::atomic::AtomicU64,
    /// "Allow for this session" answers to `ask` rules.
    grants: Arc<ask::Grants>,
    /// The git work tree changes are staged in (`[vcs] stage`), found at start.
    vcs: Option<Arc<crate::vcs::Stager>>,
    /// Paths being written now: writes of one path run one after the other.
    writing: Arc<path_lock::PathLocks>,
    /// Provisional session names a door serves under until it knows the real one.
    names: names::SessionNames,
    /// This workspace's name when several are served (records say it in
    /// `args.workspace`); None with one workspace.
    name: Option<Arc<str>>,
    /// The other workspaces, each a gateway of its own, that this one routes to (see
    /// [`route`]); empty with one workspace.
    others: Vec<Arc<Gateway>>,
    /// Files the filesystem view opened whose content was found clean, by version (see
    /// `ops/open.rs`).
    clean_opens: ops::CleanOpens,
    /// Told of every change, whichever door asked (see [`ChangeWatch`]).
    change_watch: std::sync::OnceLock<Arc<dyn ChangeWatch>>,
}

/// A change the gateway made for a client, told to that client's door after its
/// audit record is durable.
#[derive(Debug, Clone)]
pub struct ChangeNote {
    /// The request's operation (`write`, `edit`, `mkdir`, `rm`, `rename`...).
    pub op: fsgate_audit::ChangeOp,
    /// The session the request came in.
    pub session: String,
    /// The changed path (workspace-relative).
    pub path: RelPath,
    /// The second path of a rename (its destination).
    pub path2: Option<RelPath>,
    /// The workspace root, to make absolute paths.
    pub root: std::path::PathBuf,
    /// For a text write or edit small enough to show, when the door shows diffs: its text.
    pub proposed: Option<ask::Proposed>,
    /// For such a write over an existing file: what it replaced.
    pub replaced: Option<ask::Replaced>,
    /// The audit record's seq, when there is a log.
    pub seq: Option<u64>,
}

impl ChangeNote {
    /// The changed path, absolute.
    pub fn abs_path(&self) -> std::path::PathBuf {
        self.root.join(self.path.as_str())
    }

    /// The rename destination, absolute.
    pub fn abs_path2(&self) -> Option<std::path::PathBuf> {
        self.path2.as_ref().map(|p| self.root.join(p.as_str()))
    }
}

/// A door that tells its client of the changes the gateway made for it.
pub trait ChangeSink: Send + Sync + std::fmt::Debug {
    /// Called on the request's thread after the change's record is durable; must not
    /// block (queue, bounded).
    fn changed(&self, note: &ChangeNote);

    /// Whether notes should carry the text of a write or edit (a copy of up to
    /// `ask::MAX_SHOWN_TEXT` per change): only a door that shows a diff wants it.
    fn wants_text(&self) -> bool {
        false
    }
}

/// Told of every change a gateway makes, whichever door asked for it: the filesystem
/// view takes back what the kernel holds of a path another door (an agent's file tool)
/// changed, so the agent's shell does not read the file as it was.
pub trait ChangeWatch: Send + Sync + std::fmt::Debug {
    /// Called on the request's thread after the change's record is durable, with the
    /// name of the door (`RequestCtx::door`) that asked; must not block for long.
    fn changed(&self, note: &ChangeNote, door: &str);
}

/// One message from any door, as the gateway takes it (see [`Gateway::serve`]).
#[derive(Debug, Clone)]
pub enum Request {
    /// A workspace operation.
    Op(Op),
    /// A message that is no workspace operation; the door answers it with `outcome`.
    Message {
        /// The method, or what the message was (`invalid-message`, `ws-upgrade`...).
        name: String,
        /// The answer the door gives: Ok, or (JSON-RPC code, message).
        outcome: Result<(), (i64, String)>,
        /// The rule that refused it, when a door's own check did.
        rule: Option<&'static str>,
    },
}

impl Request {
    /// A message that is no workspace operation.
    pub fn message(name: impl Into<String>, outcome: Result<(), (i64, String)>) -> Request {
        Request::Message {
            name: name.into(),
            outcome,
            rule: None,
        }
    }

    /// A message a door refused by its own check, naming the rule.
    pub fn refusal(name: impl Into<String>, rule: &'static str, error: (i64, String)) -> Request {
        Request::Message {
            name: name.into(),
            outcome: Err(error),
            rule: Some(rule),
        }
    }
}

/// The fewest backups saved between two retention passes over the whole store.
pub(crate) const PRUNE_EVERY: u64 = 100;

impl Gateway {
    /// A gateway over an opened workspace with a loaded policy.
    pub fn new(policy: Policy, workspace: Workspace) -> Gateway {
        let budget = budget::Budget::new(policy.limits().max_message_bytes.saturating_mul(2));
        Gateway {
            budget,
            policy: RwLock::new(Arc::new(policy)),
            workspace,
            meta: RwLock::new(serde_json::Map::new()),
            kernel_allows_write: RwLock::new(true),
            audit: None,
            backups: None,
            saves: std::sync::atomic::AtomicU64::new(0),
            grants: Arc::default(),
            vcs: None,
            writing: Arc::default(),
            names: names::SessionNames::default(),
            name: None,
            others: Vec::new(),
            clean_opens: ops::CleanOpens::default(),
            change_watch: std::sync::OnceLock::new(),
        }
    }

    /// From now on `watch` is told of every change this gateway makes, after its
    /// record is durable. False if a watch was set already (there is one at most).
    pub fn watch_changes(&self, watch: Arc<dyn ChangeWatch>) -> bool {
        self.change_watch.set(watch).is_ok()
    }

    /// From now on the session named `provisional` is the session `real`: its requests
    /// are served, recorded and asked about under `real`. False when too many names
    /// are held already (its records then keep the provisional name).
    pub fn name_session(&self, provisional: &str, real: &str) -> bool {
        self.names.give(provisional, real)
    }

    /// Attaches the git work tree changes are staged in.
    pub fn with_vcs(mut self, stager: crate::vcs::Stager) -> Gateway {
        self.vcs = Some(Arc::new(stager));
        self
    }

    /// The git work tree changes are staged in, if one was found at start.
    pub fn vcs(&self) -> Option<&crate::vcs::Stager> {
        self.vcs.as_deref()
    }

    /// Attaches the audit log.
    pub fn with_audit(mut self, audit: AuditLog) -> Gateway {
        self.audit = Some(audit);
        self
    }

    /// Attaches the backup store.
    pub fn with_backups(mut self, backups: BackupStore) -> Gateway {
        self.backups = Some(backups);
        self
    }

    /// The audit log, if attached.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The backup store, if attached.
    pub fn backups(&self) -> Option<&BackupStore> {
        self.backups.as_ref()
    }

    /// Appends a lifecycle record (start, stop, reload, session...). Failures are logged:
    /// lifecycle records answer no request.
    pub fn record(&self, kind: &str, details: serde_json::Map<String, Value>) {
        if let Some(a) = &self.audit
            && let Err(e) = a.append(AuditEvent::lifecycle(kind, details))
        {
            tracing::error!("audit log: cannot record `{kind}`: {e}");
        }
    }

    /// Records `start` and starts the audit log's threads, the first of which writes
    /// and syncs the record while this returns. Later records queue behind it, so none
    /// is durable (nor, at `fsync = "always"`, answered) before it.
    pub fn record_start(&self, details: serde_json::Map<String, Value>) {
        if let Some(a) = &self.audit
            && let Err(e) = a.start_with(&AuditEvent::lifecycle("start", details))
        {
            tracing::error!("audit log: {e}");
        }
    }

    /// The part of the workspace a change-event subscription names (`/`, `/src`, with
    /// several workspaces `/<name>/...`): a rooted path, normalised. No policy applies:
    /// it only narrows the events a connection gets, each of which the watcher has
    /// already let through.
    pub fn subscription(&self, path: &str) -> Result<RelPath, GatewayError> {
        RelPath::parse_rooted(path)
            .map_err(|e| GatewayError::InvalidParams(format!("path {path:?}: {e}")))
    }

    /// Appends a session's lifecycle record (e.g. `roots`: the scope a client's roots put
    /// in force), under the session, transport and peer of `ctx`. Failures are logged:
    /// such records answer no request.
    pub fn record_for(
        &self,
        ctx: &RequestCtx,
        kind: &str,
        details: serde_json::Map<String, Value>,
    ) {
        let Some(a) = &self.audit else { return };
        let ev = AuditEvent {
            session: ctx.session.clone(),
            transport: ctx.door.name.to_string(),
            peer: ctx.peer.clone(),
            ..AuditEvent::lifecycle(kind, details)
        };
        if let Err(e) = a.append(ev) {
            tracing::error!("audit log: cannot record `{kind}`: {e}");
        }
    }

    /// Applies the backup retention rules once, recording what was removed.
    pub fn prune_backups(&self) {
        let Some(store) = self.backups() else { return };
        match store.prune() {
            Ok(report) => self.record_prune(&report),
            Err(e) => tracing::warn!("backup retention: {e}"),
        }
    }

    /// Notes that the kernel sandbox grants no write rights on the workspace.
    pub fn set_kernel_allows_write(&self, allowed: bool) {
        if let Ok(mut w) = self.kernel_allows_write.write() {
            *w = allowed;
        }
    }

    /// Replaces the policy after validating that it fits what the process can do.
    /// The fixed floor carries over. Returns (old sha256, new sha256).
    pub fn reload(&self, new: Policy) -> Result<(String, String), String> {
        if !self.is_several() {
            self.admits(&new)?;
            return Ok(self.reload_one(new));
        }
        // Several workspaces: each takes the rules for it, and only if every one can.
        let each: Vec<(&Gateway, Policy)> = self
            .members()
            .map(|m| (m, new.for_workspace(m.name().unwrap_or(""))))
            .collect();
        for (m, p) in &each {
            m.admits(p)
                .map_err(|e| format!("workspace `{}`: {e}", m.name().unwrap_or("")))?;
        }
        let mut hashes = (String::new(), String::new());
        for (m, p) in each {
            hashes = m.reload_one(p);
        }
        Ok(hashes)
    }

    /// Whether `new` fits what the process can do for this workspace.
    fn admits(&self, new: &Policy) -> Result<(), String> {
        let may_write = self.kernel_allows_write.read().map(|w| *w).unwrap_or(false);
        if new.can_ever(OpClass::Write) && !may_write {
            return Err(
                "the new policy allows writes, but the kernel sandbox was set up read-only at start; restart fsgate to widen it"
                    .into(),
            );
        }
        self.vcs_allows(new)
    }

    /// Puts `new` in force for this workspace (checked by [`Self::admits`]).
    fn reload_one(&self, mut new: Policy) -> (String, String) {
        let old = self.policy();
        // The floor carries over, plus any gitleaks config the new policy names.
        let mut floor = old.floor().entries().to_vec();
        floor.extend(fsgate_decide::floor::entries_inside(
            self.workspace.root_path(),
            fsgate_policy::floor::gitleaks_configs(&new),
        ));
        new.set_floor(fsgate_decide::floor::FixedFloor::from_entries(floor));
        let hashes = (old.sha256().to_string(), new.sha256().to_string());
        let mut slot = match self.policy.write() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        // "Allow for this session" was given for a rule as it was: a rule changed (or
        // gone) under the same id is asked about again.
        self.grants.retain(|id| match (old.rule(id), new.rule(id)) {
            (Some(a), Some(b)) => a.same_scope(b),
            _ => false,
        });
        *slot = Arc::new(new);
        // Under the lock, so that no request sees the new policy before the log does.
        if let Some(a) = &self.audit {
            a.set_policy_sha256(&hashes.1);
        }
        hashes
    }

    /// `[vcs] stage` in a reloaded policy: git's files must stay out of the agent's
    /// reach; a repository is only looked for at start.
    fn vcs_allows(&self, new: &Policy) -> Result<(), String> {
        if !new.vcs_stage() {
            return Ok(());
        }
        match &self.vcs {
            Some(v) => v
                .check_policy(new, self.workspace.root_path())
                .map_err(|e| e.to_string()),
            None => {
                tracing::warn!(
                    "[vcs] stage = true in the reloaded policy, but no git work tree was found at start (or staging was off then): nothing is staged until a restart"
                );
                Ok(())
            }
        }
    }

    /// Records the result of a policy reload: a `reload` audit record with both hashes,
    /// or a `reload-rejected` record saying why the old policy stays in force.
    pub fn note_reload(&self, origin: &str, result: Result<(String, String), String>) {
        let mut details = serde_json::Map::new();
        details.insert("policy".into(), origin.into());
        match result {
            Ok((old, new)) => {
                details.insert("old_sha256".into(), old.clone().into());
                details.insert("new_sha256".into(), new.clone().into());
                self.record("reload", details);
                self.set_meta("policyReloadedFrom", Value::String(old + " -> " + &new));
            }
            Err(e) => {
                details.insert("error".into(), e.clone().into());
                details.insert("in_force_sha256".into(), self.policy().sha256().into());
                self.record("reload-rejected", details);
                self.set_meta("lastReloadError", Value::String(e));
            }
        }
    }

    /// The policy in force now.
    pub fn policy(&self) -> Arc<Policy> {
        match self.policy.read() {
            Ok(p) => Arc::clone(&p),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Adds a fact to `initialize`'s `_meta.fsgate`.
    pub fn set_meta(&self, key: &str, value: Value) {
        if let Ok(mut m) = self.meta.write() {
            m.insert(key.to_string(), value);
        }
    }

    /// `_meta.fsgate` for `initialize`.
    pub fn meta(&self) -> Value {
        let pol = self.policy();
        let mut m = self.meta.read().map(|m| m.clone()).unwrap_or_default();
        m.insert("version".into(), env!("CARGO_PKG_VERSION").into());
        m.insert(
            "workspace".into(),
            self.workspace
                .root_path()
                .to_string_lossy()
                .into_owned()
                .into(),
        );
        m.insert(
            "policy".into(),
            serde_json::json!({"origin": pol.origin(), "sha256": pol.sha256()}),
        );
        if self.is_several() {
            m.insert("workspaces".into(), self.workspaces_json());
        }
        Value::Object(m)
    }

    /// The one way into the gateway for every message from every door: a workspace
    /// operation is decided, recorded, executed and answered; any other message (an
    /// `initialize`, an unknown method, malformed JSON, a subscribe, a refused upgrade) is
    /// recorded, and the door answers it with the outcome it gave. Err: the message could
    /// not be recorded, and the door answers with that error instead.
    pub fn serve(&self, ctx: &RequestCtx, request: Request) -> Result<Output, GatewayError> {
        self.serve_leased(ctx, request).0
    }

    /// [`serve`](Self::serve), with the content budget the answer holds: a door keeps
    /// it until it has queued the encoded answer for its client, so that content held in
    /// memory stays bounded across every door (see `budget`).
    pub fn serve_leased(
        &self,
        ctx: &RequestCtx,
        request: Request,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.serve_batched(ctx, request, None)
    }

    /// [`serve_leased`](Self::serve_leased) as one request of `batch`: a read-only
    /// operation's record is queued in the batch, not waited for, and its answer must
    /// not go out before [`settle`](Self::settle) said the batch is durable.
    pub fn serve_in(
        &self,
        ctx: &RequestCtx,
        request: Request,
        batch: &Batch,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.serve_leased_in(ctx, request, Some(batch))
    }

    /// A door's one way to serve a request alone or in a batch: [`serve_in`](Self::serve_in)
    /// if `batch` is given, else [`serve_leased`](Self::serve_leased).
    pub fn serve_leased_in(
        &self,
        ctx: &RequestCtx,
        request: Request,
        batch: Option<&Batch>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        let (out, lease) = self.serve_batched(ctx, request, batch);
        if let Some(b) = batch {
            b.note_lease(lease.as_ref());
        }
        (out, lease)
    }

    fn serve_batched(
        &self,
        ctx: &RequestCtx,
        request: Request,
        batch: Option<&Batch>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        let named;
        let ctx = match self.names.real(&ctx.session) {
            Some(session) => {
                named = RequestCtx {
                    session,
                    ..ctx.clone()
                };
                &named
            }
            None => ctx,
        };
        if let Err(e) = self.within_growth(ctx, &request) {
            return (Err(e), None);
        }
        match request {
            Request::Op(op) if self.is_several() => self.route_op(ctx, op, batch),
            Request::Op(op) => self.handle_in(ctx, op, batch),
            Request::Message {
                name,
                outcome,
                rule,
            } => (
                self.record_other(ctx, &name, outcome, rule)
                    .map(|()| Output::Unit),
                None,
            ),
        }
    }

    /// [`serve`](Self::serve) of one operation whose records (its intent and its
    /// outcome) carry `note` among their `args`: `fsgate undo` names the session it
    /// undoes this way (`args.undo`), and the backup it puts back (`args.restoredFrom`).
    /// Its paths are reached without following any symbolic link (rule
    /// `workspace-link`): what an undo puts back goes exactly where the change was, never
    /// through a link made since to somewhere else.
    pub fn serve_noted(
        &self,
        ctx: &RequestCtx,
        op: Op,
        note: serde_json::Map<String, Value>,
    ) -> Result<Output, GatewayError> {
        self.handle_noted(ctx, op, note).0
    }

    /// Records a request that is not a workspace operation (initialize, an unknown
    /// method, malformed params or JSON): every request gets its audit record before its
    /// response. Err if the record could not be written (the caller answers -32603).
    fn record_other(
        &self,
        ctx: &RequestCtx,
        op: &str,
        outcome: Result<(), (i64, String)>,
        rule: Option<&str>,
    ) -> Result<(), GatewayError> {
        let Some(audit) = &self.audit else {
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

    /// Runs one operation through every gate and records it. The audit record is
    /// durable before this returns; if it cannot be written, the request fails (and a
    /// change is not attempted while the log is known to be failing).
    fn handle(&self, ctx: &RequestCtx, op: Op) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.handle_in(ctx, op, None)
    }

    /// [`handle`](Self::handle), in `batch` if one is given.
    fn handle_in(
        &self,
        ctx: &RequestCtx,
        op: Op,
        batch: Option<&Batch>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.handle_with(ctx, op, (serde_json::Map::new(), batch, false), Ok(()))
    }

    /// [`handle`](Self::handle), with `note` added to the records' `args`.
    fn handle_noted(
        &self,
        ctx: &RequestCtx,
        op: Op,
        note: serde_json::Map<String, Value>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        self.handle_with(ctx, op, (note, None, true), Ok(()))
    }

    /// [`handle_noted`](Self::handle_noted) of an operation that `pre` may have
    /// refused already (a router's refusal): it is recorded all the same. In a batch if
    /// one is given; `unlinked`: no path may lead through a symbolic link.
    fn handle_with(
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
        let mut facts = Facts::new(&op);
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
            Ok(()) => self.execute(&pol, ctx, &op, &mut facts),
            Err(e) => Err(e),
        };
        // A change that made none (mkdir -p of a directory there) still answers to its
        // questions: nothing an ask rule covers succeeds without a person.
        let result = result.and_then(|out| Self::settle_pending(&mut facts).map(|()| out));
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
            (Ok(_), true) if op.is_mutating() => self.change_note(ctx, &op, &facts),
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
                        self.stage(&Self::at_real(note, real));
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

    /// Stages a change in git (`[vcs] stage`) and records what was done; a failure is
    /// logged and recorded, never the request's (the change is made and recorded).
    fn stage(&self, note: &ChangeNote) {
        let Some(vcs) = &self.vcs else { return };
        let started = Instant::now();
        let staged = vcs.stage(note.op, &note.path, note.path2.as_ref());
        if staged == crate::vcs::Staged::default() {
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

    /// `note` naming the entries that really changed (a symlink on the way followed):
    /// git stages those, not a link that did not change.
    fn at_real(
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

    /// What a request needs to put a question to a person.
    fn ask_ctx(&self, pol: &Policy, ctx: &RequestCtx, op: &Op) -> ask::AskCtx {
        let proposed = ctx.asker.as_ref().and_then(|_| ask::Proposed::of(op));
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

    /// The note of a change just made, for the door's notifier.
    fn change_note(&self, ctx: &RequestCtx, op: &Op, facts: &Facts) -> Option<ChangeNote> {
        let parse = |p: &str| RelPath::parse_rooted(&format!("/{p}")).ok();
        Some(ChangeNote {
            op: op.id().change()?,
            session: ctx.session.clone(),
            path: facts.path.as_deref().and_then(parse)?,
            path2: facts.path2.as_deref().and_then(parse),
            root: self.workspace.root_path().to_path_buf(),
            proposed: ctx
                .notifier
                .as_ref()
                .filter(|n| n.wants_text())
                .and_then(|_| ask::Proposed::of(op)),
            replaced: facts.replaced.clone(),
            seq: None,
        })
    }

    /// Makes the intent of a change durable before the workspace is touched: what
    /// cannot be recorded ahead is not done (fail closed).
    pub(crate) fn intend(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let queued = self.intend_queued(pol, ctx, facts)?;
        self.intended(queued, facts)
    }

    /// The first half of [`intend`](Self::intend): the intent is queued for the log, not
    /// yet durable. Work that leaves the workspace as it is (content staged in a file
    /// nobody can see) may run before [`intended`](Self::intended) waits for it.
    pub(crate) fn intend_queued(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        facts: &mut Facts,
    ) -> Result<Option<fsgate_audit::Ticket>, GatewayError> {
        Self::settle_pending(facts)?;
        self.same_policy_since_asked(pol, facts)?;
        let Some(audit) = &self.audit else {
            return Ok(None);
        };
        let mut ev = facts.intent_event(ctx);
        ev.policy_sha256 = Some(Arc::from(pol.sha256()));
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
        let (Some(audit), Some(ticket)) = (&self.audit, queued) else {
            return Ok(());
        };
        let receipt = audit.wait(ticket).map_err(not_recorded_ahead)?;
        facts.intent = Some(receipt.seq);
        Ok(())
    }

    /// A person may take minutes: a change they allowed under a policy since reloaded is
    /// not made (the new policy may deny it, or no longer ask).
    fn same_policy_since_asked(&self, pol: &Policy, facts: &Facts) -> Result<(), GatewayError> {
        let Some(q) = facts.asked.iter().rev().find(|a| a.put_to_person()) else {
            return Ok(());
        };
        if self.policy().sha256() == pol.sha256() {
            return Ok(());
        }
        Err(GatewayError::Refused {
            reason: "the policy was reloaded while a person was asked; nothing was changed (retry under the policy now in force)".into(),
            rule: q.rule().to_string(),
            path: facts.path.clone().unwrap_or_default(),
        })
    }

    /// Parses a request path in the transport's style.
    pub(crate) fn parse_path(
        &self,
        ctx: &RequestCtx,
        input: &str,
    ) -> Result<ReqPath, GatewayError> {
        let root = self.workspace.root_path();
        let dealiased = self.dealias(ctx.style, input);
        let parsed = match ctx.style {
            PathStyle::Absolute => RelPath::parse_absolute(&dealiased, root),
            PathStyle::AbsoluteOrRelative => RelPath::parse_any(&dealiased, root),
            PathStyle::Rooted => RelPath::parse_rooted(&dealiased),
        };
        let shown = input.replace('\0', "\\0");
        match parsed {
            Ok(rel) => Ok(self.req_path(ctx, rel, shown)),
            Err(e @ (PathError::OutsideRoot { .. } | PathError::Escapes)) => {
                Err(GatewayError::Refused {
                    reason: e.to_string(),
                    rule: RULE_BOUNDARY.into(),
                    path: shown,
                })
            }
            Err(e) => Err(GatewayError::InvalidParams(format!("path {shown:?}: {e}"))),
        }
    }

    /// `rel` as a request path of `ctx`'s session in this workspace.
    pub(crate) fn req_path(&self, ctx: &RequestCtx, rel: RelPath, shown: String) -> ReqPath {
        ReqPath::new(self, ctx, rel, shown)
    }

    /// `input` with the operator's name for the root replaced by the canonical root
    /// ([`Workspace::dealias`]), for host-path styles only: workspace-rooted paths
    /// (WebSocket) are never host paths.
    pub(crate) fn dealias<'a>(
        &self,
        style: PathStyle,
        input: &'a str,
    ) -> std::borrow::Cow<'a, str> {
        match style {
            PathStyle::Rooted => std::borrow::Cow::Borrowed(input),
            _ => self.workspace.dealias(input),
        }
    }

    /// Renders a workspace path in the transport's style.
    pub fn show_path(&self, style: PathStyle, rel: &RelPath) -> String {
        match style {
            PathStyle::Absolute | PathStyle::AbsoluteOrRelative if self.is_several() => self
                .show_named(rel)
                .unwrap_or_else(|| rel.to_absolute(self.workspace.root_path())),
            PathStyle::Absolute | PathStyle::AbsoluteOrRelative => {
                rel.to_absolute(self.workspace.root_path())
            }
            PathStyle::Rooted => rel.to_rooted(),
        }
    }

    /// Refuses unless the policy allows `class` on `path`.
    pub(crate) fn check(
        pol: &Policy,
        class: OpClass,
        path: &RelPath,
        kind: EntryKind,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let d = pol.decide(class, path, kind);
        Self::refuse_unless(d, class.as_str(), path, shown, facts)
    }

    /// Refuses unless the policy allows `op`'s own checks on `path`, knowing `pf`.
    pub(crate) fn check_entry(
        pol: &Policy,
        op: Access,
        path: &RelPath,
        pf: &PathFacts,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let d = pol.decide_entry(op, path, pf);
        Self::refuse_unless(d, op.as_str(), path, shown, facts)
    }

    /// The final decision once a file's size is known (a write: the larger of its
    /// current and new size), where the request names it and where it leads; the
    /// checks before it deferred the rules with a size condition.
    pub(crate) fn check_size(
        pol: &Policy,
        op: Access,
        (rp, real): (&ReqPath, &RelPath),
        size: u64,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if !pol.has_size_rules() {
            return Ok(());
        }
        let pf = PathFacts::file(size);
        Self::check_entry(pol, op, &rp.rel, &pf, &rp.shown, facts)?;
        if *real != rp.rel {
            Self::check_entry(pol, op, real, &pf, &rp.shown, facts)?;
        }
        Ok(())
    }

    fn refuse_unless(
        d: fsgate_decide::Decision<'_>,
        what: &str,
        path: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if d.asks() {
            return Self::settle_ask(&d, what, path, shown, facts);
        }
        facts.decided(&d);
        if d.allowed() {
            Ok(())
        } else {
            Err(GatewayError::Refused {
                reason: format!("{what} of `{path}` denied: {}", d.reason),
                rule: d.rule.to_string(),
                path: shown.to_string(),
            })
        }
    }

    /// An ask decision: a person allows it, or it is refused naming the rule.
    fn settle_ask(
        d: &fsgate_decide::Decision<'_>,
        what: &str,
        path: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        // No context: a request that began before a reload brought ask rules.
        let ask = facts.ask.get_or_insert_with(ask::AskCtx::unaskable);
        let op = facts.op;
        if ask::settle(ask, d, (op, what), path, shown, &mut facts.asked)? {
            facts.decided(d);
        }
        Ok(())
    }

    /// Puts the questions a change put off ([`ask::settle_pending`]): called before the
    /// change's first side effect (a backup, its intent), after every other check.
    pub(crate) fn settle_pending(facts: &mut Facts) -> Result<(), GatewayError> {
        let Some(mut ask) = facts.ask.take() else {
            return Ok(());
        };
        let mut asked = std::mem::take(&mut facts.asked);
        let settled = ask::settle_pending(&mut ask, &mut asked, |d| facts.decided(d));
        facts.asked = asked;
        facts.ask = Some(ask);
        settled
    }

    /// Content gate: refuses `bytes` read or written under `class` when the policy's
    /// `[content]` rules find a secret in them. The refusal names the rule and the line,
    /// never the content.
    pub(crate) fn check_content(
        pol: &Policy,
        class: OpClass,
        path: &RelPath,
        bytes: &[u8],
        shown: &str,
    ) -> Result<(), GatewayError> {
        let hit = scanner_for(pol, class).and_then(|s| s.scan(path, bytes));
        Self::content_verdict(class, path, shown, hit)
    }

    /// [`check_content`](Self::check_content) of bytes whose SHA-256 is known: the
    /// scanner skips bytes it found clean at this path before.
    pub(crate) fn check_content_digested(
        pol: &Policy,
        class: OpClass,
        path: &RelPath,
        (bytes, digest): (&[u8], &[u8; 32]),
        shown: &str,
    ) -> Result<(), GatewayError> {
        let hit = scanner_for(pol, class).and_then(|s| s.scan_digested(path, bytes, digest));
        Self::content_verdict(class, path, shown, hit)
    }

    /// A content finding as the refusal that names its rule.
    fn content_verdict(
        class: OpClass,
        path: &RelPath,
        shown: &str,
        hit: Option<fsgate_policy::ContentHit>,
    ) -> Result<(), GatewayError> {
        match hit {
            None => Ok(()),
            Some(hit) => {
                let at = if hit.line == 0 {
                    String::new()
                } else {
                    format!(" on line {}", hit.line)
                };
                Err(GatewayError::Refused {
                    reason: format!(
                        "{} of `{}` denied: the content holds a secret{at}",
                        class.as_str(),
                        path
                    ),
                    rule: hit.rule_id,
                    path: shown.to_string(),
                })
            }
        }
    }

    /// Path gate + policy gate: checks the lexical path, resolves it beneath the root,
    /// and checks again where it really leads.
    pub(crate) fn locate(
        &self,
        pol: &Policy,
        class: OpClass,
        rp: &ReqPath,
        follow: Follow,
        kind: EntryKind,
        facts: &mut Facts,
    ) -> Result<Resolved, GatewayError> {
        Self::in_roots(rp, &rp.rel, facts)?;
        Self::check(pol, class, &rp.rel, kind, &rp.shown, facts)?;
        self.resolve_checked(pol, class, rp, follow, kind, facts)
    }

    /// The second half of [`Gateway::locate`], for callers that checked the lexical path
    /// themselves: resolves it beneath the root and checks again where it really leads.
    pub(crate) fn resolve_checked(
        &self,
        pol: &Policy,
        class: OpClass,
        rp: &ReqPath,
        follow: Follow,
        kind: EntryKind,
        facts: &mut Facts,
    ) -> Result<Resolved, GatewayError> {
        let res = self
            .workspace
            .resolve(&rp.rel, follow)
            .map_err(|e| ws_error(e, &rp.shown))?;
        if res.real != rp.rel {
            if facts.unlinked {
                return Err(Self::linked(rp, facts));
            }
            Self::in_roots(rp, &res.real, facts)?;
            if let Some(ask) = facts.ask.as_mut() {
                ask.retarget(&rp.rel, &res.real);
            }
            Self::check(pol, class, &res.real, kind, &rp.shown, facts)?;
        }
        Ok(res)
    }

    /// The refusal of a path that leads through a symbolic link, for a request that
    /// may follow none (see [`Gateway::serve_noted`]).
    fn linked(rp: &ReqPath, facts: &mut Facts) -> GatewayError {
        facts.decision = Some("deny");
        facts.rule = Some(RULE_LINK.to_string());
        GatewayError::Refused {
            reason: format!(
                "`{}` leads through a symbolic link; fsgate undo follows none",
                rp.rel
            ),
            rule: RULE_LINK.into(),
            path: rp.shown.clone(),
        }
    }

    /// Refuses `path` (the request's, or where it leads) outside the session's roots.
    fn in_roots(rp: &ReqPath, path: &RelPath, facts: &mut Facts) -> Result<(), GatewayError> {
        if rp.in_roots(path) {
            return Ok(());
        }
        facts.decision = Some("deny");
        facts.rule = Some(RULE_ROOTS.to_string());
        Err(GatewayError::Refused {
            reason: format!(
                "`{path}` is outside the roots this session's client gave (see list_allowed_directories)"
            ),
            rule: RULE_ROOTS.into(),
            path: rp.shown.clone(),
        })
    }
}

/// Appends a request's record; its seq once written. In a `batch` (a read-only
/// request's record), it is queued now and the batch keeps its ticket, to be settled
/// before any answer (None).
fn append(
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
fn record_beside_entry(
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

/// A directory sync refused as unsupported by the filesystem (some FUSE and network
/// filesystems), not failed: nothing later would succeed either.
fn cannot_sync_dirs(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    e.raw_os_error().is_some_and(|n| {
        matches!(
            Errno::from_raw_os_error(n),
            Errno::INVAL | Errno::OPNOTSUPP | Errno::NOSYS
        )
    })
}

/// Makes a published write's name durable on this thread (no outcome to record beside
/// it). A failure is logged: the change is made, and undoing it would be worse.
fn sync_entry_now(entry: Option<fsgate_workspace::EntrySync>) {
    if let Some(Err(e)) = entry.map(fsgate_workspace::EntrySync::sync_now) {
        tracing::warn!("cannot sync a workspace directory after a change: {e}");
    }
}

/// The error of a request whose record could not be written: what became of the
/// change (its intent is record `intent`, if it had one), or that the result is
/// withheld.
fn unrecorded(
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

/// The refusal of a change whose intent could not be made durable.
fn not_recorded_ahead(e: fsgate_audit::AuditError) -> GatewayError {
    tracing::error!("audit log: {e}");
    GatewayError::Internal(format!(
        "{e}; the change could not be recorded ahead, so nothing was changed"
    ))
}

/// The policy's content scanner, if it scans content of operations of `class`.
fn scanner_for(pol: &Policy, class: OpClass) -> Option<&fsgate_policy::ContentScanner> {
    pol.content_scanner().filter(|s| s.applies_to(class))
}

/// Whether an entry may be seen at all (in ls, glob, tree, a change event): `list` on
/// it, files and directories alike, decided as `explain --op ls` decides it.
pub(crate) fn visible(pol: &Policy, e: &Entry) -> bool {
    pol.decide_entry(Access::Ls, &e.path, &entry_facts(e))
        .allowed()
}

/// What a listed entry tells the policy: its kind and, for a file, its size if read.
pub(crate) fn entry_facts(e: &Entry) -> PathFacts {
    match e.kind {
        FileKind::Directory => PathFacts::kind(EntryKind::Dir),
        _ => PathFacts {
            kind: EntryKind::File,
            size: e.size,
        },
    }
}

/// Maps a workspace failure to the contract's error, naming the request's path.
pub(crate) fn ws_error(e: WsError, shown: &str) -> GatewayError {
    let path = shown.to_string();
    match e {
        WsError::NotFound => GatewayError::NotFound { path },
        WsError::SymlinkEscape | WsError::Raced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_BOUNDARY.into(),
            path,
        },
        WsError::HardLink(_) | WsError::Special(_) => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_FILE_TYPE.into(),
            path,
        },
        WsError::TooLarge { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: "limits.max_read_bytes".into(),
            path,
        },
        WsError::IsDir
        | WsError::NotDir
        | WsError::NotEmpty
        | WsError::Exists
        | WsError::NotUtf8
        | WsError::CrossDirRename => GatewayError::InvalidParams(format!("{shown}: {e}")),
        WsError::OsDenied => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_OS.into(),
            path,
        },
        WsError::TooDeep { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: RULE_DEPTH.into(),
            path,
        },
        WsError::Unseen(_) | WsError::Replaced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_UNINSPECTED.into(),
            path,
        },
        WsError::DestinationExists | WsError::NoReplaceUnsupported => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_NO_REPLACE.into(),
            path,
        },
        WsError::NameTooLong => GatewayError::InvalidParams(format!("{}: {e}", clip(shown))),
        WsError::Io(io) => GatewayError::Internal(format!("{}: {io}", clip(shown))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Op, PathStyle, RequestCtx};
    use fsgate_audit::{AuditSettings, Fault, OpenOptions};

    pub(super) fn ctx() -> RequestCtx {
        RequestCtx {
            style: PathStyle::Rooted,
            session: "s".into(),
            door: &crate::door::TEST_DOOR,
            peer: "test".into(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        }
    }

    pub(super) fn gateway(ws: &std::path::Path, log_path: &std::path::Path) -> Gateway {
        let pol = Policy::builtin_default().unwrap();
        let audit = AuditLog::open(
            log_path,
            &AuditSettings::default(),
            pol.sha256(),
            OpenOptions::default(),
        )
        .unwrap();
        let store = fsgate_backup::BackupStore::open(
            &log_path.with_extension("backups"),
            &fsgate_backup::BackupSettings::default(),
        )
        .unwrap();
        Gateway::new(pol, Workspace::open(ws).unwrap())
            .with_audit(audit)
            .with_backups(store)
    }

    pub(super) fn records(log_path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(log_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &Value| r["kind"] == "request" || r["kind"] == "intent")
            .collect()
    }

    fn write(path: &str, content: &str) -> Op {
        Op::WriteText {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn a_path_or_pattern_over_path_max_is_refused_before_any_work_and_recorded_cut() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        let long = format!("/{}", "d/".repeat(PATH_MAX / 2));
        for op in [
            write(&long, "x"),
            Op::Mkdir {
                path: long.clone(),
                recursive: true,
            },
            Op::Rename {
                from: "/a".into(),
                to: long.clone(),
                replace: true,
            },
            Op::Glob {
                pattern: "*".repeat(PATH_MAX + 1),
            },
        ] {
            match gw.serve(&ctx(), Request::Op(op.clone())) {
                Err(GatewayError::InvalidParams(m)) => assert!(m.contains("PATH_MAX"), "{m}"),
                other => panic!("{op:?}: {other:?}"),
            }
        }
        assert_eq!(
            std::fs::read_dir(ws.path()).unwrap().count(),
            0,
            "nothing made"
        );
        let recs = records(&log_path);
        assert_eq!(recs.len(), 4, "one record each, no intent: {recs:#?}");
        assert_eq!(recs[0]["details"]["cut"]["/path"]["bytes"], long.len());
        assert_eq!(recs[2]["path"], "/a");
        assert!(recs[2]["details"]["cut"].get("/path2").is_some());
        assert!(recs[3]["details"]["cut"].get("/args/pattern").is_some());
        // At the limit, a path is the workspace's to judge (here: a name too long).
        let at_limit = format!("/{}", "n".repeat(PATH_MAX - 1));
        match gw.serve(&ctx(), Request::Op(write(&at_limit, "x"))) {
            Err(e) => assert!(!e.message().contains("PATH_MAX"), "{e}"),
            Ok(_) => panic!("a 4095-byte name was written"),
        }
    }

    #[test]
    fn a_path_the_log_could_not_write_whole_is_refused_before_any_work() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        // 700 bytes, 4200 once escaped: no intent could name the file exactly.
        let controls = format!("/{}", "\u{1}".repeat(700));
        match gw.serve(&ctx(), Request::Op(write(&controls, "x"))) {
            Err(GatewayError::InvalidParams(m)) => assert!(m.contains("escaped"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);
        let recs = records(&log_path);
        assert_eq!(recs.len(), 1, "no intent: {recs:#?}");
        assert!(recs[0]["details"]["cut"].get("/path").is_some());
    }

    #[test]
    fn rm_r_backs_up_only_the_inspected_files() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        std::fs::create_dir(ws.path().join("t")).unwrap();
        std::fs::write(ws.path().join("t/f"), "user").unwrap();
        std::fs::write(ws.path().join("decoy"), "decoy").unwrap();
        let t = RelPath::parse_rooted("t").unwrap();
        let entries = gw.descendants(&t, "/t").unwrap();
        // Between the inspection and the backup, another file takes the name (and the
        // inspected one comes back before the removal, which then checks out).
        std::fs::rename(ws.path().join("t/f"), ws.path().join("aside")).unwrap();
        std::fs::rename(ws.path().join("decoy"), ws.path().join("t/f")).unwrap();
        let f = entries.iter().find(|e| e.path.as_str() == "t/f").unwrap();
        let mut facts = Facts::default();
        match gw.backup_inspected(f, "/t", &mut facts) {
            Err(GatewayError::Refused { rule, .. }) => assert_eq!(rule, RULE_UNINSPECTED),
            other => panic!("the decoy was backed up in the user's file's place: {other:?}"),
        }
        assert!(facts.backups.is_empty());
    }

    fn tree(gw: &Gateway, path: &str, exclude: &[&str], max: usize) -> (Vec<String>, bool) {
        let op = Op::Tree {
            path: path.into(),
            depth: 128,
            exclude: exclude.iter().map(|p| p.to_string()).collect(),
            max_entries: max,
            cursor: None,
        };
        match gw.handle(&ctx(), op).0.unwrap() {
            Output::Entries {
                entries, truncated, ..
            } => (
                entries
                    .iter()
                    .map(|e| e.path.as_str().to_string())
                    .collect(),
                truncated,
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_tree_shows_lexical_paths_hides_secrets_and_stops_where_asked() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        for f in [
            "real/sub/a.txt",
            "real/.env",
            "real/sub/node_modules/m.js",
            "real/z",
        ] {
            let p = ws.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        std::os::unix::fs::symlink("real", ws.path().join("link")).unwrap();
        let all = ["link/sub", "link/sub/a.txt", "link/sub/node_modules"];
        let (paths, cut) = tree(&gw, "/link", &[], 100);
        assert_eq!(
            paths,
            [&all[..], &["link/sub/node_modules/m.js", "link/z"]].concat()
        );
        assert!(!cut);
        let (paths, cut) = tree(&gw, "/link", &["node_modules"], 100);
        assert_eq!(paths, [&all[..2], &["link/z"]].concat());
        assert!(!cut);
        let (paths, cut) = tree(&gw, "/link", &[], 2);
        assert_eq!(paths, all[..2]);
        assert!(cut, "more entries than asked for are said to be cut");
    }

    #[test]
    fn a_change_whose_intent_cannot_be_recorded_is_not_made() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        std::fs::write(ws.path().join("old.txt"), "old").unwrap();
        for op in [
            write("/new/dir/a.txt", "changed"),
            // Staged while its intent is written: the content never takes a name.
            write("/fresh.txt", "changed"),
            write("/old.txt", "changed"),
            Op::Mkdir {
                path: "/d".into(),
                recursive: true,
            },
            Op::Rm {
                path: "/old.txt".into(),
                recursive: false,
            },
            Op::Rename {
                from: "/old.txt".into(),
                to: "/moved.txt".into(),
                replace: true,
            },
        ] {
            // The intent is the first record the change appends: it fails.
            gw.audit().unwrap().inject_faults(Fault::Write, 1);
            let err = gw.handle(&ctx(), op.clone()).0.unwrap_err();
            assert_eq!(err.code(), fsgate_base::error::code::INTERNAL, "{op:?}");
            assert!(err.message().contains("nothing was changed"), "{err:?}");
            // A read clears the failure for the next round.
            gw.handle(
                &ctx(),
                Op::Stat {
                    path: "/".into(),
                    follow: true,
                },
            )
            .0
            .unwrap();
        }
        let mut names: Vec<_> = std::fs::read_dir(ws.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["old.txt"]);
        assert_eq!(
            std::fs::read_to_string(ws.path().join("old.txt")).unwrap(),
            "old"
        );
        assert!(records(&log_path).iter().all(|r| r["kind"] == "request"));
    }

    #[test]
    fn a_change_has_a_durable_intent_then_an_outcome_naming_it() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        std::fs::write(ws.path().join("a.txt"), "old").unwrap();
        gw.handle(&ctx(), write("/a.txt", "new")).0.unwrap();
        let recs = records(&log_path);
        assert_eq!(recs.len(), 2, "{recs:?}");
        let (intent, outcome) = (&recs[0], &recs[1]);
        assert_eq!(intent["kind"], "intent");
        assert_eq!(intent["op"], "write_text_file");
        assert_eq!(intent["path"], "a.txt");
        assert_eq!(
            intent["sha256"],
            hex::encode(fsgate_base::sha256::Sha256::digest(b"new"))
        );
        assert_eq!(
            intent["args"]["oldSha256"],
            hex::encode(fsgate_base::sha256::Sha256::digest(b"old"))
        );
        assert!(intent["backup"].is_string());
        assert_eq!(outcome["kind"], "request");
        assert_eq!(outcome["outcome"], "ok");
        assert_eq!(outcome["args"]["intent"], intent["seq"]);
        assert!(intent["args"].get("realPath").is_none(), "{intent}");
        // Through a symlinked directory: the intent says where the change really is.
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::os::unix::fs::symlink("src", ws.path().join("link")).unwrap();
        gw.handle(&ctx(), write("/link/b.txt", "b")).0.unwrap();
        let recs = records(&log_path);
        let intent = recs.iter().rev().find(|r| r["kind"] == "intent").unwrap();
        assert_eq!(intent["path"], "link/b.txt");
        assert_eq!(intent["args"]["realPath"], "src/b.txt", "{intent}");
    }

    /// A gateway on a new workspace and log, which `threads` threads have each sent
    /// `per` writes at once, the `i`th of thread `t` to `path(t, i)`.
    fn written_at_once(
        threads: usize,
        per: usize,
        path: fn(usize, usize) -> String,
    ) -> (Arc<Gateway>, std::path::PathBuf, [tempfile::TempDir; 2]) {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let log_path = state.path().join("audit.jsonl");
        let gw = Arc::new(gateway(ws.path(), &log_path));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let gw = Arc::clone(&gw);
                std::thread::spawn(move || {
                    for i in 0..per {
                        let op = write(&path(t, i), &format!("{t}/{i}"));
                        gw.handle(&ctx(), op).0.unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        (gw, log_path, [ws, state])
    }

    /// Writes at once from many threads (so that outcomes are queued while another
    /// thread leads the log, and while none does): every outcome says its entry was
    /// pending, a later record names each intent durable, and a new start finds none
    /// open.
    #[test]
    fn concurrent_writes_have_every_entry_named_durable_by_a_later_record() {
        let (gw, log_path, _dirs) =
            written_at_once(8, 25, |t, i| format!("/f{}.txt", (t * 25 + i) % 40));
        gw.audit().unwrap().close().unwrap();
        let all: Vec<Value> = std::fs::read_to_string(&log_path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let outcomes: Vec<&Value> = all
            .iter()
            .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file")
            .collect();
        assert_eq!(outcomes.len(), 200);
        for o in &outcomes {
            assert_eq!(o["details"][fsgate_audit::ENTRY_PENDING], true, "{o}");
            let (intent, seq) = (&o["args"]["intent"], o["seq"].as_u64().unwrap());
            let named = all.iter().any(|r| {
                r["seq"].as_u64().unwrap() > seq
                    && r["details"][fsgate_audit::ENTRIES_DURABLE]
                        .as_array()
                        .is_some_and(|a| a.contains(intent))
            });
            assert!(named, "no later record names intent {intent} durable");
        }
        drop(gw);
        let again = AuditLog::open(
            &log_path,
            &AuditSettings::default(),
            "0",
            OpenOptions::default(),
        )
        .unwrap();
        assert!(
            again.open_intents().is_empty(),
            "{:?}",
            again.open_intents()
        );
    }

    /// Writes of one path from many threads follow each other whole: each write's
    /// intent comes after the outcome of the write before it (the path stays held until
    /// that write's new name is durable, after its outcome is queued).
    #[test]
    fn writes_of_one_path_are_announced_only_after_the_previous_one_is_recorded() {
        let (_gw, log_path, _dirs) = written_at_once(4, 20, |_, _| "/one.txt".into());
        let recs = records(&log_path);
        let outcome_of = |intent: &Value| {
            recs.iter()
                .find(|r| r["kind"] == "request" && r["args"]["intent"] == intent["seq"])
                .and_then(|r| r["seq"].as_u64())
                .unwrap()
        };
        let intents: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "intent").collect();
        assert_eq!(intents.len(), 80);
        for pair in intents.windows(2) {
            let next = pair[1]["seq"].as_u64().unwrap();
            assert!(
                outcome_of(pair[0]) < next,
                "intent {next} was announced before the outcome of intent {}",
                pair[0]["seq"]
            );
        }
    }

    #[test]
    fn a_change_whose_outcome_cannot_be_recorded_says_it_was_made() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log_path);
        // The intent is written; the outcome's write fails.
        gw.audit().unwrap().inject_faults_after(Fault::Write, 1, 1);
        let err = gw.handle(&ctx(), write("/a.txt", "changed")).0.unwrap_err();
        assert_eq!(err.code(), fsgate_base::error::code::INTERNAL);
        assert!(err.message().contains("the change was made"), "{err:?}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
            "changed"
        );
        let recs = records(&log_path);
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert_eq!(recs[0]["kind"], "intent");
    }
}
