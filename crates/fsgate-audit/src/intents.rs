//! Write-ahead intents: which changes were announced but never closed by an outcome or a
//! reconciliation, found at start-up so the gateway can look at the disk and say what
//! really happened before it serves anything.
//!
//! A `start` record carries the intents still open when it was written
//! (`details.openIntents`), so the search only reads back to the newest `start`: a crash
//! during reconciliation loses nothing, and older sessions need not be re-read.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::io::Io;
use super::record::{
    ENTRIES_DURABLE, ENTRY_PENDING, KIND_INTENT, KIND_RECONCILED, KIND_REQUEST, KIND_START,
};
use crate::error::AuditError;

/// A change announced by an `intent` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// Seq of the intent record.
    pub seq: u64,
    /// Operation (`write_text_file`, `edit_text_file`, `mkdir`, `rm`, `rename`, `restore`).
    pub op: String,
    /// Workspace-relative path (rename: the source).
    pub path: Option<String>,
    /// Rename target.
    pub path2: Option<String>,
    /// SHA-256 of the content the change writes, where it writes content.
    pub sha256: Option<String>,
    /// SHA-256 of the content it replaces or removes (one file), where there was one.
    pub old_sha256: Option<String>,
    /// The name a write's temporary file has (in `path`'s directory) if it ever has one.
    pub temp_name: Option<String>,
    /// Where `path` really is, when a symlink on the way put the change elsewhere.
    pub real_path: Option<String>,
    /// Where `path2` really is, likewise.
    pub real_path2: Option<String>,
    /// The workspace the paths lie in, when several were served (`args.workspace`).
    pub workspace: Option<String>,
    /// The seq of its outcome, when that outcome was recorded while the change's
    /// directory entry was being synced (`details.entryPending`) and no record since
    /// said the entry was durable: the log says the change was made, the disk may not.
    pub outcome: Option<u64>,
    /// The permission bits a `chmod` sets (`args.mode`, octal).
    pub mode: Option<String>,
    /// The permission bits a `chmod` replaces (`args.oldMode`, octal).
    pub old_mode: Option<String>,
    /// Where the link a `symlink` makes, or a `rename` moves, leads (`args.target`).
    pub target: Option<String>,
    /// Where the link a `rename` replaces led (`args.oldTarget`).
    pub old_target: Option<String>,
    /// The modification time a `utimes` sets (`args.mtime`, nanoseconds).
    pub mtime: Option<i64>,
    /// The modification time a `utimes` replaces (`args.oldMtime`, nanoseconds).
    pub old_mtime: Option<i64>,
}

impl Intent {
    /// From a record (an `intent`, or an entry of a `start` record's `openIntents`).
    fn from_record(v: &Value) -> Option<Intent> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let arg = |k: &str| {
            v.get("args")
                .and_then(|a| a.get(k))
                .or_else(|| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let number = |k: &str| {
            v.get("args")
                .and_then(|a| a.get(k))
                .or_else(|| v.get(k))
                .and_then(Value::as_i64)
        };
        Some(Intent {
            seq: v.get("seq")?.as_u64()?,
            op: text("op")?,
            path: text("path"),
            path2: text("path2"),
            sha256: text("sha256"),
            old_sha256: arg("oldSha256"),
            temp_name: arg("tempName"),
            real_path: arg("realPath"),
            real_path2: arg("realPath2"),
            workspace: arg("workspace"),
            outcome: v.get("outcomeSeq").and_then(Value::as_u64),
            mode: arg("mode"),
            old_mode: arg("oldMode"),
            target: arg("target"),
            old_target: arg("oldTarget"),
            mtime: number("mtime"),
            old_mtime: number("oldMtime"),
        })
    }

    /// The compact form carried in a `start` record's `openIntents`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("seq".into(), json!(self.seq));
        m.insert("op".into(), json!(self.op));
        for (k, v) in [
            ("path", &self.path),
            ("path2", &self.path2),
            ("sha256", &self.sha256),
            ("oldSha256", &self.old_sha256),
            ("tempName", &self.temp_name),
            ("realPath", &self.real_path),
            ("workspace", &self.workspace),
            ("realPath2", &self.real_path2),
            ("mode", &self.mode),
            ("oldMode", &self.old_mode),
            ("target", &self.target),
            ("oldTarget", &self.old_target),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        for (k, v) in [("mtime", self.mtime), ("oldMtime", self.old_mtime)] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        if let Some(seq) = self.outcome {
            m.insert("outcomeSeq".into(), json!(seq));
        }
        Value::Object(m)
    }
}

/// What a record means for write-ahead intents (FORMAT.md, sections 9 and 13).
enum Mark {
    /// An `intent` record: opens its seq.
    Opens,
    /// An outcome (`request` with `args.intent`) or a `reconciled` record
    /// (`details.intent`): closes that seq.
    Closes(u64),
    /// An outcome recorded while its directory entry was synced (`details.entryPending`):
    /// closes that seq once a later record names it in `details.entriesDurable`.
    ClosesOnceDurable(u64),
    /// The log's own `start` (its details have `check`; the gateway's `start` has not).
    LogStart,
    /// Nothing to do with intents.
    Other,
}

fn mark(rec: &Value) -> Mark {
    let closes = |field: &str| rec.get(field)?.get("intent")?.as_u64();
    let pending = rec
        .get("details")
        .and_then(|d| d.get(ENTRY_PENDING))
        .and_then(Value::as_bool)
        == Some(true);
    let closing = match rec.get("kind").and_then(Value::as_str).unwrap_or_default() {
        KIND_INTENT => return Mark::Opens,
        KIND_REQUEST if pending => {
            return closes("args").map_or(Mark::Other, Mark::ClosesOnceDurable);
        }
        KIND_REQUEST => closes("args"),
        KIND_RECONCILED => closes("details"),
        KIND_START if rec.get("details").and_then(|d| d.get("check")).is_some() => {
            return Mark::LogStart;
        }
        _ => None,
    };
    closing.map_or(Mark::Other, Mark::Closes)
}

/// The intents a record says have durable directory entries (`details.entriesDurable`).
fn entries_durable(rec: &Value) -> impl Iterator<Item = u64> + '_ {
    rec.get("details")
        .and_then(|d| d.get(ENTRIES_DURABLE))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
}

/// Follows records in log order and keeps the intents not yet closed.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    /// Neither outcome nor reconciliation yet, and those whose outcome waits for
    /// `entriesDurable` (their `outcome` set).
    open: BTreeMap<u64, Intent>,
    /// A `start` record was seen (the set is then complete from there on).
    pub saw_start: bool,
}

impl Tracker {
    /// Takes one record into account.
    pub(crate) fn observe(&mut self, rec: &Value) {
        for seq in entries_durable(rec) {
            // Only an intent waiting for it: its outcome came first (a lower seq).
            if self.open.get(&seq).is_some_and(|i| i.outcome.is_some()) {
                self.open.remove(&seq);
            }
        }
        match mark(rec) {
            Mark::Opens => {
                if let Some(i) = Intent::from_record(rec) {
                    self.open.insert(i.seq, i);
                }
            }
            Mark::Closes(seq) => {
                self.open.remove(&seq);
            }
            Mark::ClosesOnceDurable(seq) => {
                if let Some(i) = self.open.get_mut(&seq) {
                    i.outcome = rec.get("seq").and_then(Value::as_u64);
                }
            }
            // The log's own start lists what is open at that point.
            Mark::LogStart => {
                self.saw_start = true;
                let carried = rec
                    .get("details")
                    .and_then(|d| d.get("openIntents"))
                    .and_then(Value::as_array);
                self.open = carried
                    .into_iter()
                    .flatten()
                    .filter_map(Intent::from_record)
                    .map(|i| (i.seq, i))
                    .collect();
            }
            Mark::Other => {}
        }
    }

    /// The intents still open, oldest first.
    pub(crate) fn open(self) -> Vec<Intent> {
        self.open.into_values().collect()
    }
}

/// For `fsgate audit verify`: the intents no outcome or reconciliation closed, in a
/// log read from its first record on.
#[derive(Debug, Default)]
pub(crate) struct Unclosed {
    /// Seq -> (what it announced, the seq of a later log start that passed it by).
    open: BTreeMap<u64, (String, Option<u64>)>,
}

impl Unclosed {
    /// Takes one verified record line into account (only lines that can matter are
    /// parsed: a quote inside a string is escaped, so these markers are field names).
    pub(crate) fn observe_line(&mut self, line: &[u8]) {
        let find = |pat: &[u8]| memchr::memmem::find(line, pat).is_some();
        if !(find(b"\"kind\":\"start\"") || find(b"\"intent")) {
            return;
        }
        let Ok(rec) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let seq = rec.get("seq").and_then(Value::as_u64).unwrap_or(0);
        match mark(&rec) {
            Mark::Opens => {
                let op = rec.get("op").and_then(Value::as_str).unwrap_or("?");
                let path = rec.get("path").and_then(Value::as_str).unwrap_or("");
                self.open.insert(seq, (format!("{op} {path:?}"), None));
            }
            Mark::Closes(n) | Mark::ClosesOnceDurable(n) => {
                self.open.remove(&n);
            }
            Mark::LogStart => {
                for (_, passed) in self.open.values_mut() {
                    passed.get_or_insert(seq);
                }
            }
            Mark::Other => {}
        }
    }

    /// The intents left open, for the report.
    pub(crate) fn report(&self) -> Vec<super::report::OpenIntent> {
        self.open
            .iter()
            .map(|(seq, (_, passed))| super::report::OpenIntent {
                seq: *seq,
                passed_start: *passed,
            })
            .collect()
    }

    /// One line per intent left open, for the report's warnings.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.open
            .iter()
            .map(|(seq, (what, passed))| match passed {
                Some(start) => format!(
                    "intent seq {seq} ({what}) was never closed: it has no outcome, and the start at seq {start} did not reconcile it"
                ),
                None => format!(
                    "intent seq {seq} ({what}) has no outcome yet: the change is in progress or was cut off by a crash; the next start reconciles it"
                ),
            })
            .collect()
    }
}

/// The log's own `start` record: its details begin with `check` (sorted keys). A quote
/// inside a string is escaped, so this marker is a field name wherever it is found.
const LOG_START_MARKER: &[u8] = b"\"details\":{\"check\":";

/// The intents of the log at `io` that have neither an outcome nor a reconciliation:
/// replayed from the newest `start` record, which lies in the active file (its bytes as
/// recovery left them: `active`) or in a rotated file before it.
///
/// One file is in memory at a time: a long session spans many rotated files, and the
/// next start must not hold them all. The rotated files are searched newest first for
/// the start (each read, searched and dropped), then read again oldest first from it.
pub(crate) fn pending(io: &Io, active: &[u8]) -> Result<Vec<Intent>, AuditError> {
    use super::recover::rotated::{read_or_empty, rotated_files};
    let has_start = |bytes: &[u8]| memchr::memmem::find(bytes, LOG_START_MARKER).is_some();
    let rotated = rotated_files(io)?;
    let mut first = rotated.len();
    if !has_start(active) {
        first = 0;
        for (i, (_, name)) in rotated.iter().enumerate().rev() {
            if has_start(&read_or_empty(io, name)?) {
                first = i;
                break;
            }
        }
    }
    let mut tracker = Tracker::default();
    let mut from_newest_start = true;
    for (_, name) in &rotated[first..] {
        replay(&mut tracker, &read_or_empty(io, name)?, from_newest_start);
        from_newest_start = false;
    }
    replay(&mut tracker, active, from_newest_start);
    Ok(tracker.open())
}

/// Feeds the records of one file to `tracker`; with `from_newest_start`, only those from
/// its newest log `start` on (that record carries what was open then), or all of them if
/// it has none.
fn replay(tracker: &mut Tracker, bytes: &[u8], from_newest_start: bool) {
    let lines: Vec<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    // Only lines that can open or close an intent are parsed: parsing every line took a
    // start with a full active file (100,000 records) about 0.2 s.
    let parse = |line: &[u8]| serde_json::from_slice::<Value>(line).ok();
    let from = match from_newest_start {
        true => lines.iter().rposition(|l| {
            memchr::memmem::find(l, LOG_START_MARKER).is_some()
                && parse(l).is_some_and(|rec| matches!(mark(&rec), Mark::LogStart))
        }),
        false => None,
    };
    for line in &lines[from.unwrap_or(0)..] {
        let find = |pat: &[u8]| memchr::memmem::find(line, pat).is_some();
        if !(find(b"\"kind\":\"start\"") || find(b"\"intent") || find(b"\"entriesDurable\"")) {
            continue;
        }
        if let Some(rec) = parse(line) {
            tracker.observe(&rec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: Value) -> Value {
        v
    }

    #[test]
    fn outcomes_and_reconciliations_close_intents_and_starts_carry_the_rest() {
        let mut t = Tracker::default();
        t.observe(&rec(
            json!({"seq": 1, "kind": "start", "details": {"check": "new"}}),
        ));
        t.observe(&rec(json!({"seq": 2, "kind": "intent", "op": "write_text_file", "path": "a", "sha256": "00", "args": {"oldSha256": "11"}})));
        t.observe(&rec(
            json!({"seq": 3, "kind": "intent", "op": "rm", "path": "b"}),
        ));
        t.observe(&rec(
            json!({"seq": 4, "kind": "intent", "op": "mkdir", "path": "c"}),
        ));
        t.observe(&rec(
            json!({"seq": 5, "kind": "request", "op": "rm", "args": {"intent": 3}}),
        ));
        t.observe(&rec(
            json!({"seq": 6, "kind": "reconciled", "details": {"intent": 4}}),
        ));
        let open: Vec<Intent> = std::mem::take(&mut t).open();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].seq, 2);
        assert_eq!(open[0].old_sha256.as_deref(), Some("11"));
        // A later start carries it; records before that start no longer matter.
        let mut t = Tracker::default();
        t.observe(&rec(
            json!({"seq": 9, "kind": "intent", "op": "rm", "path": "gone"}),
        ));
        t.observe(&rec(json!({"seq": 10, "kind": "start", "details": {"check": "ok", "openIntents": [open[0].to_value()]}})));
        // The gateway's own start record changes nothing.
        t.observe(&rec(
            json!({"seq": 11, "kind": "start", "details": {"transport": "acp"}}),
        ));
        assert_eq!(t.open(), open);
    }

    /// An outcome written beside its entry's sync keeps its intent open (with the
    /// outcome's seq) until a later record names the intent durable; a name that comes
    /// before the outcome, or names an intent with no such outcome, closes nothing.
    #[test]
    fn an_outcome_beside_its_entry_sync_closes_only_once_named_durable() {
        let mut t = Tracker::default();
        for seq in [2, 4] {
            t.observe(&json!({"seq": seq, "kind": "intent", "op": "write_text_file", "path": "a"}));
        }
        t.observe(&json!({"seq": 5, "kind": "request", "details": {"entriesDurable": [2, 4]}}));
        t.observe(&json!({"seq": 6, "kind": "request", "args": {"intent": 2}, "details": {"entryPending": true}}));
        t.observe(&json!({"seq": 7, "kind": "request", "args": {"intent": 4}, "details": {"entryPending": true}}));
        t.observe(&json!({"seq": 8, "kind": "stop", "details": {"entriesDurable": [4]}}));
        let open = t.open();
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!((open[0].seq, open[0].outcome), (2, Some(6)));
        // Carried by a start as it is, then closed by the reconciliation.
        let mut t = Tracker::default();
        t.observe(&json!({"seq": 9, "kind": "start", "details": {"check": "ok", "openIntents": [open[0].to_value()]}}));
        assert_eq!(std::mem::take(&mut t).open(), open);
        t.observe(&json!({"seq": 9, "kind": "start", "details": {"check": "ok", "openIntents": [open[0].to_value()]}}));
        t.observe(&json!({"seq": 10, "kind": "reconciled", "details": {"intent": 2}}));
        assert!(t.open().is_empty());
    }
}
