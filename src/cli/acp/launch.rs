//! What is worked out before the agent starts: its command, with its confinement and
//! profile applied, and the hosted MCP server's port.

use std::path::PathBuf;
use std::process::ExitCode;

use super::confine::{Confined, plan_confinement};
use super::profile::{Profile, prepare_profile};
use crate::cli::acp_view;
use crate::cli::exit::fail_after_start;
use crate::startup;

/// What is worked out before the agent starts: the opened gateway, the agent's command
/// with its confinement and profile applied, the hosted MCP server's listener and port,
/// and this binary (the stdio entry's command).
pub(super) struct Launch {
    pub(super) opened: startup::Opened,
    pub(super) command: acp_view::AgentCommand,
    pub(super) confined: Option<Confined>,
    pub(super) profile: Option<Profile>,
    pub(super) hosted: (std::net::TcpListener, u16),
    pub(super) exe: Option<PathBuf>,
}

impl Launch {
    /// The port is bound and the binary found before confinement (while /proc is
    /// reachable); a failure is reported, closes the log with a `stop` naming it, and
    /// becomes the exit code.
    pub(super) fn prepare(
        mut opened: startup::Opened,
        policy_file: Option<&std::path::Path>,
        confine: bool,
        program: &str,
        agent_args: &[String],
    ) -> Result<Launch, ExitCode> {
        match Parts::work_out(&mut opened, policy_file, confine, (program, agent_args)) {
            Ok(p) => Ok(Launch {
                opened,
                command: p.command,
                confined: p.confined,
                profile: p.profile,
                hosted: p.hosted,
                exe: p.exe,
            }),
            Err(e) => Err(fail_after_start(&opened.gateway, &e)),
        }
    }
}

/// A [`Launch`] but its gateway.
struct Parts {
    command: acp_view::AgentCommand,
    confined: Option<Confined>,
    profile: Option<Profile>,
    hosted: (std::net::TcpListener, u16),
    exe: Option<PathBuf>,
}

impl Parts {
    fn work_out(
        opened: &mut startup::Opened,
        policy_file: Option<&std::path::Path>,
        confine: bool,
        (program, agent_args): (&str, &[String]),
    ) -> Result<Parts, String> {
        let hosted = bind_hosted()?;
        let exe = std::env::current_exe().ok();
        let mut confined = match confine {
            true => Some(
                plan_confinement(
                    opened,
                    policy_file,
                    (program, agent_args),
                    (hosted.1, exe.as_deref()),
                )
                .map_err(|e| format!("--confine-agent: {e}"))?,
            ),
            false => None,
        };
        let profile = prepare_profile(opened, program, agent_args, confined.as_mut())
            .map_err(|e| format!("agent profile: {e}"))?;
        let require_landlock = opened.gateway.policy().settings().sandbox.require_landlock;
        let profile_args = profile.as_ref().map_or(&[][..], |p| &p.plan.args[..]);
        if let Some(c) = confined.take() {
            let (command, confined) = c
                .in_view(
                    opened,
                    policy_file,
                    (program, agent_args, profile_args),
                    require_landlock,
                )
                .map_err(|e| format!("--confine-agent: {e}"))?;
            let confined = Some(confined);
            return Ok(Parts {
                command,
                confined,
                profile,
                hosted,
                exe,
            });
        }
        let mut command = agent_command(program, agent_args, confined.as_ref());
        if let Some(p) = &profile {
            command.args(&p.plan.args);
            if confined.is_none() {
                command.envs(p.plan.env.iter().map(|(k, v)| (k, v)));
            }
        }
        let confined = confined
            .map(|c| c.apply(&mut command, require_landlock))
            .transpose()
            .map_err(|e| format!("--confine-agent: {e}"))?;
        let command = acp_view::AgentCommand::Direct(command);
        Ok(Parts {
            command,
            confined,
            profile,
            hosted,
            exe,
        })
    }
}

/// Binds the loopback port of the MCP server hosted for the agent.
fn bind_hosted() -> Result<(std::net::TcpListener, u16), String> {
    let listener = fsgate_doors::hosted::Hosted::bind()
        .map_err(|e| format!("cannot bind the MCP server for the agent on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot bind the MCP server for the agent: {e}"))?
        .port();
    Ok((listener, port))
}

/// The agent's command: stdio piped (stderr is relayed escaped, line by line, each line
/// marked as the agent's), signals unblocked. It is started before the gateway confines
/// itself, so it does not inherit the gateway's ruleset. Under confinement the program
/// is the one discovery resolved (the environment is replaced, so a PATH lookup could
/// find another), still called by the name typed.
fn agent_command(
    program: &str,
    args: &[String],
    confined: Option<&Confined>,
) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let resolved = confined.and_then(|c| c.plan.executable.as_deref());
    let mut command = std::process::Command::new(resolved.unwrap_or(program.as_ref()));
    command
        .arg0(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    crate::signals::unblock_in_child(&mut command);
    command
}
