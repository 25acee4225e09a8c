//! Gemini CLI (`gemini --acp`, newest on the registry), its model replaced by the fake
//! (`GOOGLE_GEMINI_BASE_URL`).

use super::scenario::{Agent, installed, run};

const BUILTINS: &[&str] = &[
    "read_file",
    "read_many_files",
    "write_file",
    "replace",
    "glob",
    "grep_search",
    "list_directory",
];

fn agent(test: &str) -> Option<Agent> {
    let bin = installed(test, "gemini-cli/node_modules/.bin/gemini")?;
    let env = [
        ("GOOGLE_GEMINI_BASE_URL", "{STUB}"),
        ("GEMINI_API_KEY", "fsgate-test-not-a-key"),
        // Unconfined, Gemini CLI uses no MCP server (fsgate's included) in a folder the
        // user has not trusted; confined, the profile trusts it (docs/agents.md).
        ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
    ];
    Some(Agent {
        name: "gemini-cli",
        command: vec![bin.into_os_string(), "--acp".into()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        builtins: BUILTINS,
    })
}

/// Unconfined, with the default profile and the server `fsgate acp` hosts: the model is
/// offered none of Gemini CLI's own file tools and takes every step through fsgate, and
/// the profile's allow rule matches fsgate's tools, so the editor is asked nothing
/// (issue 57).
#[test]
fn gemini_cli_profile_leaves_the_model_only_fsgates_file_tools() {
    let test = "gemini_cli_profile_leaves_the_model_only_fsgates_file_tools";
    let Some(agent) = agent(test) else { return };
    let out = run(&agent, false);
    out.no_builtin_file_tool_offered(agent.name, agent.builtins);
    out.editor_never_asked(agent.name);
    out.every_step_used_fsgate(agent.name);
    out.every_step_recorded(agent.name);
    out.changes_recorded_with_backups(agent.name);
    out.no_secret_reached_the_model(agent.name);
    out.profile_recorded(agent.name, "gemini-cli");
}

/// Issue 30: confined, with the default policy, every step goes through the server
/// `fsgate acp` hosts, into the one audit log, and the editor is asked nothing.
#[test]
fn gemini_cli_confined_takes_every_step_through_the_hosted_server() {
    let test = "gemini_cli_confined_takes_every_step_through_the_hosted_server";
    let Some(agent) = agent(test) else { return };
    let out = run(&agent, true);
    out.no_builtin_file_tool_offered(agent.name, agent.builtins);
    out.editor_never_asked(agent.name);
    out.every_step_used_fsgate(agent.name);
    out.every_step_recorded(agent.name);
    out.changes_recorded_with_backups(agent.name);
    out.no_secret_reached_the_model(agent.name);
    out.profile_recorded(agent.name, "gemini-cli");
}
