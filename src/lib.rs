//! fsgate: the filesystem gateway between untrusted agents and a workspace.
//!
//! # Layers
//!
//! The code is a workspace of crates, one per layer, each depending only on those
//! below it (so the compiler refuses a cycle):
//!
//! | crate | owns |
//! |---|---|
//! | `fsgate-base` ([`path`], [`text`], [`error`]) | workspace-relative paths, escaping for people, the wire error codes |
//! | `fsgate-audit` ([`audit`]) | the hash-chained audit log: format, writer, verify, proofs, shipping |
//! | `fsgate-workspace` ([`workspace`]) | every filesystem operation beneath one root handle |
//! | `fsgate-backup` ([`backup`]) | the store of previous versions |
//! | `fsgate-sandbox` ([`sandbox`]) | Landlock and seccomp, for the gateway and a hosted agent |
//! | `fsgate-policy` ([`policy`]) | the policy: load, compile, decide, and its tools |
//! | `fsgate-gateway` ([`gateway`], [`ops`], [`vcs`]) | one request: decision, intent, execution, record |
//! | `fsgate-doors` ([`transport`]) | ACP, the proxy, MCP (stdio and HTTP), WebSocket |
//! | `fsgate` (this crate) | [`startup`], [`undo`], the command line ([`cli`]) |
//!
//! The modules of the lower crates are re-exported here under their old names, so
//! `fsgate::policy::Policy` and the like keep working for the tests and benchmarks.

#![deny(unsafe_code)]

pub use fsgate_audit as audit;
pub use fsgate_backup as backup;
pub use fsgate_base::{error, path, text};
pub use fsgate_decide as decide;
pub use fsgate_doors as transport;
pub use fsgate_gateway as gateway;
pub use fsgate_gateway::{ops, vcs};
pub use fsgate_policy as policy;
pub use fsgate_sandbox as sandbox;
pub use fsgate_workspace as workspace;

pub mod cli;
mod peer;
pub mod signals;
pub mod startup;
pub mod undo;
