//! An agent's confinement: its plan (from the policy and its discovered installation)
//! and what the kernel enforces once the plan is applied to its command.

use super::ruleset::reach_hosted;
use crate::cli::acp_view;
use crate::cli::wall::{self, Scratch};
use crate::startup;

/// An agent's confinement: the plan it was built from and what the kernel will enforce.
pub(super) struct Confined {
    /// Emptied and removed when the confinement ends, however it ends.
    pub(super) _scratch: Scratch,
    pub(super) plan: fsgate_sandbox::AgentPlan,
    /// Set once the plan is applied to the command.
    pub(super) status: Option<fsgate_sandbox::SandboxStatus>,
}

impl Confined {
    /// The agent inside the view (src/cli/acp_view.rs): its command line is the
    /// program discovery resolved, its arguments and the profile's.
    pub(super) fn in_view(
        self,
        opened: &mut startup::Opened,
        policy_file: Option<&std::path::Path>,
        (program, args, profile_args): (&str, &[String], &[String]),
        require_landlock: bool,
    ) -> Result<(acp_view::AgentCommand, Confined), String> {
        let exe = self
            .plan
            .executable
            .clone()
            .unwrap_or_else(|| program.into());
        let mut argv: Vec<std::ffi::OsString> = vec![exe.into()];
        argv.extend(args.iter().chain(profile_args).map(Into::into));
        let (command, status) =
            acp_view::command(opened, policy_file, &self.plan, (argv, require_landlock))?;
        Ok((
            command,
            Confined {
                status: Some(status),
                ..self
            },
        ))
    }

    /// Applies the plan to the agent's command: what the kernel will enforce.
    /// Under `[sandbox] require_landlock = true` an agent wall the kernel does not fully
    /// enforce is refused before the agent starts.
    pub(super) fn apply(
        self,
        command: &mut std::process::Command,
        require_landlock: bool,
    ) -> Result<Confined, String> {
        let status = fsgate_sandbox::confine_agent_command(command, &self.plan)
            .map_err(|e| e.to_string())?;
        wall::required(&status, require_landlock)?;
        Ok(Confined {
            status: Some(status),
            ..self
        })
    }
}

/// The agent's confinement, worked out before its command is built: a private scratch
/// directory (its HOME and TMPDIR), its own installation as discovered, the system
/// paths, the port of the MCP server hosted for it (and this binary, its stdio
/// bridge), and nothing of the workspace, fsgate's own files or the rest of the home.
pub(super) fn plan_confinement(
    opened: &mut startup::Opened,
    policy_file: Option<&std::path::Path>,
    (program, args): (&str, &[String]),
    (port, exe): (u16, Option<&std::path::Path>),
) -> Result<Confined, String> {
    let program = std::ffi::OsStr::new(program);
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let wall::Wall { scratch, mut plan } =
        wall::plan_wall(opened, policy_file, (program, &args)).map_err(|e| e.to_string())?;
    reach_hosted(&mut plan, port, exe);
    Ok(Confined {
        _scratch: scratch,
        plan,
        status: None,
    })
}
