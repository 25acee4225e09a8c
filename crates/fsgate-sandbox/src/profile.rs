//! Agent profiles (`[agent] profile`): what fsgate knows, from each agent's documented
//! settings, about turning its built-in file tools (read, write, edit, glob, grep, ls)
//! off, so the model uses the gateway's tools from its first turn instead of tools that
//! reach the disk on their own (or fail with EACCES under `--confine-agent`).
//!
//! A profile changes only how the agent is started and what its sessions are opened
//! with: flags added to its command line, variables set in its environment, files in
//! its private scratch directory, and `_meta` merged into `session/new` (and `load`,
//! `resume`, `fork`). It is guidance for the agent, not a wall: the wall is
//! `--confine-agent`. What a profile cannot turn off is said at start (stderr and the
//! `agent-start` record). Which agent a command starts is found in `detect`.

mod detect;

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

#[cfg(test)]
use detect::detect;
pub use detect::{AgentKind, ProfileSetting};

/// The name the gateway's own MCP server has in every session (`mcp__fsgate__*` in
/// Claude Code, `mcp_fsgate_*` in Gemini CLI).
pub const HOSTED_SERVER: &str = "fsgate";

/// Claude Code's built-in tools that reach files on their own.
const CLAUDE_FILE_TOOLS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Glob",
    "Grep",
    "LS",
];

/// Gemini CLI's built-in tools that reach files on their own.
const GEMINI_FILE_TOOLS: &[&str] = &[
    "read_file",
    "read_many_files",
    "write_file",
    "replace",
    "glob",
    "grep_search",
    "list_directory",
];

/// opencode's built-in file tools, as its `permission` setting names them (`edit` covers
/// write, edit and patch; `list` is its ls).
const OPENCODE_FILE_TOOLS: &[&str] = &["read", "edit", "glob", "grep", "list"];

/// What a profile does to an agent's start and sessions, and what it leaves on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfilePlan {
    /// The agent.
    pub name: &'static str,
    /// Whether `auto` found it in the command (else the policy named it).
    pub detected: bool,
    /// Arguments added after the agent's own.
    pub args: Vec<String>,
    /// Variables set in the agent's environment (names and values: no secrets here).
    pub env: Vec<(String, String)>,
    /// Files written into the profile directory before the agent starts: (name, text).
    #[serde(skip)]
    pub files: Vec<(String, String)>,
    /// Merged into the params of every `session/new`, `load`, `resume` and `fork`.
    pub session_meta: Option<Value>,
    /// The built-in file tools turned off.
    pub off: Vec<String>,
    /// What stays on, each with why it matters.
    pub left_on: Vec<String>,
    /// Other facts about how the model meets the gateway's tools.
    pub notes: Vec<String>,
    /// How the profile reaches the agent, for the record.
    pub how: Vec<String>,
}

impl ProfilePlan {
    /// The profile of `kind`. `dir` is the private directory its files go in (granted to
    /// a confined agent); `confined` says whether the agent runs under `--confine-agent`.
    pub fn new(kind: AgentKind, detected: bool, dir: &Path, confined: bool) -> ProfilePlan {
        let mut plan = ProfilePlan {
            name: kind.name(),
            detected,
            args: Vec::new(),
            env: Vec::new(),
            files: Vec::new(),
            session_meta: None,
            off: Vec::new(),
            left_on: Vec::new(),
            notes: Vec::new(),
            how: Vec::new(),
        };
        match kind {
            AgentKind::ClaudeAgentAcp => plan.claude(confined),
            AgentKind::GeminiCli => plan.gemini(dir, confined),
            AgentKind::FastAgent => plan.fast_agent(),
            AgentKind::Opencode => plan.opencode(),
            AgentKind::CodexAcp => plan.codex(),
        }
        plan.left_on.push(shell_note(confined));
        plan
    }

    fn claude(&mut self, confined: bool) {
        self.off = strings(CLAUDE_FILE_TOOLS);
        // The adapter passes `_meta.claudeCode.options` to the Claude Agent SDK: removed
        // tools are not offered to the model; the gateway's tools need no second
        // permission prompt (fsgate's policy and `ask` rules decide them).
        self.session_meta = Some(json!({"claudeCode": {"options": {
            "disallowedTools": CLAUDE_FILE_TOOLS,
            "settings": {"permissions": {"allow": [format!("mcp__{HOSTED_SERVER}")]}},
        }}}));
        self.how.push(
            "session/new _meta.claudeCode.options: disallowedTools, and permissions.allow for \
             the gateway's MCP server"
                .into(),
        );
        if confined {
            // Claude Code refuses to run as root outside a sandbox; confined, it is in one.
            self.env.push(("IS_SANDBOX".into(), "1".into()));
            self.how.push("IS_SANDBOX=1 (the agent is confined)".into());
        }
        self.left_on
            .push("WebFetch and WebSearch (the network, not the workspace)".into());
        self.notes.push(
            "the gateway's tools are deferred: the model loads them with ToolSearch \
             (select:mcp__fsgate__read_text_file) before its first call"
                .into(),
        );
    }

    fn gemini(&mut self, dir: &Path, confined: bool) {
        self.off = strings(GEMINI_FILE_TOOLS);
        let names: Vec<String> = GEMINI_FILE_TOOLS.iter().map(|t| format!("{t:?}")).collect();
        let policy = format!(
            "# Written by fsgate (agent profile gemini-cli): the built-in file tools are off;\n\
             # the gateway's MCP server ({HOSTED_SERVER}) serves files, and its policy and\n\
             # `ask` rules decide each call (no second prompt here). Beside mcpName,\n\
             # toolName is the tool's bare name (\"*\": all of the server's tools).\n\
             [[rule]]\ntoolName = [{}]\ndecision = \"deny\"\npriority = 900\n\n\
             [[rule]]\nmcpName = \"{HOSTED_SERVER}\"\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 800\n",
            names.join(", ")
        );
        let file = "gemini-policy.toml";
        self.files.push((file.into(), policy));
        self.args.push("--policy".into());
        self.args
            .push(dir.join(file).to_string_lossy().into_owned());
        self.how.push(format!(
            "--policy {file}: policy-engine rules denying the built-in file tools and \
             allowing the gateway's"
        ));
        if confined {
            // Confined, the agent cannot read the workspace's own settings, so trusting the
            // folder only lets it use MCP servers and the editor's "allow always" answers.
            self.env
                .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
            self.how
                .push("GEMINI_CLI_TRUST_WORKSPACE=true (the agent is confined)".into());
        } else {
            self.notes.push(
                "in a folder you have not trusted, Gemini CLI uses no MCP server, the \
                 gateway's included: trust it (GEMINI_CLI_TRUST_WORKSPACE=true) or use \
                 --confine-agent, where fsgate trusts it for the agent"
                    .into(),
            );
        }
        self.left_on
            .push("web_fetch and google_web_search (the network, not the workspace)".into());
        self.notes.push(
            "the deny rule matches tools by their bare names, so the gateway's read_file, \
             write_file, glob and list_directory are hidden too: the model uses its \
             read_text_file, write_text_file, edit_file, ls and grep"
                .into(),
        );
    }

    fn fast_agent(&mut self) {
        self.how
            .push("nothing to change: its file tools are ACP fs/*, which fsgate serves".into());
    }

    fn opencode(&mut self) {
        self.off = strings(OPENCODE_FILE_TOOLS);
        let deny: serde_json::Map<String, Value> = OPENCODE_FILE_TOOLS
            .iter()
            .map(|t| ((*t).to_owned(), json!("deny")))
            .collect();
        self.env.push((
            "OPENCODE_PERMISSION".into(),
            Value::Object(deny).to_string(),
        ));
        self.how.push(
            "OPENCODE_PERMISSION: deny for read, edit (write, patch), glob, grep, list".into(),
        );
    }

    fn codex(&mut self) {
        self.left_on.push(
            "apply_patch, and Codex's shell, through which it reads and writes: no documented \
             setting turns them off"
                .into(),
        );
        self.how
            .push("nothing it documents turns its file access off".into());
    }

    /// One line for stderr at start.
    pub fn summary(&self) -> String {
        let how = if self.detected {
            "detected"
        } else {
            "from the policy"
        };
        let off = if self.off.is_empty() {
            "no built-in file tools turned off".to_owned()
        } else {
            format!("built-in {} off", self.off.join(", "))
        };
        let mut line = format!(
            "agent profile {} ({how}): {off}; still on: {}",
            self.name,
            self.left_on.join("; ")
        );
        for note in &self.notes {
            line.push_str("; note: ");
            line.push_str(note);
        }
        line
    }
}

/// What a shell tool can do, which no profile turns off.
fn shell_note(confined: bool) -> String {
    if confined {
        "shell commands the agent runs, inside its confinement (the workspace through fsgate's view, no home)".into()
    } else {
        "shell commands the agent runs, with your rights and outside the gateway \
         (use --confine-agent)"
            .into()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `meta` for a session whose hosted server got another name than [`HOSTED_SERVER`]
/// (the editor listed a server of that name itself): the permission naming the gateway's
/// server names the one fsgate added.
pub fn meta_for_server(meta: &Value, server: &str) -> Value {
    let ours = format!("mcp__{HOSTED_SERVER}");
    match meta {
        Value::String(s) if *s == ours => Value::String(format!("mcp__{server}")),
        Value::Array(items) => items.iter().map(|v| meta_for_server(v, server)).collect(),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), meta_for_server(v, server)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Merges `meta` into the `_meta` of a session request's params: objects key by key,
/// lists appended (the editor's own entries first), anything else the editor's value
/// kept. Returns false when the params are not an object (left alone).
pub fn merge_session_meta(params: &mut Value, meta: &Value) -> bool {
    let Some(obj) = params.as_object_mut() else {
        return false;
    };
    let target = obj.entry("_meta").or_insert_with(|| json!({}));
    if !target.is_object() {
        return false;
    }
    merge(target, meta);
    true
}

fn merge(target: &mut Value, add: &Value) {
    match (target, add) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                match t.get_mut(k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(a)) => {
            for v in a {
                if !t.contains(v) {
                    t.push(v.clone());
                }
            }
        }
        // A scalar, or a different type: the editor's choice stands.
        _ => {}
    }
}

#[cfg(test)]
mod tests;
