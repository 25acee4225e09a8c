//! What the policy in force says of `[ask]`, `[notify]` and `[vcs]`, with their defaults.

use std::time::Duration;

use fsgate_decide::Effect;

use super::{DEFAULT_ASK_TIMEOUT_SECS, MAX_ASK_TIMEOUT_SECS};
use crate::Policy;

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
        self.rules().iter().any(|r| r.effect == Effect::Ask)
    }
}
