//! fsgate: the filesystem gateway between untrusted agents and a workspace.
//!
//! # Layout
//!
//! Every request passes five gates, each in its own module:
//!
//! - [`transport`]: the doors: `acp` (JSON-RPC on stdio, and the proxy that hosts an
//!   agent, with the MCP server it hosts for the agent: `hosted`), `mcp` (stdio),
//!   `http` (MCP over Streamable HTTP), `ws`. They only translate wire messages into a
//!   [`gateway::Request`] (an [`ops::Op`], or a message that is none) and results back.
//! - [`path`]: request path -> workspace-relative [`path::RelPath`], lexically, refusing
//!   anything that cannot be expressed inside the root.
//! - [`policy`]: the TOML policy, loaded (`raw`), compiled (`compile`) and decided
//!   (`decide`) by a pure function that names the rule behind every decision.
//! - [`workspace`]: the operations, executed through one `cap_std::fs::Dir` on the root.
//! - [`audit`]: the hash-chained audit log; [`backup`]: the backup store.
//!
//! [`gateway`] owns one of each and runs every request through them in
//! [`gateway::Gateway::serve`], recording a change's intent before it touches the
//! workspace; [`sandbox`] applies
//! Landlock to the process once the handles are open; [`undo`] puts back what a session
//! changed, from the log and the backups, through the gateway; [`cli`] is the command line;
//! [`error`] maps every failure to the contract's error codes in one place; [`text`]
//! escapes what an agent chose wherever a person reads it (tables, stderr, logs).

#![deny(unsafe_code)]

pub mod audit;
pub mod backup;
pub mod cli;
pub mod error;
pub mod gateway;
pub mod ops;
pub mod path;
pub mod policy;
pub mod sandbox;
pub mod signals;
pub mod startup;
pub mod text;
pub mod transport;
pub mod undo;
pub mod vcs;
pub mod workspace;
