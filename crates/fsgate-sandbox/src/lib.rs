//! Landlock confinement of the gateway process and of hosted agents (issue 4, issue 5).
//!
//! # Layer
//!
//! Owns: Landlock and seccomp, for the gateway itself and for a hosted agent, and the
//! `[sandbox]` and `[agent]` sections. Depends on `fsgate-base` only. May not touch:
//! the policy engine (it is handed the paths to allow), the workspace, the audit log.
//!
//! # Layout
//!
//! - `config`: the `[sandbox]` policy section ([`SandboxSettings`]).
//! - [`agent_config`]: the `[agent]` policy section ([`AgentSettings`]): a confined
//!   agent's own paths, environment, network and Unix sockets.
//! - `plan`: what to allow: [`SandboxPlan`] for the gateway, [`AgentPlan`] for an agent.
//! - `error`: what can go wrong ([`SandboxError`]).
//! - `status`: what the kernel enforced ([`SandboxStatus`]), for the log, the
//!   `initialize` result's `_meta.fsgate.sandbox` and `serve --check-sandbox`.
//! - `landlock` (Linux): [`restrict_self`] and [`confine_agent_command`]; elsewhere
//!   `unsupported`, which reports "not enforced" instead of failing to build.
//!   Its parts, in `landlock/`: the kernel's ABI and the rights used for it (`abi`), the
//!   gateway's ruleset (`gateway`), an agent's (`agent`) and what the kernel enforces of
//!   it (`agent_view`).
//! - `child` (Linux): the rest of an agent's wall, set up between fork and exec: its
//!   own session and no terminal, no inherited descriptors, no capabilities, seccomp
//!   against pathname Unix sockets below Landlock ABI 9; and [`harden_gateway`].
//! - `describe`: the words for an agent's ruleset ([`describe_agent_plan`]).
//! - `in_view` (Linux): an agent's confinement when it sees the workspace through the
//!   view: built here, completed with the view's root and applied inside the view.
//! - [`terminal`] (Linux): pseudo-terminals for an agent's shell, TIOCSTI and TIOCLINUX
//!   refused by seccomp.
//! - [`no_tiocsti`] (Linux): the seccomp filter that closes a terminal's input to
//!   `fsgate run`'s command (TIOCSTI, TIOCLINUX).
//!
//! # Start-up order
//!
//! Landlock restricts the calling thread and the threads it creates *afterwards*. So the
//! gateway must: open every handle (workspace, audit dir, backup dir, policy file), bind
//! its listener, spawn a hosted agent, then call [`restrict_self`] **on the main thread
//! while it is the only thread**, and only then start tracing worker threads and build
//! the tokio runtime. `#[tokio::main]` is the wrong shape. If other threads exist,
//! [`restrict_self`] confines them too on kernels with Landlock ABI 8 or later and
//! otherwise reports the sandbox as only partially enforced.
//!
//! After that, nothing may open a path by name outside what the plan granted: the
//! workspace, audit and backup stores work through their directory handles.

pub mod agent_config;
pub mod agent_tree;
pub(crate) mod config;
pub mod denied;
#[cfg(unix)]
pub mod discover;
pub(crate) mod plan;
pub mod profile;
pub(crate) mod status;

mod describe;
mod error;

#[cfg(target_os = "linux")]
mod child;
#[cfg(target_os = "linux")]
mod in_view;
#[cfg(target_os = "linux")]
mod landlock;
pub mod no_tiocsti;
#[cfg(target_os = "linux")]
pub mod terminal;
#[cfg(target_os = "linux")]
use self::landlock as imp;

#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
use self::unsupported as imp;

#[cfg(all(test, target_os = "linux"))]
mod agent_tests;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use std::sync::OnceLock;

pub use agent_config::{AgentConfigError, AgentSettings};
pub use config::SandboxSettings;
pub use error::SandboxError;
pub use plan::{
    AgentAccess, AgentGrant, AgentNetwork, AgentPlan, DEFAULT_AGENT_DEVICES,
    DEFAULT_AGENT_SHELL_FILES, DEFAULT_AGENT_SYSTEM_PATHS, Protected, SandboxPlan,
    java_config_paths,
};
pub use status::{Enforcement, SandboxStatus};

#[cfg(target_os = "linux")]
pub use in_view::ViewConfinement;

/// Status of the sandbox applied to this process by [`restrict_self`], if any.
static CURRENT: OnceLock<SandboxStatus> = OnceLock::new();

/// What [`restrict_self`] enforced for this process (None before it ran).
#[cfg(test)]
pub(crate) fn current_status() -> Option<&'static SandboxStatus> {
    CURRENT.get()
}

/// Confines the calling process (see the module docs for when to call it) to `plan`:
/// the highest Landlock ABI the kernel offers, best effort, `PR_SET_NO_NEW_PRIVS` set.
/// Returns what was enforced; check it with [`SandboxSettings::check`].
///
/// # Threads
///
/// Call it on the main thread before any other thread exists.
pub fn restrict_self(plan: &SandboxPlan<'_>) -> Result<SandboxStatus, SandboxError> {
    let status = imp::restrict_self(plan)?;
    let _ = CURRENT.set(status.clone());
    Ok(status)
}

/// Makes `cmd` start its program under an [`AgentPlan`] ruleset of its own (applied in
/// the child between fork and exec), so the agent cannot reach the workspace except
/// through the gateway. Returns what the child will get; `Enforcement::Not` means the
/// command was left unchanged because the kernel has no Landlock.
pub fn confine_agent_command(
    cmd: &mut std::process::Command,
    plan: &AgentPlan,
) -> Result<SandboxStatus, SandboxError> {
    imp::confine_agent_command(cmd, plan)
}

/// An agent's confinement for an agent that sees the workspace through the view: the
/// ruleset built here, completed and applied by [`confine_agent_in_view`] at the
/// agent's start inside the view (see `in_view.rs`).
#[cfg(target_os = "linux")]
pub fn prepare_agent_for_view(plan: &AgentPlan) -> Result<ViewConfinement, SandboxError> {
    in_view::prepare(plan)
}

/// The agent's start inside the view: `word` is [`ViewConfinement::word`], `workspaces`
/// the views' roots (one per workspace). On error the agent must not be run.
#[cfg(target_os = "linux")]
pub fn confine_agent_in_view(
    word: &str,
    workspaces: &[std::path::PathBuf],
) -> Result<(), SandboxError> {
    in_view::confine_self(word, workspaces)
}

/// The whole ruleset of an agent `plan`, for `fsgate acp --confine-agent
/// --check-sandbox`: one line per grant (path, access, source; "missing: skipped" when
/// the path does not exist), the protected paths, the environment variable names (never
/// their values), TCP, Unix sockets, the process restrictions, and what this kernel
/// enforces (ABI, missing). Starts nothing and restricts nothing.
pub fn describe_agent_plan(plan: &AgentPlan) -> String {
    describe::describe(plan, &imp::agent_view_now(plan))
}

/// Makes the gateway process non-dumpable (`PR_SET_DUMPABLE` 0): a process of the same
/// user, such as the agent it hosts, can then neither ptrace it nor read its
/// `/proc/PID/mem` or `environ`, even without Landlock. Call it once the agent is
/// spawned (`fsgate acp --confine-agent`).
pub fn harden_gateway() -> Result<(), SandboxError> {
    imp::harden_gateway()
}

/// Why this kernel offers no Landlock at all (missing, or disabled at boot); None if
/// it offers some ABI. Restricts nothing.
pub fn landlock_missing() -> Option<&'static str> {
    imp::landlock_missing()
}

/// The Landlock ABI this kernel offers (as far as the `landlock` crate knows), None if
/// Landlock is missing or disabled. Does not restrict anything.
#[cfg(test)]
pub(crate) fn kernel_abi() -> Option<u8> {
    imp::kernel_abi()
}

/// A one-line explanation for an `EXDEV` error from a rename inside the workspace, or
/// None for any other error. Under Landlock ABI 1 the kernel refuses every rename or
/// link across directories; otherwise EXDEV means two filesystems are involved.
#[cfg(test)]
pub(crate) fn exdev_hint(err: &std::io::Error) -> Option<&'static str> {
    if !imp::is_exdev(err) {
        return None;
    }
    if current_status().and_then(|s| s.abi) == Some(1) {
        Some(
            "moving a file to another directory is not possible here: the kernel's Landlock \
             (ABI 1, Linux < 5.19) refuses it; copy and delete instead, or upgrade the kernel",
        )
    } else {
        Some("source and destination are on different filesystems; copy and delete instead")
    }
}
