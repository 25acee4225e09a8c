//! The gateway: one value owning the policy, the workspace, the backups and the audit
//! log of one workspace (and, with several, the others it routes to).

use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::ask::Grants;
use crate::budget::Budget;
use crate::names::SessionNames;
use crate::notes::ChangeWatch;
use crate::ops::Op;
use crate::ops::open_cache::CleanOpens;
use crate::path_lock::PathLocks;
use crate::vcs::Stager;
use fsgate_audit::AuditLog;
use fsgate_backup::BackupStore;
use fsgate_policy::Policy;
use fsgate_workspace::Workspace;

/// The gateway.
pub struct Gateway {
    /// The policy in force; replaced whole on reload.
    pub(crate) policy: RwLock<Arc<Policy>>,
    /// The workspace root handle.
    pub(crate) workspace: Workspace,
    /// Extra facts for `initialize`'s `_meta.fsgate` (sandbox status...).
    pub(crate) meta: RwLock<serde_json::Map<String, Value>>,
    /// Whether the kernel sandbox lets this process write the workspace: a reloaded
    /// policy may not need more than what was granted at start.
    pub(crate) kernel_allows_write: RwLock<bool>,
    /// The audit log: one record per request, durable before the reply (None in unit
    /// tests and offline tools only).
    pub(crate) audit: Option<AuditLog>,
    /// Where previous versions go before a change (None only where nothing changes).
    pub(crate) backups: Option<BackupStore>,
    /// File content held by requests in flight, across every door (see `budget.rs`).
    pub(crate) budget: Arc<Budget>,
    /// Backups saved since start: each save prunes its own file's versions, and the pass
    /// over the whole store runs at most every [`PRUNE_EVERY`](crate::rules::PRUNE_EVERY) saves (see
    /// `BackupStore::sweep_due`), so a long-running gateway keeps to the policy's limits.
    pub(crate) saves: std::sync::atomic::AtomicU64,
    /// The start-up's retention pass, running on a thread of its own (see
    /// `prune_backups_in_background`).
    pub(crate) start_pass: std::sync::Mutex<Option<StartPass>>,
    /// "Allow for this session" answers to `ask` rules.
    pub(crate) grants: Arc<Grants>,
    /// The git work tree changes are staged in (`[vcs] stage`), found at start.
    pub(crate) vcs: Option<Arc<Stager>>,
    /// Paths being written now: writes of one path run one after the other.
    pub(crate) writing: Arc<PathLocks>,
    /// Provisional session names a door serves under until it knows the real one.
    pub(crate) names: SessionNames,
    /// This workspace's name when several are served (records say it in
    /// `args.workspace`); None with one workspace.
    pub(crate) name: Option<Arc<str>>,
    /// The other workspaces, each a gateway of its own, that this one routes to (see
    /// `route.rs`); empty with one workspace.
    pub(crate) others: Vec<Arc<Gateway>>,
    /// Files the filesystem view opened whose content was found clean, by version (see
    /// `ops/open.rs`).
    pub(crate) clean_opens: CleanOpens,
    /// Told of every change, whichever door asked (see `ChangeWatch`).
    pub(crate) change_watch: std::sync::OnceLock<Arc<dyn ChangeWatch>>,
}

/// The start-up's retention pass: its thread, and the flag that cuts it short
/// (`Gateway::finish_background_prune`).
pub(crate) struct StartPass {
    pub(crate) thread: std::thread::JoinHandle<()>,
    pub(crate) stop: Arc<std::sync::atomic::AtomicBool>,
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

impl Gateway {
    /// A gateway over an opened workspace with a loaded policy.
    pub fn new(policy: Policy, workspace: Workspace) -> Gateway {
        let budget = Budget::new(policy.limits().max_message_bytes.saturating_mul(2));
        Gateway {
            budget,
            policy: RwLock::new(Arc::new(policy)),
            workspace,
            meta: RwLock::new(serde_json::Map::new()),
            kernel_allows_write: RwLock::new(true),
            audit: None,
            backups: None,
            saves: std::sync::atomic::AtomicU64::new(0),
            start_pass: std::sync::Mutex::new(None),
            grants: Arc::default(),
            vcs: None,
            writing: Arc::default(),
            names: SessionNames::default(),
            name: None,
            others: Vec::new(),
            clean_opens: CleanOpens::default(),
            change_watch: std::sync::OnceLock::new(),
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
}
