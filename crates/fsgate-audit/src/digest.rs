//! What `fsgate audit report` says about a log: its period, sessions, what was read
//! ([`super::reads`]), activity over time, refusals by rule, every change per file and
//! the policies in force, gathered in one pass over the records. Every collection is
//! capped, so a report over any log holds a bounded amount (what is left out is counted
//! and said).
//!
//! This file holds the [`Digest`] and its pass over the records (requests, sessions,
//! refusals, the timeline); `items`: what it is made of (counts, sessions, changes,
//! policies, undo runs); `fields`: reading a record's numbers, the change it describes
//! and what an `undo` record says; `changes`: the changes (from requests, intents and
//! reconciliations); `policies`: the policies in force and their starts and reloads.

mod changes;
mod fields;
pub(crate) mod items;
mod policies;

use std::collections::BTreeMap;

use serde_json::Value;

use super::rows::{MAX_ROWS, text};
use super::{canonical, record};
use fields::{change_of, num, undo_run};
use items::{Change, Counts, PolicyEvent, PolicySpan, Refusals, Session, UndoRun};

/// Changes listed at most (the rest are counted).
pub(crate) const MAX_CHANGES: usize = 20_000;
/// Paths kept per refusal rule as examples.
pub(super) const PATHS_PER_RULE: usize = 5;
/// Intents waiting for their outcome, kept at most (they close within one request).
pub(super) const MAX_OPEN_INTENTS: usize = 10_000;
/// Timeline buckets kept before they are merged into wider ones.
pub(super) const MAX_BUCKETS: usize = 4_096;
/// Bucket widths in seconds, each a multiple of the one before.
pub(crate) const BUCKET_LADDER: &[i64] = &[1, 10, 60, 300, 900, 3_600, 21_600, 86_400, 604_800];

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
