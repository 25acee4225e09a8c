//! Linux: builds and applies the Landlock rulesets of [`SandboxPlan`] and [`AgentPlan`].
//! This file holds what the crate calls (as `imp`); the kernel's ABI, the gateway's
//! ruleset, the agent's and what the kernel enforces of it are in `landlock/`.

pub(super) mod abi;
pub(super) mod agent;
mod agent_view;
mod gateway;

use std::process::Command;

use ::landlock::{RestrictSelf, Scope};

pub(crate) use super::child::harden_gateway;
use super::child::{self, UnixFilter};
use super::describe::AgentView;
use super::plan::{AgentPlan, SandboxPlan};
use super::status::SandboxStatus;
use crate::error::SandboxError;
use abi::{Rights, absent_reason, ll_err, missing_for, probe, usable_abi};
use agent::{install_pre_exec, prepare_agent};
use agent_view::{agent_view, blocks_unix};
use gateway::{
    add_grant_rules, add_tcp_rules, add_unix_socket_rules, add_workspace_rules, cover_threads,
    create_ruleset, scope_line, summarise, thread_count,
};

/// Why this kernel offers no Landlock; None if it does.
pub(crate) fn landlock_missing() -> Option<&'static str> {
    let status = probe();
    usable_abi(status).is_none().then(|| absent_reason(status))
}

#[cfg(test)]
pub(crate) fn kernel_abi() -> Option<u8> {
    usable_abi(probe()).map(|a| a as u8)
}

#[cfg(test)]
pub(crate) fn is_exdev(err: &std::io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error())
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

pub(crate) fn confine_agent_command(
    cmd: &mut Command,
    plan: &AgentPlan,
) -> Result<SandboxStatus, SandboxError> {
    let prepared = prepare_agent(plan)?;
    cmd.env_clear().envs(plan.env.iter().map(|(k, v)| (k, v)));
    install_pre_exec(cmd, prepared.ruleset, prepared.setup);
    Ok(prepared.status)
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
