//! Start-up: load the policy, open every handle (workspace, audit log, backups), confine
//! the process with Landlock, and only then let threads start.
//!
//! # Ambient Authority
//! This is the only code that opens paths from the command line or the policy; after
//! [`confine`] the process reaches the filesystem only through the handles opened here.

pub mod several;
mod vcs;

use vcs::{VcsGrants, add_vcs_grants, open_vcs};

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use fsgate_audit::{AuditLog, OpenOptions};
use fsgate_backup::{BackupStore, workspace_state_dir};
use fsgate_base::text::EscPath;
use fsgate_decide::OpClass;
use fsgate_decide::floor::{FixedFloor, FloorKind};
use fsgate_gateway::{Gateway, Parts};
use fsgate_policy::Policy;
use fsgate_policy::floor;
use fsgate_sandbox::{Enforcement, SandboxPlan, SandboxStatus, restrict_self};
use fsgate_workspace::Workspace;

pub use several::WorkspaceArg;

/// What the command line says about the gateway to build.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Workspace directory (with several, the first usable one).
    pub workspace: PathBuf,
    /// Several workspaces (`--workspace` repeated), the usable ones with their names,
    /// `workspace` first; empty when one was given.
    pub several: Vec<several::NamedRoot>,
    /// Policy file; None = built-in default.
    pub policy: Option<PathBuf>,
    /// Active audit log file.
    pub audit_log: Option<PathBuf>,
    /// Backup directory.
    pub backup_dir: Option<PathBuf>,
    /// Start even if the existing audit chain does not verify (recording the break).
    pub accept_broken_chain: bool,
}

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

/// Loads the policy named on the command line, or the built-in default.
pub fn load_policy(path: Option<&Path>) -> Result<Policy, String> {
    match path {
        Some(p) => Policy::load(p).map_err(|e| format!("invalid policy: {e}")),
        None => Policy::builtin_default().map_err(|e| format!("built-in policy: {e}")),
    }
}

/// How `fsgate` opens its audit log: the `start` checkpoint and the `start` record's
/// sync are both left to `confine` (the checkpoint on a thread of its own, the record
/// made durable with the gateway's own `start`: one sync instead of two).
fn audit_open_options(cfg: &GatewayConfig) -> OpenOptions {
    OpenOptions {
        allow_broken_chain: cfg.accept_broken_chain,
        defer_start_checkpoint: true,
        defer_start_sync: true,
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
    let backup_settings = policy.settings().backup.clone();
    let backup_root = cfg.backup_dir.clone().or(backup_settings.dir.clone());
    // Several workspaces keep their backups apart: DIR/<name> each.
    let backup_dir = match (&backup_root, cfg.several.first()) {
        (Some(d), Some(first)) => d.join(&first.name),
        (Some(d), None) => d.clone(),
        (None, _) => state()?.join("backups"),
    };
    let backups = BackupStore::open(&backup_dir, &backup_settings).map_err(|e| e.to_string())?;
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
}

/// The policy, scoped to the first workspace when several are served, and the policy
/// as loaded (each other workspace scopes its own).
fn scoped_policy(cfg: &GatewayConfig) -> Result<(Policy, Policy), String> {
    let mut policy = load_policy(cfg.policy.as_deref())?;
    let base_policy = policy.clone();
    if let Some(first) = cfg.several.first() {
        several::warn_unserved_scopes(&policy, &cfg.several);
        policy = policy.for_workspace(&first.name);
    } else if !policy.scoped_workspaces().is_empty() {
        tracing::warn!(
            "the policy has rules scoped to workspaces by name; with one --workspace they apply nowhere"
        );
    }
    Ok((policy, base_policy))
}

/// fsgate's own files, beneath no policy's reach (the fixed floor): the audit log
/// and its sidecars, the backups, the policy file and the gitleaks configs it names.
/// The shipping cursor (`.NAME.ship`) too: an agent that moved it ahead would keep
/// records from the collectors.
fn own_files(
    cfg: &GatewayConfig,
    policy: &Policy,
    (audit_path, audit_parent): (&Path, &Path),
    backups: PathBuf,
) -> Vec<(FloorKind, PathBuf)> {
    let audit_settings = &policy.settings().audit;
    let cursor =
        fsgate_audit::ship::cursor::cursor_name(&fsgate_audit::series::file_name(audit_path));
    let mut own: Vec<(FloorKind, PathBuf)> = vec![
        (FloorKind::AuditLog, audit_path.to_path_buf()),
        (FloorKind::AuditLog, audit_parent.join(cursor)),
        (FloorKind::BackupDir, backups),
    ];
    if let Some(k) = &audit_settings.signing_key {
        own.push((FloorKind::SigningKey, k.clone()));
    }
    for k in audit_settings.ship.iter().filter_map(|d| d.tls_key.clone()) {
        own.push((FloorKind::ShipKey, k));
    }
    if let Some(sink) = audit_settings.checkpoint_sink.as_deref()
        && !sink.starts_with("syslog")
    {
        own.push((FloorKind::CheckpointSink, PathBuf::from(sink)));
    }
    if let Some(p) = &cfg.policy {
        own.push((FloorKind::PolicyFile, p.clone()));
    }
    own.extend(floor::gitleaks_configs(policy));
    own
}

/// The checkpoint sink's directory, kept open for a read-write rule when the sink is a
/// file.
fn sink_parent(audit_settings: &fsgate_audit::AuditSettings) -> Vec<std::fs::File> {
    let mut extra_rw = Vec::new();
    if let Some(sink) = audit_settings.checkpoint_sink.as_deref()
        && sink != "syslog"
        && !sink.starts_with("syslog:")
        && let Some(parent) = Path::new(sink).parent()
        && let Ok(f) = std::fs::File::open(parent)
    {
        extra_rw.push(f);
    }
    extra_rw
}

/// What the other workspaces served share with the first: the policy as loaded, the
/// fixed floor's files, the backup settings and root.
struct Members<'a> {
    base_policy: &'a Policy,
    own: &'a [(FloorKind, PathBuf)],
    backups: (&'a fsgate_backup::BackupSettings, Option<&'a Path>),
}

impl Members<'_> {
    /// The gateway serving every other workspace too (unchanged with one); their
    /// backup directories are added to `own_dirs`, what staging in their git
    /// repositories needs to `grants`.
    fn add_to(
        self,
        gateway: Gateway,
        cfg: &GatewayConfig,
        (own_dirs, grants): (&mut Vec<PathBuf>, &mut VcsGrants),
    ) -> Result<Gateway, String> {
        let Some((first, rest)) = cfg.several.split_first() else {
            return Ok(gateway);
        };
        let members = several::open_members(
            rest,
            self.base_policy,
            self.own,
            self.backups,
            (&gateway, grants),
        )?;
        own_dirs.extend(
            members
                .iter()
                .filter_map(|(_, g)| Some(g.backups()?.location().to_path_buf())),
        );
        Ok(gateway.with_members(&first.name, members))
    }
}

/// The audit log and backup store, absolute (a client's working directory may differ),
/// set in the gateway's meta; with several workspaces, the store holding one directory
/// per workspace.
fn show_locations(
    gateway: &mut Gateway,
    cfg: &GatewayConfig,
    audit_path: &Path,
    (backup_root, backup_dir): (Option<PathBuf>, PathBuf),
) -> (PathBuf, PathBuf) {
    let shown_backups = match (backup_root, cfg.several.is_empty()) {
        (Some(root), false) => root,
        _ => backup_dir,
    };
    let locations = (absolute(audit_path), absolute(&shown_backups));
    gateway.set_meta(
        "auditLog",
        locations.0.to_string_lossy().into_owned().into(),
    );
    gateway.set_meta(
        "backupDir",
        locations.1.to_string_lossy().into_owned().into(),
    );
    locations
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
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
    // Changes a crash interrupted are settled before anything is served.
    gw.reconcile()?;
    gw.prune_backups();
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

/// Tells each workspace whether the kernel lets it write: always when nothing is
/// enforced, else as its rule says.
fn set_kernel_allows_write(gw: &Gateway, status: &SandboxStatus) {
    let unenforced = status.enforcement == Enforcement::Not;
    gw.set_kernel_allows_write(unenforced || status.workspace_write);
    for m in gw.members().skip(1) {
        let p = m.policy();
        m.set_kernel_allows_write(
            unenforced || p.can_ever(OpClass::Write) || p.can_ever(OpClass::Delete),
        );
    }
}

/// The `start` record's details: version, transport, pid, workspaces, the policy in
/// force when confined, sandbox.
fn start_details(
    gw: &Gateway,
    pol: &Policy,
    transport: &str,
    status: &SandboxStatus,
) -> Map<String, Value> {
    let mut start = Map::new();
    start.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    start.insert("transport".into(), transport.into());
    start.insert("pid".into(), std::process::id().into());
    start.insert(
        "workspace".into(),
        gw.workspace()
            .root_path()
            .to_string_lossy()
            .into_owned()
            .into(),
    );
    if gw.is_several() {
        start.insert("workspaces".into(), gw.members().json());
    }
    start.insert(
        "policy".into(),
        json!({"origin": pol.origin(), "sha256": pol.sha256()}),
    );
    start.insert(
        "sandbox".into(),
        serde_json::to_value(status).unwrap_or(Value::Null),
    );
    start
}

/// What shipping to `[audit] ship` needs from the sandbox: connecting to the collectors'
/// ports and local sockets, and reading the resolver's files to resolve their names
/// again after a change.
fn ship_grants<'a>(
    mut plan: fsgate_sandbox::SandboxPlan<'a>,
    ship: Option<&fsgate_audit::ship::ShipPlan>,
) -> fsgate_sandbox::SandboxPlan<'a> {
    let Some(ship) = ship else {
        return plan;
    };
    for port in ship.tcp_ports() {
        plan = plan.connect_port(port);
    }
    for sock in ship.sockets() {
        // `/dev/log` is often a link to the daemon's socket in another directory.
        let real = std::fs::canonicalize(&sock).unwrap_or(sock);
        if let Some(dir) = real.parent() {
            plan = plan.unix_sockets_in(dir);
        }
    }
    if ship.resolves_names() {
        for f in RESOLVER_FILES {
            plan = plan.read_only_path(*f);
        }
    }
    plan
}

/// What the C library reads to resolve a host name.
const RESOLVER_FILES: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];

/// Closes the audit log: its `stop` record and final checkpoint. `details` about why
/// the gateway stops are logged.
pub fn shutdown(gw: &Gateway, details: Map<String, Value>) {
    let shown = Value::Object(details.clone());
    tracing::info!(details = %shown, "stopping");
    if let Some(a) = gw.audit()
        && let Err(e) = a.close_with(details)
    {
        tracing::error!("audit log: closing: {e}");
    }
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Opens the log the operator named (refused if another process holds it), or else the
/// first free chain of the workspace's default log directory: a second gateway on the
/// same workspace gets `audit-2.jsonl` beside `audit.jsonl` (audit/FORMAT.md).
fn open_audit(
    cfg: &GatewayConfig,
    settings: &fsgate_audit::AuditSettings,
    policy: &Policy,
    opts: OpenOptions,
    state: impl Fn() -> Result<PathBuf, String>,
) -> Result<(PathBuf, PathBuf, AuditLog), String> {
    let named = cfg.audit_log.as_ref().or(settings.path.as_ref());
    let parent = match named {
        Some(p) => p
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        None => state()?.join("audit"),
    };
    create_private_dir(&parent)?;
    let opened = match named {
        Some(p) => AuditLog::open(p, settings, policy.sha256(), opts).map(|l| (p.clone(), l)),
        None => fsgate_audit::open_first_free(&parent, settings, policy.sha256(), opts),
    };
    let (path, log) = opened.map_err(|e| e.to_string())?;
    Ok((path, parent, log))
}
