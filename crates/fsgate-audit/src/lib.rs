//! Hash-chained, group-committed, checkpointed audit log (issue 3, points 1-10).
//!
//! # Layer
//!
//! Owns: the audit log's format, writer, verification, proofs, shipping and the
//! `audit` commands. Depends on `fsgate-base` only, and on no async runtime: a reviewer
//! can build and test it alone (`cargo test -p fsgate-audit`). May not touch: the
//! workspace, the policy, the backups (the gateway hands it finished records).
//!
//! # Layout
//!
//! - `config`: the `[audit]` policy section ([`AuditSettings`]).
//! - `error`: what can go wrong opening or writing the log ([`AuditError`]).
//! - [`record`]: what the gateway reports per request ([`AuditEvent`]) and how a record
//!   line is sealed into the chain (`seal`); [`canonical`]: the canonical JSON encoding
//!   that the hash covers (specified in `audit/FORMAT.md`); [`line`](mod@line): checking
//!   one line, and a log's bytes split into lines; [`cut`]: long strings (most of them an agent's) cut to a head, with their
//!   length and digest in `details.cut`, so that no request can grow a record unboundedly.
//! - `writer`: [`AuditLog`], the writer shared by every request thread: chaining, group
//!   commit (leader/follower, no thread of its own), fail-closed rollback; `io`: its
//!   files (append, sync, repair, rotation, disk reservation, checkpoint writing).
//! - `recover`: the start-up tail check (torn line, broken chain, checkpoint mismatch).
//! - `checkpoint`: signed head checkpoints and their sinks; `signed`: signing and
//!   checking sidecar objects (checkpoints, tombstones); `keys`: Ed25519 key files.
//! - [`series`]: which files form a log (active, rotated, sidecars) and their names.
//! - [`ship`]: shipping every record to syslog collectors (`[audit] ship`), and the
//!   `ship-status` / `import-syslog` commands.
//! - [`verify`] (with `report`), `show`, [`prune`] (its tombstone line in
//!   `tombstone`): the offline tools behind `fsgate audit ...`; [`cli`]: their clap
//!   definitions and exit codes.
//!
//! # Threads and Landlock
//!
//! Appending needs no thread: the first appender that finds no write in flight becomes
//! the leader and writes (and fsyncs) everything queued so far on behalf of all waiting
//! appenders, goes on with what queued up meanwhile (up to 8 batches), then hands over.
//! The only thread is the heartbeat (idle checkpoints, timed syncs in `batch` mode),
//! spawned by [`AuditLog::start`], which the gateway calls after Landlock has confined
//! the process so that the thread inherits the confinement.

pub mod canonical;
mod chain;
pub(crate) mod checkpoint;
pub mod cli;
pub mod coalesce;
pub(crate) mod config;
pub mod cut;
pub(crate) mod digest;
mod error;
pub mod growth;
pub(crate) mod html;
pub(crate) mod intents;
mod io;
pub(crate) mod keys;
pub mod line;
pub(crate) mod locate;
pub(crate) mod merkle;
pub(crate) mod note;
pub(crate) mod process;
pub(crate) mod procs;
pub(crate) mod proof;
mod proof_cli;
pub mod prune;
pub(crate) mod reads;
pub mod record;
pub(crate) mod recover;
pub(crate) mod report;
pub(crate) mod rows;
mod seal;
pub mod series;
pub mod ship;
pub(crate) mod show;
pub(crate) mod signed;
mod tombstone;
mod tree;
pub mod verify;
mod verify_run;
pub(crate) mod writer;

#[cfg(test)]
mod tests;

pub use config::{AuditSettings, FsyncMode};
pub use error::AuditError;
pub use intents::Intent;
pub use io::Fault;
pub use record::{
    AuditEvent, ChangeOp, ENTRIES_DURABLE, ENTRY_PENDING, KIND_INTENT, KIND_RECONCILED, Receipt,
};
pub use writer::{AuditLog, OpenOptions, Ticket};

use std::path::PathBuf;

/// Whether the log at `path` (its active file or its directory) has signed checkpoints:
/// then anything appended without the key would stop the gateway at its next start.
pub fn checkpoints_are_signed(path: &std::path::Path) -> bool {
    series::discover(&[path.to_path_buf()])
        .ok()
        .into_iter()
        .flatten()
        .any(|s| {
            std::fs::read_to_string(s.checkpoint_path())
                .ok()
                .and_then(|t| checkpoint::Checkpoint::parse(t.trim()).ok())
                .is_some_and(|c| c.obj.contains_key("sig"))
        })
}

/// How many sibling chains a workspace's default log directory may hold: one per
/// gateway running on it at once.
pub(crate) const MAX_SIBLING_CHAINS: u32 = 64;

/// The name of the `n`th chain in a default log directory: `audit.jsonl`, then
/// `audit-2.jsonl`, `audit-3.jsonl`, ... (each base name has its own rotated files and
/// sidecars, `audit-2.jsonl.000000000001`, `audit-2.jsonl.lock`, never another's).
pub(crate) fn sibling_chain_name(n: u32) -> String {
    if n <= 1 {
        "audit.jsonl".to_owned()
    } else {
        format!("audit-{n}.jsonl")
    }
}

/// Opens the first chain in `dir` that no other live process holds, so that several
/// gateways can serve one workspace with the default log, each appending to its own
/// chain. Only for the default log: a log the operator named is refused when locked.
pub fn open_first_free(
    dir: &std::path::Path,
    settings: &AuditSettings,
    policy_sha256: &str,
    opts: OpenOptions,
) -> Result<(PathBuf, AuditLog), AuditError> {
    let mut last = None;
    for n in 1..=MAX_SIBLING_CHAINS {
        let path = dir.join(sibling_chain_name(n));
        match AuditLog::open(&path, settings, policy_sha256, opts) {
            Ok(log) => return Ok((path, log)),
            Err(e @ AuditError::Locked { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(AuditError::Closed))
}
