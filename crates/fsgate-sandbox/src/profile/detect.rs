//! Which agent a command line starts (`[agent] profile = "auto"`), or which one the
//! setting names: from the names of its program and arguments, never by running it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[agent] profile`: which agent's settings fsgate applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileSetting {
    /// Detect the agent from its command line (the default).
    #[default]
    Auto,
    /// Apply no profile: the agent starts as given.
    None,
    /// Claude Code through `@agentclientprotocol/claude-agent-acp`.
    ClaudeAgentAcp,
    /// Gemini CLI (`gemini --acp`).
    GeminiCli,
    /// fast-agent (`fast-agent-acp`).
    FastAgent,
    /// opencode (`opencode acp`).
    Opencode,
    /// Codex through Zed's ACP adapter (`codex-acp`).
    CodexAcp,
}

/// An agent fsgate has a profile for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// `@agentclientprotocol/claude-agent-acp`.
    ClaudeAgentAcp,
    /// `@google/gemini-cli`.
    GeminiCli,
    /// `fast-agent-mcp`.
    FastAgent,
    /// `opencode-ai`.
    Opencode,
    /// `@zed-industries/codex-acp`.
    CodexAcp,
}

impl AgentKind {
    /// The profile's name, as `[agent] profile` spells it.
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::ClaudeAgentAcp => "claude-agent-acp",
            AgentKind::GeminiCli => "gemini-cli",
            AgentKind::FastAgent => "fast-agent",
            AgentKind::Opencode => "opencode",
            AgentKind::CodexAcp => "codex-acp",
        }
    }
}

impl ProfileSetting {
    /// The agent this setting names, detecting it from the command under `auto`.
    pub fn resolve(self, program: &str, args: &[String]) -> Option<AgentKind> {
        match self {
            ProfileSetting::Auto => detect(program, args),
            ProfileSetting::None => None,
            ProfileSetting::ClaudeAgentAcp => Some(AgentKind::ClaudeAgentAcp),
            ProfileSetting::GeminiCli => Some(AgentKind::GeminiCli),
            ProfileSetting::FastAgent => Some(AgentKind::FastAgent),
            ProfileSetting::Opencode => Some(AgentKind::Opencode),
            ProfileSetting::CodexAcp => Some(AgentKind::CodexAcp),
        }
    }
}

/// The agent a command line starts, from the names of its program and arguments: an
/// installed binary (`claude-agent-acp`, `gemini`, `fast-agent-acp`, `opencode`,
/// `codex-acp`), a script inside such a package (`node .../gemini-cli/bundle/gemini.js`),
/// or a package name given to a runner (`npx @google/gemini-cli`). The first word that
/// names an agent decides.
pub(crate) fn detect(program: &str, args: &[String]) -> Option<AgentKind> {
    // A bare `gemini` counts only with its ACP flag (a path may end in `gemini`).
    let acp = args
        .iter()
        .any(|a| a == "--acp" || a == "--experimental-acp");
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .find_map(|w| word_kind(w, acp))
}

/// The agent one word of a command line names, if any.
fn word_kind(word: &str, acp_flag: bool) -> Option<AgentKind> {
    // `@scope/name@1.2.3` names the package `name`; a path names each of its parts.
    let parts: Vec<&str> = word
        .split('/')
        .map(|p| p.split('@').find(|s| !s.is_empty()).unwrap_or(p))
        .collect();
    let base = parts.last().copied().unwrap_or(word);
    let base = base.strip_suffix(".js").unwrap_or(base);
    let named = |names: &[&str]| parts.iter().any(|p| names.contains(p));
    if named(&["claude-agent-acp"]) {
        Some(AgentKind::ClaudeAgentAcp)
    } else if named(&["gemini-cli"]) || (acp_flag && base == "gemini") {
        Some(AgentKind::GeminiCli)
    } else if base == "fast-agent-acp" || named(&["fast-agent-mcp"]) {
        Some(AgentKind::FastAgent)
    } else if base == "opencode" || named(&["opencode-ai"]) {
        Some(AgentKind::Opencode)
    } else if named(&["codex-acp"]) {
        Some(AgentKind::CodexAcp)
    } else {
        None
    }
}
