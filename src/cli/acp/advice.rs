//! What fsgate says about a confined agent: its whole ruleset (`--check-sandbox`), and
//! when it cannot start or fails, what its sandbox denied and what would allow it.

use std::process::ExitCode;

use super::confine::Confined;
use super::relay::StoppedBy;
use crate::cli::exit::fail;
use crate::startup;
use fsgate_doors::proxy::AgentEnd;

/// `fsgate acp --check-sandbox`: the agent's whole ruleset and what this kernel enforces,
/// on stdout; nothing is started and nothing is recorded.
pub(super) fn check_sandbox(
    opened: startup::Opened,
    confined: Option<&Confined>,
    port: u16,
) -> ExitCode {
    match confined {
        Some(c) => println!("{}", fsgate_sandbox::describe_agent_plan(&c.plan)),
        // clap requires --confine-agent with --check-sandbox; said anyway.
        None => println!("the agent is not confined: add --confine-agent to see its ruleset"),
    }
    println!(
        "fsgate's MCP server for the agent: 127.0.0.1:{port} (a port drawn at each start), \
         the one part of the gateway the agent can reach; each session gets its own secret"
    );
    // The log was opened (its start record written): close it as `serve --check-sandbox`.
    let mut details = serde_json::Map::new();
    details.insert("reason".into(), "check-sandbox".into());
    startup::shutdown(&opened.gateway, details);
    ExitCode::SUCCESS
}

/// The agent could not be started: why, and under `--confine-agent` what would allow it.
pub(super) fn spawn_failed(
    program: &str,
    err: &std::io::Error,
    confined: Option<&Confined>,
) -> ExitCode {
    let shown = fsgate_base::text::Esc(program);
    let Some(c) = confined else {
        return fail(&format!("cannot start the agent \"{shown}\": {err}"));
    };
    let resolved = c.plan.executable.as_deref();
    let mut msg = format!("cannot start the agent \"{shown}\" under --confine-agent: {err}");
    if err.kind() == std::io::ErrorKind::PermissionDenied
        && let Some(exe) = resolved
    {
        msg.push_str(&format!(
            "\nthe sandbox denied executing {}",
            fsgate_sandbox::denied::advice(exe, &c.plan)
        ));
    }
    msg.push_str(
        "\nsee the whole ruleset with: fsgate acp --confine-agent --check-sandbox -- AGENT...",
    );
    fail(&msg)
}

/// A confined agent that failed of its own accord (an exit code, not fsgate ending it):
/// what its sandbox denied it.
pub(super) fn report_own_failure(
    end: &AgentEnd,
    confined: Option<&Confined>,
    denials: &fsgate_sandbox::denied::Denials,
    stopped_by: &StoppedBy,
) {
    if let Some(c) = confined
        && end.status.code().is_some_and(|code| code != 0)
        && stopped_by.get().is_none()
    {
        report_denials(denials, &c.plan);
    }
}

/// After a confined agent failed: the paths it reported as denied, each with what would
/// allow it, or where to look when it named none.
fn report_denials(denials: &fsgate_sandbox::denied::Denials, plan: &fsgate_sandbox::AgentPlan) {
    let paths = denials.paths();
    if paths.is_empty() {
        fsgate_base::text::eprint_line(
            "fsgate: the confined agent failed; if its sandbox stopped it, see its ruleset \
             with: fsgate acp --confine-agent --check-sandbox -- AGENT...",
        );
        return;
    }
    fsgate_base::text::eprint_line("fsgate: the confined agent failed after being denied:");
    for path in paths {
        fsgate_base::text::eprint_line(&format!(
            "fsgate:   {}",
            fsgate_sandbox::denied::advice(&path, plan)
        ));
    }
}
