//! fsgate: the filesystem gateway between untrusted agents and a workspace.
//!
//! # Layers
//!
//! The code is a workspace of crates, one per layer, each depending only on those
//! below it (so the compiler refuses a cycle):
//!
//! | crate | owns |
//! |---|---|
//! | `fsgate-base` | workspace-relative paths, escaping for people, the wire error codes |
//! | `fsgate-audit` | the hash-chained audit log: format, writer, verify, proofs, shipping |
//! | `fsgate-workspace` | every filesystem operation beneath one root handle |
//! | `fsgate-backup` | the store of previous versions |
//! | `fsgate-sandbox` | Landlock and seccomp, for the gateway and a hosted agent |
//! | `fsgate-decide` | the decision engine: rules, conditions, `decide`, `explain` |
//! | `fsgate-policy` | the policy file: its sections, compose, lint, diff, its tools |
//! | `fsgate-gateway` | one request: decision, intent, execution, record |
//! | `fsgate-doors` | ACP, the proxy, MCP (stdio and HTTP), WebSocket |
//! | `fsgate-view` | the filesystem view (FUSE) of `fsgate run` and `acp --confine-agent` |
//! | `fsgate` (this crate) | [`startup`], [`undo`], the command line ([`cli`]) |
//!
//! Each crate is named by its own name everywhere (`fsgate_policy::Policy`); this
//! crate re-exports none of them.

#![deny(unsafe_code)]

pub mod cli;
mod peer;
pub mod signals;
pub mod startup;
pub mod undo;
