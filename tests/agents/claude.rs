//! Claude Code through `@agentclientprotocol/claude-agent-acp` (newest on the registry),
//! its model replaced by the fake (`ANTHROPIC_BASE_URL`).

use super::scenario::{Agent, installed, run};

const BUILTINS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
    "LS",
];

fn agent(test: &str) -> Option<Agent> {
    let bin = installed(test, "claude-agent-acp/node_modules/.bin/claude-agent-acp")?;
    let env = [
        ("ANTHROPIC_BASE_URL", "{STUB}"),
        ("ANTHROPIC_API_KEY", "sk-fsgate-test-not-a-key"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        // Unconfined as root, Claude Code wants to hear it is in a sandbox (the test's
        // temporary directories); confined, the profile says so itself.
        ("IS_SANDBOX", "1"),
    ];
    Some(Agent {
        name: "claude-agent-acp",
        command: vec![bin.into_os_string()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        builtins: BUILTINS,
    })
}

/// Unconfined, with the default profile and the server `fsgate acp` hosts: the model is
/// offered none of Claude Code's own file tools and takes every step through fsgate.
#[test]
fn claude_agent_acp_profile_leaves_the_model_only_fsgates_file_tools() {
    let test = "claude_agent_acp_profile_leaves_the_model_only_fsgates_file_tools";
    let Some(agent) = agent(test) else { return };
    let out = run(&agent, false);
    out.no_builtin_file_tool_offered(agent.name, agent.builtins);
    out.every_step_used_fsgate(agent.name);
    out.every_step_recorded(agent.name);
    out.changes_recorded_with_backups(agent.name);
    out.no_secret_reached_the_model(agent.name);
    out.profile_recorded(agent.name, "claude-agent-acp");
}

/// Issue 30: confined, with the default policy, every step goes through the server
/// `fsgate acp` hosts, into the one audit log.
#[test]
fn claude_agent_acp_confined_takes_every_step_through_the_hosted_server() {
    let test = "claude_agent_acp_confined_takes_every_step_through_the_hosted_server";
    let Some(agent) = agent(test) else { return };
    let out = run(&agent, true);
    out.no_builtin_file_tool_offered(agent.name, agent.builtins);
    out.every_step_used_fsgate(agent.name);
    out.every_step_recorded(agent.name);
    out.changes_recorded_with_backups(agent.name);
    out.no_secret_reached_the_model(agent.name);
    out.profile_recorded(agent.name, "claude-agent-acp");
}
