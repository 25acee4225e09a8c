//! `audit show --stats`: requests, refusals by rule, changes by path, per session.
//! Memory is bounded: each table keeps at most [`MAX_KEYS`] names and counts the rest.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::cells::{clean, pad, raw, width};
use crate::record;

/// Most distinct names (rules, paths, sessions, operations) one table keeps.
pub(super) const MAX_KEYS: usize = 10_000;
/// Operations that change the workspace.
const CHANGES: &[&str] = &["write_text_file", "edit_text_file", "mkdir", "rm", "rename"];

/// Counts by name, at most [`MAX_KEYS`] names; records past that are counted in `other`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Capped<T> {
    /// The counts by name.
    pub by: BTreeMap<String, T>,
    /// Records whose name did not fit.
    pub other: u64,
}

impl<T: Default> Capped<T> {
    fn entry(&mut self, k: &str) -> Option<&mut T> {
        if !self.by.contains_key(k) && self.by.len() >= MAX_KEYS {
            self.other += 1;
            return None;
        }
        Some(self.by.entry(k.to_owned()).or_default())
    }
}

/// One session's activity.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Session {
    pub transport: String,
    pub first_ts: String,
    pub last_ts: String,
    pub requests: u64,
    pub refusals: u64,
    pub changes: u64,
}

/// What `--stats` reports.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Stats {
    pub records: u64,
    pub first_ts: String,
    pub last_ts: String,
    pub requests: u64,
    pub allowed: u64,
    pub refused: u64,
    pub failed: u64,
    pub requests_by_op: Capped<u64>,
    pub refusals_by_rule: Capped<u64>,
    pub changes_by_path: Capped<BTreeMap<String, u64>>,
    pub sessions: Capped<Session>,
}

impl Stats {
    /// Counts one record.
    pub(crate) fn add(&mut self, v: &Value) {
        let ts = raw(v, "ts");
        self.records += 1;
        if self.first_ts.is_empty() {
            self.first_ts.clone_from(&ts);
        }
        self.last_ts.clone_from(&ts);
        if raw(v, "kind") != record::KIND_REQUEST {
            return;
        }
        let (op, decision) = (raw(v, "op"), raw(v, "decision"));
        let refused = decision == "deny";
        let change = !refused && raw(v, "outcome") == "ok" && CHANGES.contains(&op.as_str());
        self.requests += 1;
        match (refused, raw(v, "outcome") == "ok") {
            (true, _) => self.refused += 1,
            (false, true) => self.allowed += 1,
            (false, false) => self.failed += 1,
        }
        if let Some(n) = self.requests_by_op.entry(&op) {
            *n += 1;
        }
        if refused {
            let rule = match raw(v, "rule") {
                r if r.is_empty() => format!("({op})"),
                r => r,
            };
            if let Some(n) = self.refusals_by_rule.entry(&rule) {
                *n += 1;
            }
        }
        if change {
            for p in [raw(v, "path"), raw(v, "path2")]
                .iter()
                .filter(|p| !p.is_empty())
            {
                if let Some(ops) = self.changes_by_path.entry(p) {
                    *ops.entry(op.clone()).or_default() += 1;
                }
            }
        }
        if let Some(s) = self.sessions.entry(&raw(v, "session")) {
            if s.first_ts.is_empty() {
                s.first_ts.clone_from(&ts);
                s.transport = raw(v, "transport");
            }
            s.last_ts = ts;
            s.requests += 1;
            s.refusals += u64::from(refused);
            s.changes += u64::from(change);
        }
    }

    /// The report as aligned text, every name escaped.
    pub(crate) fn render(&self) -> String {
        let mut out = format!(
            "records {} from {} to {}\nrequests {}: {} allowed, {} refused, {} failed\n",
            self.records,
            clean(&self.first_ts),
            clean(&self.last_ts),
            self.requests,
            self.allowed,
            self.refused,
            self.failed
        );
        let rows = |m: &Capped<u64>| {
            let mut v: Vec<_> =
                m.by.iter()
                    .map(|(k, n)| vec![n.to_string(), clean(k)])
                    .collect();
            v.sort_by_key(|r| std::cmp::Reverse(r[0].parse::<u64>().unwrap_or(0)));
            v
        };
        section(
            &mut out,
            "REQUESTS BY OP",
            &["COUNT", "OP"],
            rows(&self.requests_by_op),
            self.requests_by_op.other,
        );
        section(
            &mut out,
            "REFUSALS BY RULE",
            &["COUNT", "RULE"],
            rows(&self.refusals_by_rule),
            self.refusals_by_rule.other,
        );
        let changes = self.changes_by_path.by.iter().map(|(p, ops)| {
            let n: u64 = ops.values().sum();
            let ops: Vec<String> = ops
                .iter()
                .map(|(o, n)| format!("{} {n}", clean(o)))
                .collect();
            vec![n.to_string(), clean(p), ops.join(", ")]
        });
        section(
            &mut out,
            "CHANGES BY PATH",
            &["COUNT", "PATH", "OPS"],
            changes.collect(),
            self.changes_by_path.other,
        );
        let sessions = self.sessions.by.iter().map(|(k, s)| {
            let name = if k.is_empty() {
                "(none)".to_owned()
            } else {
                clean(k)
            };
            vec![
                name,
                clean(&s.transport),
                s.requests.to_string(),
                s.refusals.to_string(),
                s.changes.to_string(),
                clean(&s.first_ts),
                clean(&s.last_ts),
            ]
        });
        section(
            &mut out,
            "SESSIONS",
            &[
                "SESSION", "VIA", "REQUESTS", "REFUSED", "CHANGES", "FIRST", "LAST",
            ],
            sessions.collect(),
            self.sessions.other,
        );
        out
    }
}

/// A titled table, columns aligned by display width; numbers right-aligned.
fn section(out: &mut String, title: &str, heads: &[&str], rows: Vec<Vec<String>>, other: u64) {
    out.push_str(&format!("\n{title}\n"));
    let mut w: Vec<usize> = heads.iter().map(|h| width(h)).collect();
    for r in &rows {
        w.iter_mut()
            .zip(r)
            .for_each(|(w, c)| *w = (*w).max(width(c)));
    }
    let number = |c: &String| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit());
    let right: Vec<bool> = (0..heads.len())
        .map(|i| !rows.is_empty() && rows.iter().all(|r| r.get(i).is_some_and(number)))
        .collect();
    let head: Vec<String> = heads.iter().map(|h| (*h).to_owned()).collect();
    for r in std::iter::once(&head).chain(&rows) {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| pad(c, w[i], right[i]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if other > 0 {
        out.push_str(&format!(
            "({other} more records, under names past the first {MAX_KEYS})\n"
        ));
    }
}
