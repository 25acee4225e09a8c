//! The doors: each transport only translates wire messages into [`fsgate_gateway::ops::Op`]s
//! and results back.
//!
//! # Layer
//!
//! Owns: the wire: ACP (and the proxy that hosts an agent), MCP on stdio and over
//! HTTP, the WebSocket files channel. Depends on every layer below. Every request goes
//! through [`fsgate_gateway::Gateway::serve`]; a door should only decode and encode.
//! Not yet so, and meant to move into the gateway: the change watcher walks the
//! workspace and asks the policy itself (`ws/watch.rs`), `mcp/roots.rs` appends its own
//! record, and the MCP reference tools shape listings from workspace entries
//! (`mcp/compat/`).

pub mod acp;
pub(crate) mod acp_ask;
pub mod batch;
pub(crate) mod encode;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod hosted;
pub(crate) mod hosted_acp;
pub mod http;
pub mod jsonrpc;
pub mod lines;
pub mod mcp;
pub(crate) mod outbox;
pub mod proxy;
pub(crate) mod questions;
pub(crate) mod raw_json;
pub mod relay;
pub(crate) mod results;
pub mod stdio;
pub mod ws;

/// The built-in default policy with a smaller `limits.max_message_bytes`, for tests of
/// the bounds that follow from it.
#[cfg(test)]
fn policy_with_message_limit(max: usize) -> fsgate_policy::Policy {
    let text = fsgate_policy::DEFAULT_POLICY_TOML.replace(
        "[limits]\n",
        &format!("[limits]\nmax_message_bytes = {max}\n"),
    );
    fsgate_policy::Policy::from_toml(&text, "test")
        .expect("the default policy with a smaller limit")
}
