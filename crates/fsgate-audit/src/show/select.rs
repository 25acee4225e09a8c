//! Which records a show selects, what it saw, and reading one record or file.

use std::path::Path;

use serde_json::Value;
use time::OffsetDateTime;

use super::lines::LineReader;
use crate::canonical;

/// Which records to print.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShowFilter {
    /// Records at or after this time.
    pub since: Option<OffsetDateTime>,
    /// Records strictly before this time.
    pub until: Option<OffsetDateTime>,
    /// This operation (or, for lifecycle records, this kind).
    pub op: Option<String>,
    /// `allow` or `deny`.
    pub decision: Option<String>,
    /// A glob matched against `path` and `path2`.
    pub path: Option<globset::GlobMatcher>,
    /// This session.
    pub session: Option<String>,
    /// The process with this pid (the record's `peer`).
    pub pid: Option<u32>,
    /// The process running this command: its executable's file name or path, or its
    /// command name.
    pub exe: Option<String>,
}

/// What show saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ShowStats {
    /// Records printed.
    pub shown: u64,
    /// Lines that were not JSON objects (skipped).
    pub skipped: u64,
    /// The seq of the last record read (shown or not).
    pub last_seq: Option<u64>,
}

impl ShowFilter {
    pub(super) fn matches(&self, v: &Value) -> bool {
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        if self.since.is_some() || self.until.is_some() {
            let Some(ts) = s("ts").and_then(canonical::parse_ts) else {
                return false;
            };
            if self.since.is_some_and(|t| ts < t) || self.until.is_some_and(|t| ts >= t) {
                return false;
            }
        }
        if let Some(op) = &self.op {
            let this = s("op").or_else(|| s("kind"));
            if this != Some(op.as_str()) {
                return false;
            }
        }
        if self
            .decision
            .as_deref()
            .is_some_and(|d| s("decision") != Some(d))
        {
            return false;
        }
        if self
            .session
            .as_deref()
            .is_some_and(|d| super::cells::session_of(v) != Some(d))
        {
            return false;
        }
        if let Some(g) = &self.path {
            // A coalesced `reads` record matches by any path it names.
            let hit = crate::process::paths_of(v)
                .into_iter()
                .any(|p| g.is_match(p));
            if !hit {
                return false;
            }
        }
        self.matches_process(s("peer").unwrap_or_default())
    }

    /// `--pid` and `--exe`.
    fn matches_process(&self, peer: &str) -> bool {
        if self.pid.is_none() && self.exe.is_none() {
            return true;
        }
        let Some(p) = crate::process::Process::of(peer) else {
            return false;
        };
        self.pid.is_none_or(|pid| p.pid == Some(pid))
            && self.exe.as_deref().is_none_or(|e| p.is_command(e))
    }
}

pub(super) fn open(path: &Path) -> Result<LineReader, String> {
    LineReader::open(path).map_err(|e| format!("{}: {e}", fsgate_base::text::EscPath(path)))
}

/// Takes each matching record: its line as written, and parsed.
pub(super) type OnRecord<'a> = dyn FnMut(&[u8], &Value) -> Result<(), String> + 'a;

/// A line as a record, if it is a JSON object.
pub(super) fn record_of(line: &[u8]) -> Option<Value> {
    match serde_json::from_slice::<Value>(line) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}
