//! What a report's digest is made of: request counts, sessions, refusals of a rule,
//! changes, policy spans and events, runs of `fsgate undo`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::rows::text;

/// Request counts of one session (or one timeline bucket).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Allowed and answered `ok` (or taking no decision).
    pub ok: u64,
    /// Refused by the policy.
    pub refused: u64,
    /// Allowed but failed (not found, limits, ...).
    pub failed: u64,
}

impl Counts {
    pub(super) fn add(&mut self, v: &Value) {
        if text(v, "decision") == "deny" {
            self.refused += 1;
        } else if matches!(text(v, "outcome"), "ok" | "") {
            self.ok += 1;
        } else {
            self.failed += 1;
        }
    }

    /// All requests.
    pub(crate) fn total(&self) -> u64 {
        self.ok + self.refused + self.failed
    }
}

/// One agent session.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    /// `acp`, `mcp`, `ws`, `cli`.
    pub transport: String,
    /// The first peer seen.
    pub peer: String,
    /// First and last record.
    pub first_ts: String,
    /// Last record.
    pub last_ts: String,
    /// Requests by result.
    pub counts: Counts,
    /// Changes made.
    pub changes: u64,
}

/// The refusals of one rule.
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusals {
    /// How many.
    pub count: u64,
    /// The first reason given.
    pub reason: String,
    /// Operations refused, with counts.
    pub ops: BTreeMap<String, u64>,
    /// The first few distinct paths.
    pub paths: Vec<String>,
    /// When first and last.
    pub first_ts: String,
    /// Last refusal.
    pub last_ts: String,
}

/// One change to a file (from a request record, or a reconciliation after a crash).
#[derive(Debug, Clone, Default)]
pub(crate) struct Change {
    /// Which log (index into the report's logs).
    pub log: usize,
    /// The record's seq.
    pub seq: u64,
    /// When.
    pub ts: String,
    /// Session, transport.
    pub session: String,
    /// The operation (`... (reconciled)` for a crash's reconciliation).
    pub op: String,
    /// The file (a rename's source).
    pub path: String,
    /// The other path of a rename, and whether this file is its target.
    pub other: Option<(String, bool)>,
    /// `ok`, an error code, or what a reconciliation found.
    pub outcome: String,
    /// Bytes written.
    pub bytes: Option<u64>,
    /// SHA-256 of the content written.
    pub sha256: String,
    /// SHA-256 of the content replaced or removed.
    pub old_sha256: String,
    /// The backup holding the previous version.
    pub backup: String,
    /// How many backups the change made (a recursive rm, a rename over a file).
    pub backup_count: u64,
    /// The backup a restore copied back.
    pub restored_from: String,
    /// For a change made by `fsgate undo`: the session it undid (`args.undo`).
    pub undo: String,
    /// Whether verification vouches for this record.
    pub verified: bool,
}

/// A stretch of records made under one policy.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicySpan {
    /// Which log.
    pub log: usize,
    /// The policy's SHA-256.
    pub sha256: String,
    /// First and last seq and time.
    pub first_seq: u64,
    /// Last seq.
    pub last_seq: u64,
    /// First time.
    pub first_ts: String,
    /// Last time.
    pub last_ts: String,
    /// Records made under it.
    pub records: u64,
}

/// A gateway start, reload or rejected reload.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicyEvent {
    /// Its seq and time.
    pub seq: u64,
    /// When.
    pub ts: String,
    /// `start`, `reload`, `reload-rejected`.
    pub kind: String,
    /// The policy file or `<built-in default policy>`.
    pub origin: String,
    /// The hash before (reload) and the hash in force after.
    pub old_sha256: String,
    /// In force afterwards.
    pub new_sha256: String,
    /// Why a reload was rejected; the transport and workspace of a start.
    pub note: String,
}

/// One run of `fsgate undo` (its `undo` record).
#[derive(Debug, Clone, Default)]
pub(crate) struct UndoRun {
    /// The record's seq.
    pub seq: u64,
    /// When it finished.
    pub ts: String,
    /// The session undone (`*`: every session in a time range).
    pub undo: String,
    /// The time range, when one was given.
    pub range: String,
    /// Whether it put back what was changed since too.
    pub force: bool,
    /// Changes undone, already as before, left (changed since), failed.
    pub counts: [u64; 4],
    /// The paths left or failed, with why (as recorded, at most 100 of each).
    pub left: Vec<(String, String)>,
}
