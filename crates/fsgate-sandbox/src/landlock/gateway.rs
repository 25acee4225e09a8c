//! The gateway's own ruleset: its workspaces, fsgate's directories and files, TCP, the
//! syslog socket, IPC scopes and the threads it covers; and the status it reports.

use std::os::fd::AsFd;

use ::landlock::{
    ABI, AccessFs, AccessNet, BitFlags, NetPort, PathBeneath, PathFd, RestrictSelfAttr,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus,
    Scope,
};

use super::abi::{FULL_ABI, Rights, is_dir, ll_err};
use crate::error::SandboxError;
use crate::plan::SandboxPlan;
use crate::status::{Enforcement, SandboxStatus};

/// Number of threads in this process, from `/proc/self/task` (None if unreadable).
pub(super) fn thread_count() -> Option<usize> {
    std::fs::read_dir("/proc/self/task").ok().map(|d| d.count())
}

/// The ruleset handling every filesystem right of the ABI, its TCP rights and the IPC
/// `scopes`, created with no rule yet.
pub(super) fn create_ruleset(
    rights: Rights,
    scopes: BitFlags<Scope>,
) -> Result<RulesetCreated, SandboxError> {
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
pub(super) fn add_workspace_rules(
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
pub(super) fn add_grant_rules(
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
pub(super) fn scope_line(scopes: BitFlags<Scope>) -> String {
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
pub(super) fn cover_threads(
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
pub(super) fn add_tcp_rules(
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
pub(super) fn add_unix_socket_rules(
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
pub(super) fn summarise(
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
