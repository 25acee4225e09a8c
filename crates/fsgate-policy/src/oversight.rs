//! The person in the loop: `[ask]` (how long a person has to answer an `ask` rule),
//! `[notify]` (telling the client what the gateway changed) and `[vcs]` (staging
//! changed files in git).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::Policy;

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

impl Policy {
    /// How long a person has to answer an `ask` rule.
    pub fn ask_timeout(&self) -> Duration {
        let secs = self
            .raw()
            .ask
            .as_ref()
            .and_then(|a| a.timeout_secs)
            .unwrap_or(DEFAULT_ASK_TIMEOUT_SECS)
            .clamp(1, MAX_ASK_TIMEOUT_SECS);
        Duration::from_secs(secs)
    }

    /// Whether `fsgate acp` tells the editor of each change it made.
    pub fn notify_acp(&self) -> bool {
        self.raw()
            .notify
            .as_ref()
            .and_then(|n| n.acp)
            .unwrap_or(true)
    }

    /// Whether MCP sends a log line per change (when the client set a level).
    pub fn notify_mcp(&self) -> bool {
        self.raw()
            .notify
            .as_ref()
            .and_then(|n| n.mcp)
            .unwrap_or(true)
    }

    /// Whether changed paths are staged in git.
    pub fn vcs_stage(&self) -> bool {
        self.raw()
            .vcs
            .as_ref()
            .and_then(|v| v.stage)
            .unwrap_or(false)
    }

    /// True if some rule asks a person.
    pub fn has_ask_rules(&self) -> bool {
        self.rules().iter().any(|r| r.effect == super::Effect::Ask)
    }
}
