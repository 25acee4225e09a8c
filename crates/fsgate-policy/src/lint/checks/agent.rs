//! `[agent]`: `agent-protected` (entries reaching the workspace or fsgate's state),
//! `agent-credentials` and `agent-env-credential` (credentials handed to the agent).

use crate::Policy;
use crate::lint::findings::{LintOptions, Severity, Sink};
use fsgate_sandbox::Protected;
use fsgate_sandbox::agent_config::user_home;
use fsgate_sandbox::agent_config::validate::credential_env_name;

/// With `--workspace`, `[agent]` entries reaching the workspace or fsgate's state
/// directory for it (the policy's own files were refused when it loaded).
pub(super) fn agent_reach(policy: &Policy, sink: &mut Sink<'_>, options: &LintOptions) {
    let protect = |path: std::path::PathBuf, label: &str| Protected {
        path,
        label: label.to_owned(),
    };
    let mut protected = Vec::new();
    if let Some(ws) = &options.workspace {
        let ws = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.clone());
        if let Ok(state) = fsgate_backup::workspace_state_dir(&ws) {
            protected.push(protect(
                state,
                "fsgate state directory (default audit log and backups)",
            ));
        }
        protected.push(protect(ws, "workspace"));
    }
    let home = user_home();
    for e in policy
        .agent()
        .protected_violations(&protected, home.as_deref())
    {
        sink.at(
            sink.agent_pos(&e),
            Severity::Error,
            "agent-protected",
            e.to_string(),
            "remove the entry or narrow it: the agent reaches the workspace only through the gateway, and fsgate's own files never",
        );
    }
}

/// `[agent]` grants of well-known credential places, and `env` names that look like
/// credentials other than a model service's key.
pub(super) fn agent_credentials(policy: &Policy, sink: &mut Sink<'_>) {
    let agent = policy.agent();
    if let Some(home) = user_home() {
        for (key, span, place) in agent.credential_grants(&home) {
            let pos =
                span.map_or_else(|| sink.key_pos("agent_system_paths"), |s| sink.pos(s.start));
            sink.at(
                pos,
                Severity::Warning,
                "agent-credentials",
                format!("{key} reaches {place}, where credentials usually live"),
                "grant the directories the agent needs, not a credential store or a directory holding one",
            );
        }
    }
    for (i, name) in agent.env.iter().enumerate() {
        if credential_env_name(name.get_ref()) {
            sink.at(
                sink.pos(name.span().start),
                Severity::Warning,
                "agent-env-credential",
                format!(
                    "agent.env[{i}]: `{}` looks like a credential that is not a model service's key",
                    name.get_ref()
                ),
                "pass only the model API keys the agent needs; cloud and forge tokens let it act as you",
            );
        }
    }
}
