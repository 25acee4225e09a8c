//! Start-up: load the policy, open every handle (workspace, audit log, backups), confine
//! the process with Landlock, and only then let threads start.
//!
//! # Ambient Authority
//! This is the only code that opens paths from the command line or the policy; after
//! [`confine`] the process reaches the filesystem only through the handles opened here.
//!
//! # Layout
//! Here: what is opened ([`Opened`]), confined and closed. In `startup/`: the command
//! line's gateway ([`config`]), fsgate's own files and the audit log opened
//! (`own_files`), the other workspaces served (`members`, `several`), the sandbox's
//! grants beside the handles (`sandbox`), what start-up records (`records`), `[vcs]`.

pub mod config;
mod members;
mod own_files;
mod records;
mod sandbox;
pub mod several;
mod vcs;

use vcs::{VcsGrants, add_vcs_grants, open_vcs};

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use config::GatewayConfig;
use fsgate_backup::{BackupStore, workspace_state_dir};
use fsgate_base::text::EscPath;
use fsgate_decide::OpClass;
use fsgate_decide::floor::FixedFloor;
use fsgate_gateway::{Gateway, Parts};
use fsgate_sandbox::{SandboxPlan, SandboxStatus, restrict_self};
use fsgate_workspace::Workspace;
use members::{Members, scoped_policy};
use own_files::{audit_open_options, open_audit, own_files, sink_parent};
use records::{show_locations, start_details};
use sandbox::{set_kernel_allows_write, ship_grants};

pub use several::WorkspaceArg;

/// A gateway with its handles open, not yet confined.
pub struct Opened {
    /// The gateway.
    pub gateway: Gateway,
    /// The audit log's directory, kept open so Landlock can be bound to it.
    audit_dir: std::fs::File,
    /// The policy file's path (read again on SIGHUP).
    policy_path: Option<PathBuf>,
    /// The signing key / checkpoint sink live elsewhere; their parents are kept here.
    extra_rw: Vec<std::fs::File>,
    /// Paths the confined process may still read (`fsgate run`: `/proc`, to name the
    /// process behind each request).
    extra_ro: Vec<PathBuf>,
    /// The audit and backup directories, for the agent's sandbox to keep clear of.
    own_dirs: Vec<PathBuf>,
    /// The active audit log file and the backup store, absolute (told to the user).
    locations: (PathBuf, PathBuf),
    /// Another gateway held the default log: this one keeps a sibling chain.
    sibling_chain: bool,
    /// `[vcs] stage`: git dirs outside the workspace (kept open for a read-write rule)
    /// and ignore files above it (read-only rules).
    vcs_grants: VcsGrants,
    /// `[audit] ship`: the collectors, prepared (TLS files read, names resolved).
    ship: Option<fsgate_audit::ship::ShipPlan>,
}

impl Opened {
    /// fsgate's own directories (audit log, backups).
    pub fn own_dirs(&self) -> Vec<PathBuf> {
        self.own_dirs.clone()
    }

    /// Tells the user (stderr, one line each) where the audit log and backups are.
    pub fn announce_locations(&self) {
        let (log, backups) = &self.locations;
        use std::io::Write;
        // EscPath escapes the paths; the rest is fsgate's own text. A closed stderr is
        // no reason to stop (eprintln! would panic).
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "fsgate: audit log: {}", EscPath(log));
        let _ = writeln!(err, "fsgate: backups: {}", EscPath(backups));
        if self.sibling_chain {
            let _ = writeln!(
                err,
                "fsgate: another gateway is serving this workspace with audit.jsonl; this \
                 one keeps a chain of its own beside it (`fsgate audit verify --workspace` \
                 reads them all)"
            );
        }
    }

    /// The git dirs outside the workspace the gateway may write to stage changes.
    pub fn vcs_write_dirs(&self) -> Vec<PathBuf> {
        self.vcs_grants.0.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Lets the confined process still read `path` (and all beneath it).
    pub fn keep_readable(&mut self, path: &Path) {
        self.extra_ro.push(path.to_path_buf());
    }

    /// The active audit log file, absolute.
    pub fn audit_log_path(&self) -> &Path {
        &self.locations.0
    }

    /// Keeps a directory fsgate created (the agent's scratch dir) writable after
    /// confinement, so it can be cleaned up.
    pub fn keep_scratch(&mut self, dir: &Path) {
        match std::fs::File::open(dir) {
            Ok(f) => self.extra_rw.push(f),
            Err(e) => tracing::warn!("cannot keep {} open: {e}", dir.display()),
        }
    }
}

/// Loads the policy and opens the workspace, the audit log and the backup store.
pub fn open(cfg: &GatewayConfig) -> Result<Opened, String> {
    let (mut policy, base_policy) = scoped_policy(cfg)?;
    let workspace = Workspace::open(&cfg.workspace)
        .map_err(|e| format!("cannot open workspace {}: {e}", cfg.workspace.display()))?;
    let root = workspace.root_path().to_path_buf();
    let state = || {
        workspace_state_dir(&root).map_err(|e| {
            format!("{e}; pass --audit-log and --backup-dir to choose where the audit log and backups go")
        })
    };
    // Relative paths in the policy's [audit] section are relative to the policy file.
    let audit_settings = policy.settings().audit.clone();
    let opts = audit_open_options(cfg);
    let ship = fsgate_audit::ship::ShipPlan::prepare(&audit_settings.ship)
        .map_err(|e| format!("invalid policy: {e}"))?;
    let (audit_path, audit_parent, audit) = open_audit(cfg, &audit_settings, &policy, opts, state)?;
    // From here the log holds its `start`: a failure closes it with a `stop` saying why.
    let view = audit.tap().log();
    let rest = || -> Result<Opened, String> {
        let backup_settings = policy.settings().backup.clone();
        let backup_root = cfg.backup_dir.clone().or(backup_settings.dir.clone());
        // Several workspaces keep their backups apart: DIR/<name> each.
        let backup_dir = match (&backup_root, cfg.several.first()) {
            (Some(d), Some(first)) => d.join(&first.name),
            (Some(d), None) => d.clone(),
            (None, _) => state()?.join("backups"),
        };
        let backups =
            BackupStore::open(&backup_dir, &backup_settings).map_err(|e| e.to_string())?;
        let audit_dir = std::fs::File::open(&audit_parent).map_err(|e| {
            format!(
                "cannot open audit directory {}: {e}",
                audit_parent.display()
            )
        })?;
        let own = own_files(
            cfg,
            &policy,
            (&audit_path, &audit_parent),
            backup_root.clone().unwrap_or(backup_dir.clone()),
        );
        policy.set_floor(FixedFloor::from_entries(
            fsgate_decide::floor::entries_inside(&root, own.clone()),
        ));
        let extra_rw = sink_parent(&audit_settings);
        let stager = open_vcs(&policy, &root, &[])?;
        let mut vcs_grants = (Vec::new(), Vec::new());
        if let Some(s) = &stager {
            add_vcs_grants(&mut vcs_grants, s, &root)?;
        }
        let mut gateway = Gateway::new(policy, workspace).with_parts(Parts {
            audit: Some(audit),
            backups: Some(backups),
            vcs: stager,
        });
        let mut own_dirs = vec![audit_parent, backup_dir.clone()];
        let members = Members {
            base_policy: &base_policy,
            own: &own,
            backups: (&backup_settings, backup_root.as_deref()),
        };
        gateway = members.add_to(gateway, cfg, (&mut own_dirs, &mut vcs_grants))?;
        let locations = show_locations(&mut gateway, cfg, &audit_path, (backup_root, backup_dir));
        Ok(Opened {
            gateway,
            audit_dir,
            policy_path: cfg.policy.clone(),
            extra_rw,
            extra_ro: Vec::new(),
            own_dirs,
            locations,
            vcs_grants,
            ship,
            sibling_chain: cfg.audit_log.is_none()
                && audit_settings.path.is_none()
                && audit_path.file_name() != Some(std::ffi::OsStr::new("audit.jsonl")),
        })
    };
    rest().inspect_err(|e| {
        if let Some(log) = &view {
            close_early(log, e);
        }
    })
}

/// Closes `log` with a `stop` saying `start failed` and `error`, so that a reviewer
/// reads a start that failed, not a crash.
fn close_early(log: &fsgate_audit::AuditLog, error: &str) {
    let mut details = Map::new();
    details.insert("reason".into(), "start failed".into());
    details.insert("error".into(), error.into());
    if let Err(e) = log.close_with(details) {
        tracing::error!("audit log: closing: {e}");
    }
}

/// Confines the process (Landlock), applies `[sandbox] require_landlock`, starts the
/// audit log's heartbeat, and records the start. Call on the main thread, before any
/// other thread exists; `listen_port` is the WebSocket port, if any.
pub fn confine(
    opened: &Opened,
    listen_port: Option<u16>,
    transport: &str,
) -> Result<SandboxStatus, String> {
    // `fsgate acp` must still signal the agent it started (to end it); other modes
    // never signal anything outside their sandbox.
    let hosts_agent = transport == "acp-proxy" || transport == "run";
    let gw = &opened.gateway;
    let pol = gw.policy();
    let workspace_write = pol.can_ever(OpClass::Write) || pol.can_ever(OpClass::Delete);
    let plan = sandbox_plan(opened, workspace_write, listen_port, hosts_agent);
    let status = match restrict_self(&plan) {
        Ok(s) => s,
        Err(e) => SandboxStatus::not_enforced(&e.to_string(), workspace_write),
    };
    pol.settings()
        .sandbox
        .check(&status)
        .map_err(|e| e.to_string())?;
    set_kernel_allows_write(gw, &status);
    gw.set_meta(
        "sandbox",
        serde_json::to_value(&status).unwrap_or(Value::Null),
    );
    // Queued before anything else is recorded, and written and synced (with the log's
    // own `start` record before it) by the log's first thread while start-up goes on:
    // every later record, and so every answer that waits for its record, waits behind it.
    gw.record(
        fsgate_gateway::Lifecycle::start(),
        start_details(gw, &pol, transport, &status),
    );
    if let (Some(a), Some(ship)) = (gw.audit(), &opened.ship)
        && let Err(e) = ship.start(a, &opened.audit_dir)
    {
        tracing::error!("{e}");
    }
    // Changes a crash interrupted are settled before anything is served. Retention
    // runs beside the serving: `Gateway::prune_backups_in_background`.
    gw.reconcile()?;
    Ok(status)
}

/// The process's Landlock ruleset: the workspaces (writable when their policy can ever
/// write), fsgate's own directories, the policy file, the git dirs `[vcs] stage` needs,
/// the listening port, what shipping needs, and the signals it may send.
fn sandbox_plan(
    opened: &Opened,
    workspace_write: bool,
    listen_port: Option<u16>,
    hosts_agent: bool,
) -> SandboxPlan<'_> {
    let gw = &opened.gateway;
    let mut plan = SandboxPlan::new(gw.workspace().root_dir(), workspace_write)
        .read_write_dir("audit dir", &opened.audit_dir);
    if let Some(b) = gw.backups() {
        plan = plan.read_write_dir("backup dir", b.dir());
    }
    // Several workspaces: each its own rule (its policy decides whether writable), and
    // its backups; nothing between or above them.
    for m in gw.members().skip(1) {
        let p = m.policy();
        let write = p.can_ever(OpClass::Write) || p.can_ever(OpClass::Delete);
        plan = plan.workspace(m.workspace().root_dir(), write);
        if let Some(b) = m.backups() {
            plan = plan.read_write_dir("backup dir", b.dir());
        }
    }
    for f in &opened.extra_rw {
        plan = plan.read_write_dir("extra dir", f);
    }
    if let Some(p) = &opened.policy_path {
        plan = plan.read_only_path(p.clone());
    }
    for p in &opened.extra_ro {
        plan = plan.read_only_path(p.clone());
    }
    // `[vcs] stage`: the git dirs outside the workspace, and only they, writable.
    for (_, f) in &opened.vcs_grants.0 {
        plan = plan.read_write_dir("git dir", f);
    }
    for p in &opened.vcs_grants.1 {
        plan = plan.read_only_path(p.clone());
    }
    if let Some(port) = listen_port {
        plan = plan.listen_port(port);
    }
    plan = ship_grants(plan, opened.ship.as_ref());
    plan.scope_signals(!hosts_agent)
}

/// Closes the log of a gateway that ends before it served: its `stop` says `start
/// failed` and the error, so a reviewer reads a start that failed, not a crash.
pub fn stop_early(gw: &Gateway, error: &str) {
    gw.finish_background_prune();
    if let Some(log) = gw.audit() {
        close_early(log, error);
    }
}

/// Closes the audit log: its `stop` record and final checkpoint. `details` about why
/// the gateway stops are logged.
pub fn shutdown(gw: &Gateway, details: Map<String, Value>) {
    let shown = Value::Object(details.clone());
    tracing::info!(details = %shown, "stopping");
    // What the start-up's retention pass removed is recorded before the `stop`.
    gw.finish_background_prune();
    if let Some(a) = gw.audit()
        && let Err(e) = a.close_with(details)
    {
        tracing::error!("audit log: closing: {e}");
    }
}
