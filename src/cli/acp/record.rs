//! The agent's sandbox, ruleset, profile and hosted MCP server as the `agent-start`
//! record shows them.

use super::confine::Confined;
use super::profile::Profile;

/// The agent's sandbox, ruleset and profile as the `agent-start` record shows them.
pub(super) struct Described {
    pub(super) sandbox: serde_json::Value,
    pub(super) plan: serde_json::Value,
    pub(super) profile: serde_json::Value,
}

impl Described {
    /// Also says on stderr what confines the agent, before it starts.
    pub(super) fn announce(confined: Option<&Confined>, profile: Option<&Profile>) -> Described {
        let mut sandbox = serde_json::Value::Null;
        let mut plan = serde_json::Value::Null;
        if let Some(c) = confined {
            if let Some(status) = &c.status {
                fsgate_base::text::eprint_line(&format!("fsgate: agent confined: {status}"));
                sandbox = serde_json::to_value(status).unwrap_or_default();
            }
            plan = crate::cli::wall::plan_record(&c.plan);
        }
        Described {
            sandbox,
            plan,
            profile: profile_record(profile),
        }
    }

    /// The `agent-start` record's details, in their recorded order.
    pub(super) fn start_details(
        self,
        pid: u32,
        command: &[String],
        tree: &fsgate_sandbox::agent_tree::AgentTree,
        hosted: &fsgate_doors::hosted::Hosted,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut details = serde_json::Map::new();
        details.insert("pid".into(), pid.into());
        details.insert("command".into(), serde_json::Value::from(command.to_vec()));
        details.insert("agentSandbox".into(), self.sandbox);
        details.insert("agentPlan".into(), self.plan);
        details.insert("processTree".into(), tree.describe());
        details.insert("agentProfile".into(), self.profile);
        details.insert("mcpServer".into(), hosted_record(hosted));
        details
    }
}

/// The hosted MCP server in the `agent-start` record: where it listens (never a secret).
fn hosted_record(hosted: &fsgate_doors::hosted::Hosted) -> serde_json::Value {
    serde_json::json!({
        "name": fsgate_doors::hosted::SERVER_NAME,
        "url": hosted.url(),
        "port": hosted.port(),
    })
}

/// The profile for the `agent-start` record (null when none applies).
fn profile_record(profile: Option<&Profile>) -> serde_json::Value {
    profile
        .and_then(|p| serde_json::to_value(&p.plan).ok())
        .unwrap_or(serde_json::Value::Null)
}
