//! `fsgate run`'s wall (the default; `--no-confine` lifts it): outside the workspaces,
//! the command and every process it starts get the wall a confined ACP agent gets (src/cli/wall.rs): the `[agent]`
//! section's Landlock ruleset, environment and network, a scratch HOME and TMPDIR, no
//! capabilities, its seccomp filters. The ruleset is built here, before the view
//! exists, and completed with each view's root by the command's start inside the view
//! (`__view-exec`). Unlike the agent, the command keeps the session and the terminal it
//! was given (descriptors 0 to 2): it is run from one. See docs/run.md.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use super::wall::{self, Wall, WallError};
use crate::startup;

/// The command's wall, prepared before its process starts.
pub(super) struct RunWall {
    /// Its scratch dir (HOME, TMPDIR), emptied when the run ends.
    wall: Wall,
    confinement: fsgate_sandbox::ViewConfinement,
    word: OsString,
}

impl RunWall {
    /// The wall of `command` from the policy's `[agent]` section; Landlock missing
    /// (nothing would be enforced) is refused.
    pub(super) fn prepare(
        opened: &mut startup::Opened,
        policy_file: Option<&Path>,
        command: &[OsString],
    ) -> Result<RunWall, WallError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| "no command given".to_owned())?;
        let wall = wall::plan_wall(opened, policy_file, (program, args))?;
        let require = opened.gateway.policy().settings().sandbox.require_landlock;
        let (confinement, word) = wall::for_view(&wall.plan, require)?;
        if confinement.status().enforcement == fsgate_sandbox::Enforcement::Not {
            return Err(WallError::Other(format!(
                "Landlock is missing ({}): fsgate run walls the command in with it (--no-confine runs it without)",
                confinement.status()
            )));
        }
        Ok(RunWall {
            wall,
            confinement,
            word,
        })
    }

    /// The word `__view-exec` applies the wall from.
    pub(super) fn word(&self) -> OsString {
        self.word.clone()
    }

    /// The wall's environment on the view's child's command.
    pub(super) fn install(&mut self, command: &mut Command) {
        self.confinement.install_env(command, &self.wall.plan);
    }

    /// Once the view's child started: its copy of the ruleset is the only one.
    pub(super) fn started(&mut self) {
        self.confinement.close_inherited();
    }

    /// Says on stderr what the kernel enforces, before the command starts.
    pub(super) fn announce(&self) {
        fsgate_base::text::eprint_line(&format!(
            "fsgate: command confined: {}",
            self.confinement.status()
        ));
    }

    /// The `run` record's `confine`: what the kernel enforces and the ruleset (as the
    /// `agent-start` record's `agentSandbox` and `agentPlan`).
    pub(super) fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "sandbox": serde_json::to_value(self.confinement.status()).unwrap_or_default(),
            "plan": wall::plan_record(&self.wall.plan),
            "scratch": self.wall.scratch.path.to_string_lossy(),
        })
    }
}
