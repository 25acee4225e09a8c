//! The doors: each transport only translates wire messages into [`crate::ops::Op`]s
//! and results back.

pub mod acp;
pub mod acp_ask;
pub mod batch;
pub mod encode;
pub mod hosted;
pub mod hosted_acp;
pub mod http;
pub mod jsonrpc;
pub mod lines;
pub mod mcp;
pub mod outbox;
pub mod proxy;
pub mod questions;
pub mod raw_json;
pub mod relay;
pub mod results;
pub mod stdio;
pub mod ws;
