//! What `fsgate audit report` says about a log: its period, sessions, what was read
//! ([`super::reads`]), activity over time, refusals by rule, every change per file and
//! the policies in force, gathered in one pass over the records. Every collection is
//! capped, so a report over any log holds a bounded amount (what is left out is counted
//! and said).

use std::collections::BTreeMap;

use serde_json::Value;

use super::rows::{MAX_ROWS, text};
use super::{canonical, record};

/// Changes listed at most (the rest are counted).
pub(crate) const MAX_CHANGES: usize = 20_000;
/// Paths kept per refusal rule as examples.
const PATHS_PER_RULE: usize = 5;
/// Intents waiting for their outcome, kept at most (they close within one request).
const MAX_OPEN_INTENTS: usize = 10_000;
/// Timeline buckets kept before they are merged into wider ones.
const MAX_BUCKETS: usize = 4_096;
/// Bucket widths in seconds, each a multiple of the one before.
pub(crate) const BUCKET_LADDER: &[i64] = &[1, 10, 60, 300, 900, 3_600, 21_600, 86_400, 604_800];

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
    fn add(&mut self, v: &Value) {
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

/// Everything the report shows besides the verdict.
#[derive(Debug, Clone, Default)]
pub(crate) struct Digest {
    /// Records read, and lines that were not records.
    pub records: u64,
    /// Lines that were not JSON objects.
    pub skipped: u64,
    /// The earliest and latest record time.
    pub first_ts: Option<String>,
    /// Latest.
    pub last_ts: Option<String>,
    /// Gateway starts and stops.
    pub starts: u64,
    /// Stops.
    pub stops: u64,
    /// Agent sessions by id.
    pub sessions: BTreeMap<String, Session>,
    /// Sessions not listed (over [`MAX_ROWS`]).
    pub sessions_omitted: u64,
    /// Request counts per bucket start (unix seconds), `bucket` seconds wide.
    pub timeline: BTreeMap<i64, Counts>,
    /// The bucket width in seconds.
    pub bucket: i64,
    /// Refusals by rule.
    pub refusals: BTreeMap<String, Refusals>,
    /// Refusals of rules not listed.
    pub refusals_omitted: u64,
    /// Changes by file.
    pub changes: BTreeMap<String, Vec<Change>>,
    /// Changes not listed.
    pub changes_omitted: u64,
    /// Policies in force, in the order they were.
    pub policies: Vec<PolicySpan>,
    /// Starts and reloads.
    pub policy_events: Vec<PolicyEvent>,
    /// Runs of `fsgate undo`.
    pub undos: Vec<UndoRun>,
    /// What was read, per file and per session, and the secrets refused.
    pub reads: super::reads::Reads,
    /// What each process did (a record's `peer`).
    pub procs: super::procs::Procs,
    /// Intents seen, by (log, seq): what their outcome record does not repeat.
    intents: BTreeMap<(usize, u64), Change>,
    listed_changes: usize,
}

fn num(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

impl Digest {
    /// An empty digest.
    pub(crate) fn new() -> Self {
        Digest {
            bucket: BUCKET_LADDER[0],
            ..Default::default()
        }
    }

    /// Takes in one record of log number `log`; `verified` says whether verification
    /// vouches for it.
    pub(crate) fn observe(&mut self, log: usize, v: &Value, verified: bool) {
        self.records += 1;
        let ts = text(v, "ts");
        if !ts.is_empty() {
            if self.first_ts.as_deref().is_none_or(|f| ts < f) {
                self.first_ts = Some(ts.to_owned());
            }
            if self.last_ts.as_deref().is_none_or(|l| ts > l) {
                self.last_ts = Some(ts.to_owned());
            }
        }
        self.observe_policy(log, v);
        match text(v, "kind") {
            record::KIND_REQUEST => self.observe_request(log, v, verified),
            record::KIND_INTENT => self.observe_intent(log, v),
            record::KIND_RECONCILED => self.observe_reconciled(log, v, verified),
            record::KIND_START => {
                // Each opening of the log writes its own `start` (with `check`), then
                // the gateway one with its policy: count openings once.
                if v["details"].get("check").is_some() {
                    self.starts += 1;
                }
                self.observe_start(v);
            }
            record::KIND_STOP => self.stops += 1,
            "reload" | "reload-rejected" => self.observe_reload(v),
            "undo" if self.undos.len() < MAX_ROWS => self.undos.push(undo_run(v)),
            _ => {}
        }
    }

    fn observe_request(&mut self, log: usize, v: &Value, verified: bool) {
        let ts = text(v, "ts");
        if let Some(t) = canonical::parse_ts(ts) {
            self.count_at(t.unix_timestamp(), v);
        }
        let session = text(v, "session");
        let is_change = crate::record::ChangeOp::from_name(text(v, "op")).is_some()
            && text(v, "decision") == "allow";
        if !session.is_empty() {
            self.observe_session(session, v, is_change);
        }
        if text(v, "decision") == "deny" {
            self.observe_refusal(v);
        }
        self.reads.observe(log, v, verified);
        self.procs.observe(v, is_change);
        if is_change {
            let mut c = change_of(log, v, verified);
            if let Some(intent) =
                num(&v["args"], "intent").and_then(|seq| self.intents.remove(&(log, seq)))
            {
                c.old_sha256 = intent.old_sha256;
                c.backup_count = intent.backup_count;
                if c.backup.is_empty() {
                    c.backup = intent.backup;
                }
            }
            self.add_change(c);
        }
    }

    fn observe_session(&mut self, id: &str, v: &Value, is_change: bool) {
        if !self.sessions.contains_key(id) && self.sessions.len() >= MAX_ROWS {
            self.sessions_omitted += 1;
            return;
        }
        let s = self.sessions.entry(id.to_owned()).or_default();
        if s.first_ts.is_empty() {
            s.transport = text(v, "transport").to_owned();
            s.peer = text(v, "peer").to_owned();
            s.first_ts = text(v, "ts").to_owned();
        }
        s.last_ts = text(v, "ts").to_owned();
        s.counts.add(v);
        s.changes += u64::from(is_change);
    }

    fn observe_refusal(&mut self, v: &Value) {
        // A refused WebSocket upgrade or malformed message may carry no rule.
        let rule = match text(v, "rule") {
            "" => format!("(no rule: {})", text(v, "op")),
            r => r.to_owned(),
        };
        if !self.refusals.contains_key(&rule) && self.refusals.len() >= MAX_ROWS {
            self.refusals_omitted += 1;
            return;
        }
        let r = self.refusals.entry(rule).or_default();
        r.count += 1;
        if r.first_ts.is_empty() {
            r.first_ts = text(v, "ts").to_owned();
            r.reason = text(v, "reason").to_owned();
        }
        r.last_ts = text(v, "ts").to_owned();
        if r.ops.len() < MAX_ROWS || r.ops.contains_key(text(v, "op")) {
            *r.ops.entry(text(v, "op").to_owned()).or_default() += 1;
        }
        let path = text(v, "path");
        if !path.is_empty() && r.paths.len() < PATHS_PER_RULE && !r.paths.iter().any(|p| p == path)
        {
            r.paths.push(path.to_owned());
        }
    }

    fn observe_intent(&mut self, log: usize, v: &Value) {
        if self.intents.len() >= MAX_OPEN_INTENTS {
            self.intents.pop_first();
        }
        let mut c = change_of(log, v, false);
        c.old_sha256 = text(&v["args"], "oldSha256").to_owned();
        c.backup_count = num(&v["args"], "backupCount").unwrap_or(u64::from(!c.backup.is_empty()));
        self.intents.insert((log, c.seq), c);
    }

    fn observe_reconciled(&mut self, log: usize, v: &Value, verified: bool) {
        let d = &v["details"];
        let intent = num(d, "intent").and_then(|seq| self.intents.remove(&(log, seq)));
        let mut c = intent.unwrap_or_default();
        let own = change_of(log, v, verified);
        c.op = format!("{} (reconciled)", own.op);
        c.outcome = text(d, "found").to_owned();
        (c.log, c.seq, c.ts, c.verified) = (log, own.seq, own.ts, verified);
        (c.path, c.other) = (own.path, own.other);
        self.add_change(c);
    }

    fn observe_policy(&mut self, log: usize, v: &Value) {
        let sha = text(v, "policy_sha256");
        if sha.is_empty() {
            return;
        }
        let (seq, ts) = (num(v, "seq").unwrap_or_default(), text(v, "ts"));
        let full = self.policies.len() >= MAX_ROWS;
        match self.policies.last_mut() {
            Some(p) if p.log == log && p.sha256 == sha => {
                (p.last_seq, p.last_ts) = (seq, ts.to_owned());
                p.records += 1;
            }
            _ if full => {}
            _ => self.policies.push(PolicySpan {
                log,
                sha256: sha.to_owned(),
                first_seq: seq,
                last_seq: seq,
                first_ts: ts.to_owned(),
                last_ts: ts.to_owned(),
                records: 1,
            }),
        }
    }

    /// The gateway's `start` (the one naming its policy).
    fn observe_start(&mut self, v: &Value) {
        let d = &v["details"];
        let Some(policy) = d.get("policy") else {
            return;
        };
        let mut e = self.event(v);
        e.origin = text(policy, "origin").to_owned();
        e.new_sha256 = text(policy, "sha256").to_owned();
        e.note = format!(
            "transport {}, workspace {}",
            text(d, "transport"),
            text(d, "workspace")
        );
        self.push_event(e);
    }

    fn observe_reload(&mut self, v: &Value) {
        let d = &v["details"];
        let mut e = self.event(v);
        e.origin = text(d, "policy").to_owned();
        if e.kind == "reload" {
            e.old_sha256 = text(d, "old_sha256").to_owned();
            e.new_sha256 = text(d, "new_sha256").to_owned();
        } else {
            e.new_sha256 = text(d, "in_force_sha256").to_owned();
            e.note = text(d, "error").to_owned();
        }
        self.push_event(e);
    }

    fn event(&self, v: &Value) -> PolicyEvent {
        PolicyEvent {
            seq: num(v, "seq").unwrap_or_default(),
            ts: text(v, "ts").to_owned(),
            kind: text(v, "kind").to_owned(),
            ..Default::default()
        }
    }

    fn push_event(&mut self, e: PolicyEvent) {
        if self.policy_events.len() < MAX_ROWS {
            self.policy_events.push(e);
        }
    }

    fn add_change(&mut self, c: Change) {
        let paths = change_paths(&c);
        for (path, other) in paths {
            if self.listed_changes >= MAX_CHANGES {
                self.changes_omitted += 1;
                continue;
            }
            self.listed_changes += 1;
            let mut c = c.clone();
            c.other = other;
            self.changes.entry(path).or_default().push(c);
        }
    }

    /// Adds a request to its timeline bucket, widening buckets when there are too many.
    fn count_at(&mut self, t: i64, v: &Value) {
        self.timeline
            .entry(t.div_euclid(self.bucket) * self.bucket)
            .or_default()
            .add(v);
        while self.timeline.len() > MAX_BUCKETS {
            let Some(&wider) = BUCKET_LADDER.iter().find(|&&w| w > self.bucket) else {
                break;
            };
            self.timeline = rebucket(&self.timeline, wider);
            self.bucket = wider;
        }
    }
}

/// The counts of `timeline` in buckets `width` seconds wide.
pub(crate) fn rebucket(timeline: &BTreeMap<i64, Counts>, width: i64) -> BTreeMap<i64, Counts> {
    let mut out: BTreeMap<i64, Counts> = BTreeMap::new();
    for (t, c) in timeline {
        let e = out.entry(t.div_euclid(width) * width).or_default();
        e.ok += c.ok;
        e.refused += c.refused;
        e.failed += c.failed;
    }
    out
}

/// The change a request or intent record describes (without what only the intent says).
fn change_of(log: usize, v: &Value, verified: bool) -> Change {
    let args = &v["args"];
    Change {
        log,
        seq: num(v, "seq").unwrap_or_default(),
        ts: text(v, "ts").to_owned(),
        session: text(v, "session").to_owned(),
        op: text(v, "op").to_owned(),
        path: text(v, "path").to_owned(),
        other: v
            .get("path2")
            .and_then(Value::as_str)
            .map(|_| (text(v, "path2").to_owned(), false)),
        outcome: text(v, "outcome").to_owned(),
        bytes: num(v, "bytes"),
        sha256: text(v, "sha256").to_owned(),
        old_sha256: String::new(),
        backup: text(v, "backup").to_owned(),
        backup_count: 0,
        restored_from: text(args, "restoredFrom").to_owned(),
        undo: text(args, "undo").to_owned(),
        verified,
    }
}

/// What an `undo` record says.
fn undo_run(v: &Value) -> UndoRun {
    let d = &v["details"];
    let range = match (text(d, "since"), text(d, "until")) {
        ("", "") => String::new(),
        (s, u) => format!("{s} .. {u}"),
    };
    let count = |k: &str| num(d, k).unwrap_or_default();
    let left = ["skipped", "failed"]
        .iter()
        .filter_map(|k| d.get(*k).and_then(Value::as_array))
        .flatten()
        .map(|e| (text(e, "path").to_owned(), text(e, "why").to_owned()))
        .collect();
    UndoRun {
        seq: num(v, "seq").unwrap_or_default(),
        ts: text(v, "ts").to_owned(),
        undo: text(d, "undo").to_owned(),
        range,
        force: d.get("force").and_then(Value::as_bool).unwrap_or(false),
        counts: [
            count("undoneCount"),
            count("alreadyCount"),
            count("skippedCount"),
            count("failedCount"),
        ],
        left,
    }
}

/// The files a change concerns: its path, and a rename's target (which names the
/// source as its other path).
fn change_paths(c: &Change) -> Vec<(String, Option<(String, bool)>)> {
    let mut out = vec![(c.path.clone(), c.other.clone())];
    if let Some((target, false)) = &c.other {
        out.push((target.clone(), Some((c.path.clone(), true))));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn req(seq: u64, ts: &str, op: &str, decision: &str) -> Value {
        json!({"seq": seq, "ts": ts, "kind": "request", "session": "s", "transport": "acp",
               "op": op, "path": "a.txt", "decision": decision, "outcome": "ok",
               "policy_sha256": "p1"})
    }

    #[test]
    fn the_report_keeps_at_most_a_bounded_piece_of_each_text() {
        let mut d = Digest::new();
        let mut r = req(1, "2026-01-01T00:00:00.000000Z", "read_text_file", "deny");
        r["path"] = json!("p".repeat(2 << 20));
        r["session"] = json!("s".repeat(2 << 20));
        d.observe(0, &r, true);
        let kept = d.refusals.values().flat_map(|r| r.paths.iter());
        assert!(kept.map(String::len).all(|n| n == crate::cut::MAX_WHOLE));
        assert!(d.sessions.keys().all(|k| k.len() == crate::cut::MAX_WHOLE));
    }

    #[test]
    fn a_change_takes_what_its_intent_said_and_a_rename_shows_under_both_names() {
        let mut d = Digest::new();
        let ts = "2026-01-01T00:00:00.000000Z";
        let intent = json!({"seq": 1, "ts": ts, "kind": "intent", "op": "rename",
            "path": "a.txt", "path2": "b.txt", "args": {"oldSha256": "old"},
            "backup": "b.txt/1", "decision": "allow"});
        d.observe(0, &intent, true);
        let mut done = req(2, ts, "rename", "allow");
        done["path2"] = json!("b.txt");
        done["args"] = json!({"intent": 1});
        d.observe(0, &done, true);
        let a = &d.changes["a.txt"][0];
        assert_eq!(
            (a.old_sha256.as_str(), a.backup.as_str()),
            ("old", "b.txt/1")
        );
        assert_eq!(a.other, Some(("b.txt".to_owned(), false)));
        assert_eq!(
            d.changes["b.txt"][0].other,
            Some(("a.txt".to_owned(), true))
        );
        assert!(d.intents.is_empty(), "the intent was closed");
        assert_eq!(d.sessions["s"].changes, 1);
    }

    #[test]
    fn a_reconciled_intent_is_a_change_with_what_the_disk_showed() {
        let mut d = Digest::new();
        let ts = "2026-01-01T00:00:00.000000Z";
        let intent = json!({"seq": 1, "ts": ts, "kind": "intent", "op": "write_text_file",
            "path": "a.txt", "sha256": "new", "args": {"oldSha256": "old"}, "decision": "allow"});
        d.observe(0, &intent, true);
        let rec = json!({"seq": 3, "ts": ts, "kind": "reconciled", "op": "write_text_file",
            "path": "a.txt", "details": {"intent": 1, "found": "applied"}});
        d.observe(0, &rec, false);
        let c = &d.changes["a.txt"][0];
        assert_eq!((c.seq, c.outcome.as_str()), (3, "applied"));
        assert_eq!((c.sha256.as_str(), c.old_sha256.as_str()), ("new", "old"));
        assert!(!c.verified);
    }

    #[test]
    fn changes_are_capped_and_the_rest_counted() {
        let mut d = Digest::new();
        for seq in 0..MAX_CHANGES as u64 + 5 {
            d.observe(
                0,
                &req(seq, "2026-01-01T00:00:00.000000Z", "mkdir", "allow"),
                true,
            );
        }
        assert_eq!(d.changes["a.txt"].len(), MAX_CHANGES);
        assert_eq!(d.changes_omitted, 5);
        assert_eq!(d.policies.len(), 1, "one policy span");
        assert_eq!(d.policies[0].records, MAX_CHANGES as u64 + 5);
    }

    #[test]
    fn the_timeline_widens_its_buckets_and_keeps_every_count() {
        let mut d = Digest::new();
        let start = time::macros::datetime!(2026-01-01 0:00 UTC);
        let n = 5_000u64;
        for i in 0..n {
            let t = start + time::Duration::minutes(i as i64);
            let decision = if i % 10 == 0 { "deny" } else { "allow" };
            d.observe(0, &req(i, &canonical::format_ts(t), "stat", decision), true);
        }
        assert!(d.timeline.len() <= MAX_BUCKETS, "{}", d.timeline.len());
        assert!(d.bucket > 60);
        let total: u64 = d.timeline.values().map(Counts::total).sum();
        let refused: u64 = d.timeline.values().map(|c| c.refused).sum();
        assert_eq!((total, refused), (n, n / 10));
        assert_eq!(d.refusals["(no rule: stat)"].count, n / 10);
    }
}
