//! The doors: each transport only translates wire messages into [`fsgate_gateway::ops::Op`]s
//! and results back.
//!
//! # Layer
//!
//! Owns: the wire: ACP (and the proxy that hosts an agent), MCP on stdio and over
//! HTTP, the WebSocket files channel. Depends on the gateway, the policy (for its
//! `[acp]`, `[ws]`, `[http]` settings), the sandbox (to confine a hosted agent) and the
//! base; not on the audit log, the workspace or the backups. Every request goes through
//! [`fsgate_gateway::Gateway::serve`]; a door decodes and encodes. It writes no audit
//! record: what a door has to record, such as a client's roots, it hands to the gateway
//! ([`Gateway::record`] of a [`Lifecycle::of`] the session). Change events come decided from the gateway's watcher
//! ([`fsgate_gateway::watch`]). A batch of requests is a value the gateway hands out
//! ([`fsgate_gateway::Batch`]), not a convention kept by thread-locals. What the crate
//! graph cannot forbid (the gateway still hands out its audit log, workspace and
//! backups to the binary that starts it, and the base crate parses paths), the test
//! `tests/layers.rs` checks on this crate's source: no door calls them, parses a path or
//! decides policy outside test code.
//!
//! A door is its wire behind one trait, [`door::Door`]: it decodes a request into an
//! operation, a task that composes several, or a message it answers itself once
//! recorded, and encodes an outcome and a refusal. `door::serve` serves a decoded
//! request the same way for every door, alone or in a batch
//! ([`fsgate_gateway::How::batched`]), each operation through the same
//! gateway entry; each door's connection loop only decides where a request runs (a
//! task, its batch thread). ACP (`acp::Acp`, which the proxy's file requests use too),
//! the WebSocket channel ([`ws::protocol::Ws`]) and MCP's tools (`mcp/tools.rs`) are
//! doors this way. An MCP tool may be a task: the reference server's tools compose
//! operations (an edit reads, then writes) and answer in their own words. Every MCP
//! tool call takes one path: the input pump reads it (`mcp/call.rs`, with the SDK's
//! own checks of a stateless request's `_meta`) and `mcp/direct.rs` serves it through
//! `door::serve` and writes its answer; the SDK never sees a `tools/call`.
//!
//! [`Gateway::record`]: fsgate_gateway::Gateway::record
//! [`Lifecycle::of`]: fsgate_gateway::Lifecycle::of

pub mod acp;
pub(crate) mod acp_ask;
pub(crate) mod acp_notes;
pub(crate) mod acp_params;
pub(crate) mod acp_shown;
pub mod batch;
pub mod door;
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
pub mod view_ask;
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

#[cfg(test)]
mod door_specs;
