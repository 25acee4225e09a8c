//! Non-Linux: no Landlock; every function reports "not enforced" instead of failing.

use std::process::Command;

use super::describe::{AgentView, network_line};
use super::plan::{AgentPlan, SandboxPlan};
use super::status::{Enforcement, SandboxStatus};
use crate::error::SandboxError;

const REASON: &str = "Landlock is unsupported on this OS";

pub(crate) fn restrict_self(plan: &SandboxPlan<'_>) -> Result<SandboxStatus, SandboxError> {
    Ok(SandboxStatus::not_enforced(REASON, plan.workspace_write))
}

pub(crate) fn confine_agent_command(
    _cmd: &mut Command,
    plan: &AgentPlan,
) -> Result<SandboxStatus, SandboxError> {
    plan.check_overlap()?;
    Ok(SandboxStatus::not_enforced(REASON, false))
}

#[cfg(test)]
pub(crate) fn kernel_abi() -> Option<u8> {
    None
}

#[cfg(test)]
pub(crate) fn is_exdev(_err: &std::io::Error) -> bool {
    false
}

pub(crate) fn agent_view_now(plan: &AgentPlan) -> AgentView {
    AgentView {
        abi: None,
        enforcement: Enforcement::Not,
        missing: vec![format!(
            "no kernel sandbox: {REASON}; files, TCP, Unix sockets, signals and the session are not restricted"
        )],
        lines: vec![network_line(&plan.network)],
    }
}

pub(crate) fn harden_gateway() -> Result<(), SandboxError> {
    Ok(())
}

pub(crate) fn landlock_missing() -> Option<&'static str> {
    Some("Landlock is a Linux kernel's")
}
