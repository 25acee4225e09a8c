//! Gemini CLI (`gemini --acp`, newest on the registry), its model replaced by the fake
//! (`GOOGLE_GEMINI_BASE_URL`).

use std::time::{Duration, Instant};

use serde_json::json;

use super::scenario::{Agent, installed, launch, launch_with, open_session, prompt_step, run};

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

/// Issue 57: when the editor closes its input, `fsgate acp -- gemini --acp` ends at once
/// with the agent's status, as the agent does alone. Its MCP client kept the hosted
/// server's stream open (and, once it was closed, waited its backoff to reconnect);
/// fsgate killed it after its grace and exited 124.
#[test]
fn gemini_cli_ends_promptly_when_the_editor_closes_its_input() {
    let test = "gemini_cli_ends_promptly_when_the_editor_closes_its_input";
    let Some(agent) = agent(test) else { return };
    let (mut ed, _fake, _stub) = launch(&agent, false);
    std::fs::write(ed.root.join("a.txt"), "alpha\n").expect("seed");
    let sid = open_session(&mut ed, &agent);
    let a = ed.root.join("a.txt");
    let want = json!([{"mcp": "read_text_file", "args": {"path": a}}]);
    prompt_step(&mut ed, &agent, &sid, "read", want);
    let closed = Instant::now();
    ed.close_stdin();
    // Well inside fsgate's grace (5 s) before it kills an agent that stays.
    let status = ed.wait_exit(Duration::from_millis(2500));
    let took = closed.elapsed();
    let status = status.unwrap_or_else(|| {
        panic!(
            "fsgate acp -- gemini --acp still runs {took:?} after the editor closed its input\nstderr:\n{}",
            ed.stderr()
        )
    });
    assert_eq!(
        status.code(),
        Some(0),
        "the agent's status, after {took:?}\nstderr:\n{}",
        ed.stderr()
    );
    let exit = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "agent-exit")
        .expect("agent-exit record");
    assert!(exit["details"]["stoppedBy"].is_null(), "{exit}");
}

/// Issue 57: with an `ask` rule in fsgate's policy, the editor is asked by fsgate, for
/// the calls the rule covers, and by nobody else: Gemini CLI itself asks nothing.
#[test]
fn gemini_cli_editor_is_asked_only_by_fsgates_ask_rules() {
    let test = "gemini_cli_editor_is_asked_only_by_fsgates_ask_rules";
    let Some(agent) = agent(test) else { return };
    let policy = r#"version = 1

[[rule]]
id = "ask-reviewed"
effect = "ask"
ops = ["read"]
paths = ["reviewed/**"]
reason = "reviewed files are asked about"

[[rule]]
id = "all"
effect = "allow"
ops = ["read", "write", "list", "delete"]
paths = ["**"]
reason = "the workspace"
"#;
    let (mut ed, _fake, _stub) = launch_with(&agent, false, Some(policy));
    std::fs::create_dir(ed.root.join("reviewed")).expect("mkdir");
    std::fs::write(ed.root.join("reviewed/r.txt"), "asked\n").expect("seed");
    std::fs::write(ed.root.join("a.txt"), "free\n").expect("seed");
    let sid = open_session(&mut ed, &agent);
    for (label, rel) in [("free read", "a.txt"), ("asked read", "reviewed/r.txt")] {
        let path = ed.root.join(rel);
        let want = json!([{"mcp": "read_text_file", "args": {"path": path}}]);
        prompt_step(&mut ed, &agent, &sid, label, want);
    }
    let asked: Vec<serde_json::Value> = ed
        .lines()
        .into_iter()
        .filter(|v| v["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:#?}\nstderr:\n{}", ed.stderr());
    assert_eq!(
        asked[0]["params"]["toolCall"]["_meta"]["fsgate"]["rule"], "ask-reviewed",
        "{asked:#?}"
    );
}

/// Issue 58: confined, Gemini CLI's run_shell_command (forkpty: a pseudo-terminal)
/// sees the workspace through fsgate's view: `cat .env` refused (the model never gets
/// the secret), the project's test passes, each change is recorded naming its process
/// and backed up, and undone by the view's session.
#[test]
fn gemini_cli_confined_shell_works_through_the_view() {
    let test = "gemini_cli_confined_shell_works_through_the_view";
    let Some(agent) = agent(test) else { return };
    super::shell::shell_through_the_view(
        &agent,
        ("run_shell_command", None),
        |command| json!({"command": command, "description": "fsgate test step"}),
    );
}

/// Issue 58: confined, under a policy that lets `.git` in, `git commit` through the
/// agent's shell works on the view and is recorded.
#[test]
fn gemini_cli_confined_shell_commits_with_git_through_the_view() {
    let test = "gemini_cli_confined_shell_commits_with_git_through_the_view";
    let Some(agent) = agent(test) else { return };
    super::shell::git_commit_through_the_view(
        &agent,
        ("run_shell_command", None),
        |command| json!({"command": command, "description": "fsgate test step"}),
    );
}
