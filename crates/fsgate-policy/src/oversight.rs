//! The person in the loop: `[ask]` (how long a person has to answer an `ask` rule),
//! `[notify]` (telling the client what the gateway changed) and `[vcs]` (staging
//! changed files in git).

use schemars::JsonSchema;
use serde::Deserialize;

mod in_force;

/// Seconds a person has to answer when no `[ask] timeout_secs` is set.
pub(crate) const DEFAULT_ASK_TIMEOUT_SECS: u64 = 120;
/// The longest wait a policy may set (one hour): a request waiting longer holds its
/// client's slot and its content in memory.
pub(crate) const MAX_ASK_TIMEOUT_SECS: u64 = 3600;

/// `[ask]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskSettings {
    /// Seconds a person has to answer an `ask` rule's question (1 to 3600, default
    /// 120); no answer in time means deny.
    #[serde(default)]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_secs: Option<u64>,
}

/// `[notify]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotifySettings {
    /// Under `fsgate acp`, show each change the gateway made as a session update of
    /// its own (default true).
    #[serde(default)]
    pub acp: Option<bool>,
    /// Under MCP, send a `notifications/message` log line per change when the client
    /// set a logging level (default true).
    #[serde(default)]
    pub mcp: Option<bool>,
}

/// `[vcs]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VcsSettings {
    /// After each change inside a git work tree, update git's index for exactly the
    /// changed paths (default false).
    #[serde(default)]
    pub stage: Option<bool>,
}
