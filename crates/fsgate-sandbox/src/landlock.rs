//! Linux: builds and applies the Landlock rulesets of [`SandboxPlan`] and [`AgentPlan`].

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::Command;

use ::landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, NetPort, PathBeneath, PathFd,
    RestrictSelf, RestrictSelfAttr, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

pub(crate) use super::child::harden_gateway;
use super::child::{self, ChildSetup, UnixFilter};
use super::describe::{AgentView, env_line, grant_line, network_line};
use super::plan::{AgentAccess, AgentNetwork, AgentPlan, SandboxPlan};
use super::status::{Enforcement, SandboxStatus};
use crate::error::SandboxError;

/// The ABI from which every restriction the plan asks for exists: truncate (3), TCP (4),
/// device ioctl (5), abstract-socket and signal scoping (6).
const FULL_ABI: ABI = ABI::V6;

/// The access rights used for one kernel ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rights {
    /// Every filesystem right the kernel knows: anything not granted below is refused.
    pub handled_fs: BitFlags<AccessFs>,
    /// TCP rights handled (empty before ABI 4).
    pub handled_net: BitFlags<AccessNet>,
    /// IPC scopes (empty before ABI 6).
    pub scopes: BitFlags<Scope>,
    /// Read a file, list a directory. Not `AccessFs::from_read`, which adds Execute.
    pub read: BitFlags<AccessFs>,
    /// What a writable directory tree needs on top of `read`: write, create regular
    /// files and directories, remove, truncate, cross-directory rename. Never devices,
    /// sockets, fifos or symlinks, never execute or device ioctl.
    pub write: BitFlags<AccessFs>,
}

impl Rights {
    /// The rights for `abi`, each masked to what that ABI can handle.
    pub(crate) fn for_abi(abi: ABI) -> Self {
        let handled_fs = AccessFs::from_all(abi);
        let write = AccessFs::WriteFile
            | AccessFs::RemoveFile
            | AccessFs::RemoveDir
            | AccessFs::MakeReg
            | AccessFs::MakeDir
            | AccessFs::Refer
            | AccessFs::Truncate;
        Rights {
            handled_fs,
            handled_net: AccessNet::from_all(abi),
            scopes: Scope::from_all(abi),
            read: (AccessFs::ReadFile | AccessFs::ReadDir) & handled_fs,
            write: write & handled_fs,
        }
    }

    /// Rights for a read-only grant on a file (`ReadDir` is invalid on non-directories).
    fn read_file(&self) -> BitFlags<AccessFs> {
        self.read & AccessFs::ReadFile
    }
}

/// Landlock's view of this kernel, without restricting anything.
pub(crate) fn probe() -> LandlockStatus {
    // No flags and no no_new_privs: `apply` returns the status without a syscall that
    // changes anything.
    match RestrictSelf::default().no_new_privs(false).apply() {
        Ok(s) => s.landlock,
        Err(_) => LandlockStatus::NotImplemented,
    }
}

/// The ABI to use, None without Landlock.
pub(crate) fn usable_abi(status: LandlockStatus) -> Option<ABI> {
    match status {
        LandlockStatus::Available { effective_abi, .. } if effective_abi != ABI::Unsupported => {
            Some(effective_abi)
        }
        _ => None,
    }
}

/// Why this kernel offers no Landlock; None if it does.
pub(crate) fn landlock_missing() -> Option<&'static str> {
    let status = probe();
    usable_abi(status).is_none().then(|| absent_reason(status))
}

#[cfg(test)]
pub(crate) fn kernel_abi() -> Option<u8> {
    usable_abi(probe()).map(|a| a as u8)
}

/// Why there is no Landlock, in words.
fn absent_reason(status: LandlockStatus) -> &'static str {
    match status {
        LandlockStatus::NotEnabled => {
            "Landlock is built into this kernel but disabled: add landlock to the lsm= boot parameter"
        }
        _ => {
            "this kernel has no Landlock: it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK"
        }
    }
}

fn ll_err(stage: impl Into<String>) -> impl FnOnce(::landlock::RulesetError) -> SandboxError {
    let stage = stage.into();
    move |e| SandboxError::Landlock {
        stage,
        source: Box::new(e),
    }
}

#[cfg(test)]
pub(crate) fn is_exdev(err: &io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error())
}

/// Planned restrictions an `abi` kernel cannot express.
pub(crate) fn missing_for(abi: ABI) -> Vec<String> {
    let mut missing = Vec::new();
    if abi < ABI::V3 {
        missing.push("truncating files is not restricted (needs ABI 3, Linux 6.2)".to_owned());
    }
    if abi < ABI::V4 {
        missing.push("TCP bind/connect are not restricted (needs ABI 4, Linux 6.7)".to_owned());
    }
    if abi < ABI::V5 {
        missing
            .push("ioctl on device files is not restricted (needs ABI 5, Linux 6.10)".to_owned());
    }
    if abi < ABI::V6 {
        missing.push(
            "abstract Unix sockets and signals are not scoped (needs ABI 6, Linux 6.12)".to_owned(),
        );
    }
    missing
}

/// Number of threads in this process, from `/proc/self/task` (None if unreadable).
fn thread_count() -> Option<usize> {
    std::fs::read_dir("/proc/self/task").ok().map(|d| d.count())
}

fn is_dir(fd: BorrowedFd<'_>) -> Result<bool, SandboxError> {
    rustix::fs::fstat(fd)
        .map(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        })
        .map_err(|e| SandboxError::Io {
            what: "stat a granted handle".into(),
            source: e.into(),
        })
}

pub(crate) fn restrict_self(plan: &SandboxPlan<'_>) -> Result<SandboxStatus, SandboxError> {
    let landlock = probe();
    let Some(abi) = usable_abi(landlock) else {
        let reason = absent_reason(landlock);
        // Still forbid gaining privileges through set-uid executables.
        let nnp = RestrictSelf::default()
            .apply()
            .map(|s| s.no_new_privs)
            .unwrap_or(false);
        let mut status = SandboxStatus::not_enforced(reason, plan.workspace_write);
        status.no_new_privs = nnp;
        return Ok(status);
    };
    let rights = Rights::for_abi(abi);
    let threads = thread_count();
    let mut detail = Vec::new();
    let mut missing = missing_for(abi);
    let mut scopes = rights.scopes;
    if !plan.scope_signals {
        scopes &= !Scope::Signal;
    }
    let mut created = create_ruleset(rights, scopes)?;
    created = add_workspace_rules(created, plan, rights, &mut detail)?;
    created = add_grant_rules(created, plan, rights, &mut detail)?;
    created = add_unix_socket_rules(created, plan, rights, &mut detail)?;
    if !rights.handled_net.is_empty() {
        created = add_tcp_rules(created, plan, &mut detail)?;
    }
    if !scopes.is_empty() {
        detail.push(scope_line(scopes));
    }
    created = cover_threads(created, abi, threads, &mut missing)?;
    let status = created
        .restrict_self()
        .map_err(ll_err("restrict the process"))?;
    Ok(summarise(
        abi,
        &status,
        missing,
        detail,
        plan.workspace_write,
    ))
}

/// The ruleset handling every filesystem right of the ABI, its TCP rights and the IPC
/// `scopes`, created with no rule yet.
fn create_ruleset(rights: Rights, scopes: BitFlags<Scope>) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default()
        .handle_access(rights.handled_fs)
        .map_err(ll_err("handle file access"))?;
    if !rights.handled_net.is_empty() {
        ruleset = ruleset
            .handle_access(rights.handled_net)
            .map_err(ll_err("handle TCP access"))?;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(ll_err("scope IPC"))?;
    }
    ruleset.create().map_err(ll_err("create the ruleset"))
}

/// The workspace rules: the first workspace, then each other one (numbered from 2),
/// read-write only where the plan says so.
fn add_workspace_rules(
    mut created: RulesetCreated,
    plan: &SandboxPlan<'_>,
    rights: Rights,
    detail: &mut Vec<String>,
) -> Result<RulesetCreated, SandboxError> {
    // The gateway makes symlinks in a workspace it writes (the view's `symlink`, its
    // target checked first); nothing else it may write gets one.
    let ws_write = rights.write | (rights.handled_fs & AccessFs::MakeSym);
    let ws_rights = if plan.workspace_write {
        rights.read | ws_write
    } else {
        rights.read
    };
    created = created
        .add_rule(PathBeneath::new(plan.workspace, ws_rights))
        .map_err(ll_err("add the workspace rule"))?;
    detail.push(format!(
        "workspace {}",
        if plan.workspace_write {
            "read-write"
        } else {
            "read-only"
        }
    ));
    for (i, (handle, write)) in plan.more_workspaces.iter().enumerate() {
        let access = if *write {
            rights.read | ws_write
        } else {
            rights.read
        };
        created = created
            .add_rule(PathBeneath::new(*handle, access))
            .map_err(ll_err(format!("add the rule for workspace {}", i + 2)))?;
        let mode = if *write { "read-write" } else { "read-only" };
        detail.push(format!("workspace {} {mode}", i + 2));
    }
    Ok(created)
}

/// The rules of fsgate's own directories and files: the read-write handles, the
/// read-only handles, then the read-only paths (one that cannot be opened is skipped).
fn add_grant_rules(
    mut created: RulesetCreated,
    plan: &SandboxPlan<'_>,
    rights: Rights,
    detail: &mut Vec<String>,
) -> Result<RulesetCreated, SandboxError> {
    for g in &plan.read_write {
        created = created
            .add_rule(PathBeneath::new(g.handle, rights.read | rights.write))
            .map_err(ll_err(format!("add the rule for the {}", g.label)))?;
        detail.push(format!("{} read-write", g.label));
    }
    for g in &plan.read_only {
        let access = if is_dir(g.handle)? {
            rights.read
        } else {
            rights.read_file()
        };
        created = created
            .add_rule(PathBeneath::new(g.handle, access))
            .map_err(ll_err(format!("add the rule for the {}", g.label)))?;
        detail.push(format!("{} read-only", g.label));
    }
    for path in &plan.read_only_paths {
        match PathFd::new(path) {
            Ok(fd) => {
                let access = if is_dir(fd.as_fd())? {
                    rights.read
                } else {
                    rights.read_file()
                };
                created = created
                    .add_rule(PathBeneath::new(fd, access))
                    .map_err(ll_err(format!("add the rule for {}", path.display())))?;
                detail.push(format!("{} read-only", path.display()));
            }
            Err(e) => detail.push(format!("{} skipped ({e})", path.display())),
        }
    }
    Ok(created)
}

/// The status line naming the IPC the process is scoped to.
fn scope_line(scopes: BitFlags<Scope>) -> String {
    let names: Vec<&str> = scopes
        .iter()
        .map(|s| match s {
            Scope::AbstractUnixSocket => "abstract Unix sockets",
            Scope::Signal => "signals",
            _ => "other IPC",
        })
        .collect();
    format!("scoped to the sandbox: {}", names.join(", "))
}

/// When other threads may exist (`threads` is the count taken before the ruleset was
/// built): the ruleset applies to all of them from ABI 8; before, what stays
/// unconfined is added to `missing`.
fn cover_threads(
    created: RulesetCreated,
    abi: ABI,
    threads: Option<usize>,
    missing: &mut Vec<String>,
) -> Result<RulesetCreated, SandboxError> {
    let other_threads = threads.is_none_or(|n| n > 1);
    if !other_threads {
        return Ok(created);
    }
    if abi >= ABI::V8 {
        return created
            .all_threads(true)
            .map_err(ll_err("apply to all threads"));
    }
    missing.push(match threads {
        Some(n) => format!(
            "{} other thread(s) existed and stay unconfined (restrict before starting threads)",
            n - 1
        ),
        None => "threads could not be counted; others may stay unconfined".to_owned(),
    });
    Ok(created)
}

/// TCP: bind the listen port, connect to the collectors' ports, nothing else.
fn add_tcp_rules(
    mut created: RulesetCreated,
    plan: &SandboxPlan<'_>,
    detail: &mut Vec<String>,
) -> Result<RulesetCreated, SandboxError> {
    let bind = match plan.listen_port {
        Some(port) => {
            created = created
                .add_rule(NetPort::new(port, AccessNet::BindTcp))
                .map_err(ll_err("add the listen port rule"))?;
            format!("bind port {port} only")
        }
        None => "no bind".to_owned(),
    };
    for &port in &plan.connect_ports {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(ll_err(format!("add the connect rule for TCP port {port}")))?;
    }
    let connect = match plan.connect_ports.as_slice() {
        [] => "no connect".to_owned(),
        ports => {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!(
                "connect to port {} only (audit collectors)",
                list.join(", ")
            )
        }
    };
    detail.push(format!("TCP: {bind}, {connect}"));
    Ok(created)
}

/// Where the kernel restricts connecting to Unix sockets by path (ABI 9), allows the
/// local syslog socket's directory for that alone.
fn add_unix_socket_rules(
    mut created: RulesetCreated,
    plan: &SandboxPlan<'_>,
    rights: Rights,
    detail: &mut Vec<String>,
) -> Result<RulesetCreated, SandboxError> {
    let connect = rights.handled_fs & AccessFs::ResolveUnix;
    if connect.is_empty() {
        return Ok(created);
    }
    for dir in &plan.unix_socket_dirs {
        match PathFd::new(dir) {
            Ok(fd) => {
                created = created
                    .add_rule(PathBeneath::new(fd, connect))
                    .map_err(ll_err(format!("add the rule for {}", dir.display())))?;
                detail.push(format!("{}: connect to Unix sockets", dir.display()));
            }
            Err(e) => detail.push(format!("{} skipped ({e})", dir.display())),
        }
    }
    Ok(created)
}

/// Turns the library's report into ours.
fn summarise(
    abi: ABI,
    status: &RestrictionStatus,
    mut missing: Vec<String>,
    detail: Vec<String>,
    workspace_write: bool,
) -> SandboxStatus {
    if !status.no_new_privs {
        missing.push("PR_SET_NO_NEW_PRIVS could not be set".to_owned());
    }
    let enforcement = match status.ruleset {
        RulesetStatus::NotEnforced => Enforcement::Not,
        RulesetStatus::PartiallyEnforced => {
            missing.push("the kernel dropped part of the ruleset".to_owned());
            Enforcement::Partially
        }
        RulesetStatus::FullyEnforced if missing.is_empty() && abi >= FULL_ABI => Enforcement::Fully,
        RulesetStatus::FullyEnforced => Enforcement::Partially,
    };
    let mut detail = detail.join("; ");
    if abi < ABI::V2 {
        detail.push_str("; ABI 1: moving files between directories is refused (EXDEV)");
    }
    if abi < ABI::V9 {
        detail.push_str("; connecting to named Unix sockets is not restricted before ABI 9");
    }
    SandboxStatus {
        enforcement,
        abi: Some(abi as u8),
        no_new_privs: status.no_new_privs,
        workspace_write,
        missing,
        detail,
    }
}

pub(crate) fn confine_agent_command(
    cmd: &mut Command,
    plan: &AgentPlan,
) -> Result<SandboxStatus, SandboxError> {
    let prepared = prepare_agent(plan)?;
    cmd.env_clear().envs(plan.env.iter().map(|(k, v)| (k, v)));
    install_pre_exec(cmd, prepared.ruleset, prepared.setup);
    Ok(prepared.status)
}

/// An agent's confinement, built but not applied.
pub(crate) struct PreparedAgent {
    pub status: SandboxStatus,
    /// The Landlock ruleset, None without Landlock.
    pub ruleset: Option<RulesetCreated>,
    pub setup: ChildSetup,
    /// Whether seccomp refuses pathname Unix sockets; whether TCP is restricted.
    pub block_unix: bool,
    pub restrict_tcp: bool,
}

/// Builds the agent's ruleset, seccomp programs and status from `plan`.
pub(crate) fn prepare_agent(plan: &AgentPlan) -> Result<PreparedAgent, SandboxError> {
    plan.check_overlap()?;
    let landlock = probe();
    let abi = usable_abi(landlock);
    let block_unix = blocks_unix(plan, abi);
    let restrict_tcp = plan.network != AgentNetwork::All;
    let (setup, unix) = ChildSetup::prepare(block_unix, restrict_tcp)?;
    let (ruleset, mut detail) = match abi {
        Some(abi) => {
            let (r, d) = agent_ruleset(plan, abi)?;
            (Some(r), d)
        }
        None => {
            let mut d = vec![absent_reason(landlock).to_owned()];
            d.extend(grant_lines(plan));
            (None, d)
        }
    };
    let view = agent_view(plan, landlock, unix, child::CapDrop::view(setup.caps));
    detail.extend(view.lines);
    detail.push(env_line(plan));
    let status = SandboxStatus {
        enforcement: view.enforcement,
        abi: view.abi,
        no_new_privs: true,
        workspace_write: false,
        missing: view.missing,
        detail: detail.join("; "),
    };
    Ok(PreparedAgent {
        status,
        ruleset,
        setup,
        block_unix,
        restrict_tcp,
    })
}

/// What this kernel would enforce of `plan`, without building or applying anything.
pub(crate) fn agent_view_now(plan: &AgentPlan) -> AgentView {
    let landlock = probe();
    let unix = if !blocks_unix(plan, usable_abi(landlock)) {
        UnixFilter::NotNeeded
    } else if child::seccomp_supported() {
        UnixFilter::Refused
    } else {
        UnixFilter::Unsupported
    };
    agent_view(plan, landlock, unix, child::caps_view())
}

fn caps_line(caps: child::CapsView) -> &'static str {
    match caps {
        child::CapsView::NoneHeld => "no capabilities",
        child::CapsView::Dropped => "capabilities dropped",
        // no_new_privs keeps exec from granting any of the bounding set.
        child::CapsView::BoundingKept => {
            "capabilities dropped (bounding set kept: no CAP_SETPCAP to empty it; \
             no_new_privs keeps exec from granting it)"
        }
    }
}

/// Whether seccomp must refuse `socket(AF_UNIX)`: no socket is listed and Landlock
/// cannot refuse pathname sockets itself (ABI 9).
fn blocks_unix(plan: &AgentPlan, abi: Option<ABI>) -> bool {
    plan.unix_sockets.is_empty() && abi.is_none_or(|a| a < ABI::V9)
}

/// The grant lines when there is no Landlock (nothing is opened).
fn grant_lines(plan: &AgentPlan) -> Vec<String> {
    plan.grants
        .iter()
        .map(|g| grant_line(g, g.path.exists()))
        .collect()
}

/// The agent's Landlock ruleset (files, TCP, Unix sockets on ABI 9, IPC scopes) and a
/// line per grant.
fn agent_ruleset(
    plan: &AgentPlan,
    abi: ABI,
) -> Result<(RulesetCreated, Vec<String>), SandboxError> {
    let rights = Rights::for_abi(abi);
    let read_exec = rights.read | (rights.handled_fs & AccessFs::Execute);
    // No IoctlDev (but on the agent's own pseudo-terminals in the view, in_view.rs).
    let read_write = rights.read | rights.write;
    let tcp = AccessNet::BindTcp | AccessNet::ConnectTcp;
    let mut ruleset = Ruleset::default()
        .handle_access(rights.handled_fs)
        .map_err(ll_err("handle file access"))?;
    if plan.network != AgentNetwork::All && abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(tcp)
            .map_err(ll_err("handle TCP access"))?;
    }
    if !rights.scopes.is_empty() {
        ruleset = ruleset.scope(rights.scopes).map_err(ll_err("scope IPC"))?;
    }
    let mut created = ruleset
        .create()
        .map_err(ll_err("create the agent ruleset"))?;
    let mut detail = Vec::new();
    for g in &plan.grants {
        let access = match g.access {
            AgentAccess::Read => rights.read,
            AgentAccess::ReadExec => read_exec,
            AgentAccess::ReadWrite => read_write,
        };
        let added = add_path_rule(&mut created, &g.path, access, abi)?;
        detail.push(grant_line(g, added));
    }
    // No terminal here: the host's /dev/pts holds every terminal of the user. Inside
    // the view, the agent's own devpts instance is granted (in_view.rs).
    if let AgentNetwork::Ports(ports) = &plan.network
        && abi >= ABI::V4
    {
        for &port in ports {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(ll_err(format!("add the agent rule for TCP port {port}")))?;
        }
    }
    if abi >= ABI::V9 {
        for sock in &plan.unix_sockets {
            add_path_rule(&mut created, sock, AccessFs::ResolveUnix.into(), abi)?;
        }
    }
    Ok((created, detail))
}

/// Adds a rule for `path` (masked to file rights on a non-directory); false when the
/// path cannot be opened (missing), which skips it.
fn add_path_rule(
    created: &mut RulesetCreated,
    path: &std::path::Path,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<bool, SandboxError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(false);
    };
    let access = if is_dir(fd.as_fd())? {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(ll_err(format!("add the agent rule for {}", path.display())))?;
    Ok(true)
}

/// What the kernel enforces of `plan`: `Fully` only when every planned restriction
/// holds; the TCP, Unix socket and process lines for the detail.
fn agent_view(
    plan: &AgentPlan,
    landlock: LandlockStatus,
    unix: UnixFilter,
    caps: child::CapsView,
) -> AgentView {
    let abi = usable_abi(landlock);
    let mut missing = Vec::new();
    match abi {
        None => missing.push(format!(
            "no kernel sandbox: {}; files, TCP and signals are not restricted",
            absent_reason(landlock)
        )),
        Some(abi) => {
            for m in missing_for(abi) {
                // The agent keeps all TCP unless the policy restricts it.
                if !m.starts_with("TCP") || plan.network != AgentNetwork::All {
                    missing.push(m);
                }
            }
        }
    }
    let per_path = abi.is_some_and(|a| a >= ABI::V9);
    if !plan.unix_sockets.is_empty() && !per_path {
        missing.push(
            "the kernel cannot limit which pathname Unix sockets the agent connects to \
             (needs Landlock ABI 9): every pathname socket the agent's user may open is reachable"
                .to_owned(),
        );
    }
    if unix == UnixFilter::Unsupported {
        missing.push(
            "pathname Unix sockets are not restricted: no seccomp filter for this architecture \
             and no Landlock ABI 9"
                .to_owned(),
        );
    }
    let mut lines = vec![
        network_line(&plan.network),
        sockets_line(plan, per_path, unix),
    ];
    lines.push("own session, no terminal, inherited descriptors closed".to_owned());
    if child::seccomp_supported() {
        lines.push(
            "kernel keyrings, chown and set-uid/set-gid/other-writable chmod refused (seccomp)"
                .to_owned(),
        );
        lines.push(
            "pseudo-terminals only in fsgate's view, a devpts instance of the agent's own \
             (/dev/ptmx, /dev/pts); TIOCSTI and TIOCLINUX refused (seccomp)"
                .to_owned(),
        );
        if plan.network != AgentNetwork::All {
            lines
                .push("MPTCP sockets refused (seccomp; Landlock's TCP rules miss them)".to_owned());
        }
    } else {
        missing.push(
            "kernel keyrings, chown and set-uid/set-gid/other-writable chmod are not refused: \
             no seccomp filter for this architecture"
                .to_owned(),
        );
    }
    lines.push(caps_line(caps).to_owned());
    if abi.is_some_and(|a| a >= ABI::V6) {
        lines.push("scoped to the sandbox: abstract Unix sockets, signals".to_owned());
    }
    let enforcement = match abi {
        None => Enforcement::Not,
        Some(a) if missing.is_empty() && a >= FULL_ABI => Enforcement::Fully,
        Some(_) => Enforcement::Partially,
    };
    AgentView {
        abi: abi.map(|a| a as u8),
        enforcement,
        missing,
        lines,
    }
}

/// "pathname Unix sockets: none (...)", "... only A, B", or "... all (...)".
fn sockets_line(plan: &AgentPlan, per_path: bool, unix: UnixFilter) -> String {
    let list = || {
        plan.unix_sockets
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (plan.unix_sockets.is_empty(), per_path, unix) {
        (true, true, _) => "pathname Unix sockets: none (Landlock)".to_owned(),
        (true, false, UnixFilter::Refused) => {
            "pathname Unix sockets: none (seccomp refuses socket(AF_UNIX) and io_uring; \
             socketpair allowed)"
                .to_owned()
        }
        (true, false, _) => "pathname Unix sockets: not restricted".to_owned(),
        (false, true, _) => format!("pathname Unix sockets: only {}", list()),
        (false, false, _) => format!(
            "pathname Unix sockets: all, not per path (listed: {}; per-path limits need Landlock ABI 9)",
            list()
        ),
    }
}

/// Sets up the child between fork and exec: session and descriptors, the Landlock
/// ruleset (if any), then seccomp, no_new_privs and capabilities.
#[allow(unsafe_code)]
fn install_pre_exec(cmd: &mut Command, ruleset: Option<RulesetCreated>, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child of a possibly multi-threaded parent,
    // where only async-signal-safe operations are allowed. Everything that allocates or
    // takes locks (opening the paths, building the ruleset and the seccomp programs,
    // reading cap_last_cap) was done before the fork. In the child the closure only
    // makes plain system calls on values already in memory: setsid, close_range or
    // fcntl, ioctl(TCGETS), write(2) of a static message, fcntl(F_DUPFD) of the
    // ruleset, prctl, landlock_restrict_self, seccomp, capset; it reads errno and
    // closes the duplicate. No heap allocation, no locks. Cloning the ruleset per call
    // lets the same Command be spawned again.
    unsafe {
        cmd.pre_exec(move || {
            setup.before_landlock()?;
            if let Some(ruleset) = &ruleset {
                let dup = ruleset.try_clone()?;
                match dup.restrict_self() {
                    Ok(s) if s.ruleset != RulesetStatus::NotEnforced => {}
                    // Fail closed: never exec the agent unconfined.
                    Ok(_) => return Err(io::Error::from(rustix::io::Errno::PERM)),
                    Err(_) => return Err(io::Error::last_os_error()),
                }
            }
            setup.after_landlock()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_follow_the_abi() {
        let v1 = Rights::for_abi(ABI::V1);
        assert!(
            !v1.write.contains(AccessFs::Refer),
            "Refer is not handled before ABI 2"
        );
        assert!(!v1.write.contains(AccessFs::Truncate));
        assert!(v1.handled_net.is_empty() && v1.scopes.is_empty());
        let v7 = Rights::for_abi(ABI::V7);
        assert!(v7.write.contains(AccessFs::Refer | AccessFs::Truncate));
        assert!(
            v7.handled_fs
                .contains(AccessFs::IoctlDev | AccessFs::Execute)
        );
        assert_eq!(v7.handled_net, AccessNet::BindTcp | AccessNet::ConnectTcp);
        assert_eq!(v7.scopes, Scope::AbstractUnixSocket | Scope::Signal);
        for r in [v1, v7, Rights::for_abi(ABI::V9)] {
            assert_eq!(
                r.read,
                AccessFs::ReadFile | AccessFs::ReadDir,
                "no Execute in read"
            );
            assert!(!r.write.contains(AccessFs::Execute | AccessFs::IoctlDev));
            assert!(!r.write.contains(AccessFs::MakeSym) && !r.write.contains(AccessFs::MakeChar));
            assert_eq!(
                r.write & !r.handled_fs,
                BitFlags::EMPTY,
                "only handled rights granted"
            );
        }
    }

    fn at(abi: ABI) -> LandlockStatus {
        LandlockStatus::Available {
            effective_abi: abi,
            kernel_abi: None,
        }
    }

    #[test]
    fn agent_status_is_honest_per_abi() {
        use child::CapsView::{BoundingKept, Dropped, NoneHeld};
        let mut plan = AgentPlan::default();
        let full = agent_view(&plan, at(ABI::V7), UnixFilter::Refused, Dropped);
        assert_eq!(full.enforcement, Enforcement::Fully, "{:?}", full.missing);
        assert!(full.lines.contains(&"capabilities dropped".to_owned()));
        // Without CAP_SETPCAP the bounding set stays, and the line says so.
        let kept = agent_view(&plan, at(ABI::V7), UnixFilter::Refused, BoundingKept);
        assert!(
            kept.lines.iter().any(|l| l.contains("bounding set kept")),
            "{kept:?}"
        );
        // TCP restricted by the policy, but not by an ABI 3 kernel: said so.
        let v3 = agent_view(&plan, at(ABI::V3), UnixFilter::Refused, NoneHeld);
        assert!(!v3.missing.iter().any(|m| m.starts_with("TCP")), "{v3:?}");
        plan.network = AgentNetwork::None;
        let v3 = agent_view(&plan, at(ABI::V3), UnixFilter::Refused, NoneHeld);
        assert!(v3.missing.iter().any(|m| m.starts_with("TCP")), "{v3:?}");
        assert_eq!(v3.enforcement, Enforcement::Partially);
        // Listed sockets: per path from ABI 9 only.
        plan.unix_sockets.push("/run/a.sock".into());
        let v7 = agent_view(&plan, at(ABI::V7), UnixFilter::NotNeeded, NoneHeld);
        assert_eq!(v7.enforcement, Enforcement::Partially);
        assert!(
            v7.lines.iter().any(|l| l.contains("not per path")),
            "{v7:?}"
        );
        let v9 = agent_view(&plan, at(ABI::V9), UnixFilter::NotNeeded, NoneHeld);
        assert_eq!(v9.enforcement, Enforcement::Fully, "{:?}", v9.missing);
        assert!(
            v9.lines
                .contains(&"pathname Unix sockets: only /run/a.sock".to_owned())
        );
        // No seccomp for this architecture: unrestricted, and said so.
        plan.unix_sockets.clear();
        let odd = agent_view(&plan, at(ABI::V7), UnixFilter::Unsupported, NoneHeld);
        assert_eq!(odd.enforcement, Enforcement::Partially);
        let none = agent_view(
            &plan,
            LandlockStatus::NotImplemented,
            UnixFilter::Refused,
            NoneHeld,
        );
        assert_eq!((none.enforcement, none.abi), (Enforcement::Not, None));
        assert!(!blocks_unix(&plan, Some(ABI::V9)) && blocks_unix(&plan, Some(ABI::V8)));
    }

    #[test]
    fn older_abis_are_reported_as_partial() {
        assert_eq!(missing_for(ABI::V1).len(), 4);
        assert_eq!(missing_for(ABI::V3).len(), 3);
        assert!(missing_for(ABI::V6).is_empty());
        assert!(missing_for(ABI::V7).is_empty());
        assert!(missing_for(ABI::V4)[0].contains("ioctl"));
    }
}
