//! A hosted agent's confinement, built before its fork (its Landlock ruleset, seccomp
//! programs and status) and applied between fork and exec.

use std::io;
use std::os::fd::AsFd;
use std::process::Command;

use ::landlock::{
    ABI, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus,
};

use super::abi::{Rights, absent_reason, is_dir, ll_err, probe, usable_abi};
use super::agent_view::{agent_view, blocks_unix};
use crate::child::{self, ChildSetup};
use crate::describe::{env_line, grant_line};
use crate::error::SandboxError;
use crate::plan::{AgentAccess, AgentNetwork, AgentPlan};
use crate::status::SandboxStatus;

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
    // The private scratch directory alone may run programs, and hold links and fifos
    // (see `AgentAccess::Scratch`).
    let scratch = read_write | (rights.handled_fs & AccessFs::Execute);
    let scratch_links = scratch | (rights.handled_fs & (AccessFs::MakeSym | AccessFs::MakeFifo));
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
            AgentAccess::Scratch { links: false } => scratch,
            AgentAccess::Scratch { links: true } => scratch_links,
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

/// Sets up the child between fork and exec: session and descriptors, the Landlock
/// ruleset (if any), then seccomp, no_new_privs and capabilities.
#[allow(unsafe_code)]
pub(super) fn install_pre_exec(
    cmd: &mut Command,
    ruleset: Option<RulesetCreated>,
    setup: ChildSetup,
) {
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
