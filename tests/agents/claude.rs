//! Claude Code through `@agentclientprotocol/claude-agent-acp` (newest on the registry),
//! its model replaced by the fake (`ANTHROPIC_BASE_URL`).

use serde_json::json;

use super::scenario::{Agent, installed, launch, open_session, prompt_step, run};

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

/// Issue 57: a confined agent's shell reads the system's start-up files (here Bash runs
/// `bash -c -l`, which reads /etc/profile and /etc/bash.bashrc): a Bash result does not
/// begin with `Permission denied` on one of them.
#[test]
fn claude_agent_acp_confined_bash_starts_without_an_error() {
    let test = "claude_agent_acp_confined_bash_starts_without_an_error";
    let Some(agent) = agent(test) else { return };
    let (mut ed, fake, _stub) = launch(&agent, true);
    let sid = open_session(&mut ed, &agent);
    let want = json!([{"tool": "Bash", "args": {"command": "echo fsgate-bash-ok", "description": "echo"}}]);
    prompt_step(&mut ed, &agent, &sid, "bash", want);
    let results: Vec<String> = fake
        .main_requests()
        .iter()
        .flat_map(|r| r["received"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["text"].as_str().map(str::to_owned))
        .collect();
    let bash = results
        .iter()
        .find(|t| t.contains("fsgate-bash-ok"))
        .unwrap_or_else(|| {
            panic!(
                "no Bash result reached the model: {results:?}\nstderr:\n{}",
                ed.stderr()
            )
        });
    assert!(
        !bash.contains("Permission denied"),
        "the confined shell could not read its start-up files: {bash}"
    );
}

/// Issue 58: confined, Claude Code's Bash sees the workspace through fsgate's view:
/// `cat .env` refused (the model never gets the secret), the project's test passes,
/// each change is recorded naming its process and backed up, and undone by the view's
/// session.
#[test]
fn claude_agent_acp_confined_bash_works_through_the_view() {
    let test = "claude_agent_acp_confined_bash_works_through_the_view";
    let Some(agent) = agent(test) else { return };
    super::shell::shell_through_the_view(
        &agent,
        ("Bash", Some("default")),
        |command| json!({"command": command, "description": "fsgate test step"}),
    );
}

/// Issue 58: confined, under a policy that lets `.git` in, `git commit` through the
/// agent's shell works on the view and is recorded.
#[test]
fn claude_agent_acp_confined_bash_commits_with_git_through_the_view() {
    let test = "claude_agent_acp_confined_bash_commits_with_git_through_the_view";
    let Some(agent) = agent(test) else { return };
    super::shell::git_commit_through_the_view(
        &agent,
        ("Bash", Some("default")),
        |command| json!({"command": command, "description": "fsgate test step"}),
    );
}

/// Confined, Claude Code's Bash reads app.txt, fsgate's `write_text_file` rewrites it
/// longer, and Bash's next read in the same turn is the whole new content.
#[test]
fn claude_agent_acp_confined_bash_reads_at_once_what_the_file_tool_wrote() {
    let test = "claude_agent_acp_confined_bash_reads_at_once_what_the_file_tool_wrote";
    let Some(agent) = agent(test) else { return };
    super::edit_then_shell::edit_then_shell(
        &agent,
        ("Bash", Some("default")),
        |command| json!({"command": command, "description": "fsgate test step"}),
    );
}
