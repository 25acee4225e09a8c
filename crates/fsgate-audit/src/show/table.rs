//! The table of `audit show`: one row per record, columns measured in terminal columns,
//! fitted to the width without cutting operation names or rules (paths are cut in the
//! middle, reasons at the end, each with `…`).

use serde_json::Value;

use super::cells::{clean, cut_end, cut_middle, pad, raw, width};
use crate::record;

/// The columns, in order; the last three are PATH, RULE and REASON.
const HEADS: [&str; COLS] = [
    "SEQ", "TS (UTC)", "SESSION", "VIA", "PROCESS", "OP", "DEC", "OUTCOME", "BYTES", "US", "PATH",
    "RULE", "REASON",
];
const COLS: usize = 13;
/// Right-aligned columns (numbers).
const RIGHT: [bool; COLS] = [
    true, false, false, false, false, false, false, false, true, true, false, false, false,
];
/// Widest a session or an outcome is shown (longer ones are cut with `…`).
const MAX_SESSION: usize = 16;
const MAX_OUTCOME: usize = 12;
/// Widest a process (`name[pid]`) is shown.
const MAX_PROCESS: usize = 24;
const SESSION: usize = 2;
const PROCESS: usize = 4;
const OUTCOME: usize = 7;
/// Narrowest a path or a reason is cut to, however narrow the terminal.
const MIN_PATH: usize = 16;
const MIN_REASON: usize = 12;
const PATH: usize = 10;
const RULE: usize = 11;
const REASON: usize = 12;

/// One record's cells, escaped.
pub(super) struct Row(pub [String; COLS]);

impl Row {
    /// The cells of a record.
    pub(super) fn of(v: &Value) -> Row {
        let kind = raw(v, "kind");
        // A change's intent and its reconciliation name the operation; their outcome
        // column says which they are (and what the disk showed).
        let (op, outcome) = match kind.as_str() {
            record::KIND_REQUEST => (raw(v, "op"), outcome_name(&raw(v, "outcome"))),
            record::KIND_INTENT => (raw(v, "op"), "intent".to_string()),
            record::KIND_RECONCILED => (raw(v, "op"), raw(&v["details"], "found")),
            _ => lifecycle(v, &kind),
        };
        let mut path = match raw(v, "op") {
            op if op == crate::coalesce::OP_READS => reads_path(v),
            _ => raw(v, "path"),
        };
        let p2 = raw(v, "path2");
        if !p2.is_empty() {
            path = format!("{path} -> {p2}");
        }
        // A link made: where it leads, as `ls -l` shows it (escaped with the cell).
        if record::ChangeOp::from_name(&raw(v, "op")) == Some(record::ChangeOp::Symlink) {
            path = format!("{path} -> {}", raw(&v["args"], "target"));
        }
        // Several workspaces: the path is relative to the one the record names.
        let workspace = raw(&v["args"], "workspace");
        if !workspace.is_empty() && !path.is_empty() {
            path = format!("{workspace}:{path}");
        }
        let via = match raw(v, "transport") {
            t if t.is_empty() => raw(&v["details"], "transport"),
            t => t,
        };
        let cells = [
            raw(v, "seq"),
            short_ts(&raw(v, "ts")),
            super::cells::column(v, "session"),
            via,
            process(&raw(v, "peer")),
            op,
            raw(v, "decision"),
            outcome,
            raw(v, "bytes"),
            raw(v, "duration_us"),
            path,
            raw(v, "rule"),
            reason(v, &kind),
        ];
        Row(cells.map(|c| clean(&c)))
    }

    fn header() -> Row {
        Row(HEADS.map(str::to_owned))
    }
}

/// The PROCESS cell: `name[pid]` of the process a `peer` of `fsgate run`'s view names
/// (empty for other peers: an address, a stdio peer's `pid=..,uid=..`).
fn process(peer: &str) -> String {
    match crate::process::Process::of(peer) {
        Some(p) if !p.name().is_empty() => p.short(),
        _ => String::new(),
    }
}

/// The PATH cell of a coalesced `reads` record: its first path, and how many more.
fn reads_path(v: &Value) -> String {
    let paths = crate::process::paths_of(v);
    let mut distinct: Vec<&str> = paths.clone();
    distinct.sort_unstable();
    distinct.dedup();
    match (paths.first(), distinct.len()) {
        (None, _) => String::new(),
        (Some(p), 1) => (*p).to_owned(),
        (Some(p), n) => format!("{p} (+{} more)", n - 1),
    }
}

/// How an error code reads (the JSON and CSV keep the number).
fn outcome_name(outcome: &str) -> String {
    use fsgate_base::error::code;
    let name = match outcome.parse::<i64>() {
        Ok(code::REFUSED) => "refused",
        Ok(code::LIMIT) => "limit",
        Ok(code::NOT_FOUND) => "not-found",
        Ok(code::INVALID_PARAMS) => "bad-params",
        Ok(code::METHOD_NOT_FOUND) => "no-method",
        Ok(code::INVALID_REQUEST) => "bad-request",
        Ok(code::PARSE_ERROR) => "bad-json",
        Ok(code::INTERNAL) => "internal",
        _ => return outcome.to_owned(),
    };
    name.to_owned()
}

/// A lifecycle record's OP and OUTCOME. The log writer's own `start` and the gateway's `start` that follows it are told apart.
fn lifecycle(v: &Value, kind: &str) -> (String, String) {
    let d = &v["details"];
    if is_log_open(v, kind) {
        return ("[log-open]".into(), raw(d, "check"));
    }
    (format!("[{kind}]"), raw(v, "outcome"))
}

/// The log writer's `start` (its details say how the log was found: `check`), not the
/// gateway's (policy, sandbox, transport).
fn is_log_open(v: &Value, kind: &str) -> bool {
    kind == record::KIND_START && v["details"].get("check").is_some()
}

/// The REASON cell: the record's reason, or what a lifecycle record says.
fn reason(v: &Value, kind: &str) -> String {
    let r = raw(v, "reason");
    if !r.is_empty() || kind == record::KIND_REQUEST {
        return r;
    }
    let d = &v["details"];
    let short = |k: &str| raw(d, k).chars().take(12).collect::<String>();
    if is_log_open(v, kind) {
        return format!("log opened, fsync {}", raw(d, "fsync"));
    }
    if kind == record::KIND_START {
        let p = &d["policy"];
        let sandbox = raw(&d["sandbox"], "enforcement");
        return format!(
            "policy {} ({}), sandbox {}",
            raw(p, "origin"),
            raw(p, "sha256").chars().take(12).collect::<String>(),
            if sandbox.is_empty() { "-" } else { &sandbox }
        );
    }
    if kind == "reload" {
        return format!("policy {} -> {}", short("old_sha256"), short("new_sha256"));
    }
    ["reason", "error", "found"]
        .iter()
        .map(|k| raw(d, k))
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

/// `2026-01-01T00:00:07.001234Z` as `2026-01-01 00:00:07.001` (the JSON keeps it all).
fn short_ts(ts: &str) -> String {
    match (ts.get(..10), ts.get(11..23)) {
        (Some(d), Some(t)) if ts.as_bytes().get(10) == Some(&b'T') => format!("{d} {t}"),
        _ => ts.to_owned(),
    }
}

/// Column widths: the widest cell seen (sessions and outcomes capped), then PATH and
/// REASON fitted into what the terminal has left.
#[derive(Debug, Clone)]
pub(super) struct Widths {
    cols: [usize; COLS],
    /// Whether PATH and REASON are cut to their columns (not with no width limit).
    cut: bool,
    /// Whether a row names a process (else the PROCESS column is left out).
    process: bool,
}

/// Widths a followed table starts from, as the rows to come are not known yet: the
/// longest operation name, common rules, room for paths and reasons.
const FOLLOW_MIN: [usize; COLS] = [7, 23, 8, 4, 12, 15, 5, 7, 8, 7, 48, 18, 40];

impl Default for Widths {
    fn default() -> Widths {
        Widths {
            cols: HEADS.map(width),
            cut: true,
            process: false,
        }
    }
}

impl Widths {
    /// Widens the columns for `row`.
    pub(super) fn see(&mut self, row: &Row) {
        for (w, cell) in self.cols.iter_mut().zip(&row.0) {
            *w = (*w).max(width(cell));
        }
        self.process |= !row.0[PROCESS].is_empty();
    }

    /// Room for the rows `--follow` will print (wider ones overflow their column, and
    /// paths and reasons are cut as usual).
    pub(super) fn following(mut self) -> Widths {
        for (w, min) in self.cols.iter_mut().zip(FOLLOW_MIN) {
            *w = (*w).max(min);
        }
        self.process = true;
        self
    }

    /// The widths to print with on a terminal `total` columns wide (0: no limit, and
    /// nothing cut but sessions and outcomes).
    pub(super) fn fit(mut self, total: usize) -> Widths {
        self.cols[SESSION] = self.cols[SESSION].min(MAX_SESSION);
        self.cols[PROCESS] = self.cols[PROCESS].min(MAX_PROCESS);
        self.cols[OUTCOME] = self.cols[OUTCOME].min(MAX_OUTCOME);
        if total == 0 {
            self.cut = false;
            return self;
        }
        // One space between columns, two around PATH.
        let fixed: usize = (0..COLS)
            .filter(|&i| i != PATH && i != REASON && self.shows(i))
            .map(|i| self.cols[i])
            .sum();
        let shown = (0..COLS).filter(|&i| self.shows(i)).count();
        let room = total.saturating_sub(fixed + shown + 1);
        let (path, reason) = (self.cols[PATH], self.cols[REASON]);
        if path + reason <= room {
            return self;
        }
        let reason_w = reason.min(room * 2 / 5).max(MIN_REASON);
        self.cols[PATH] = path.min(room.saturating_sub(reason_w).max(MIN_PATH));
        self.cols[REASON] = reason.min(room.saturating_sub(self.cols[PATH]).max(MIN_REASON));
        self
    }

    /// Whether column `i` is printed.
    fn shows(&self, i: usize) -> bool {
        i != PROCESS || self.process
    }

    /// The header line.
    pub(super) fn header(&self) -> String {
        self.line(&Row::header())
    }

    /// One row as a line: cut where it must be, padded to the column widths.
    pub(super) fn line(&self, row: &Row) -> String {
        let mut out = String::new();
        for (i, cell) in row.0.iter().enumerate() {
            if !self.shows(i) {
                continue;
            }
            let w = self.cols[i];
            let text = match i {
                SESSION | PROCESS | OUTCOME => cut_end(cell, w),
                REASON if self.cut => cut_end(cell, w),
                PATH if self.cut => cut_middle(cell, w),
                _ => cell.clone(),
            };
            if i > 0 {
                out.push_str(if i == PATH || i == RULE { "  " } else { " " });
            }
            if i == REASON {
                out.push_str(&text);
            } else {
                out.push_str(&pad(&text, w, RIGHT[i]));
            }
        }
        out.truncate(out.trim_end().len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_shown_with_its_workspace_when_the_record_names_one() {
        let one = serde_json::json!({"kind": "request", "op": "read_text_file", "path": "b.txt"});
        assert_eq!(Row::of(&one).0[PATH], "b.txt");
        let named = serde_json::json!({
            "kind": "request", "op": "rename", "path": "a.txt", "path2": "b.txt",
            "args": {"workspace": "evil"}
        });
        assert_eq!(Row::of(&named).0[PATH], "evil:a.txt -> b.txt");
    }

    #[test]
    fn a_process_is_shown_by_name_and_pid_escaped_and_reads_by_their_paths() {
        let v = serde_json::json!({
            "kind": "request", "op": "reads", "transport": "view",
            "peer": r#"pid 7 ppid 1 exe "/bin/\u001b[2Jcat" argv ["cat"]"#,
            "details": {"reads": {"open": [["a.txt", 1, 3, "ab"]], "stat": [["a.txt", 2], ["b", 1]]}}
        });
        let row = Row::of(&v);
        let shown = &row.0[PROCESS];
        assert!(
            !shown.contains('\u{1b}') && shown.ends_with("cat[7]"),
            "{shown}"
        );
        assert_eq!(row.0[PATH], "a.txt (+1 more)");
    }
}
