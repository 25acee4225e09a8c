//! `fsgate audit show`: filter records and print them as a table, JSON lines or CSV.
//! Show reads; it does not verify (use `fsgate audit verify` for that).

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;
use time::OffsetDateTime;

use super::{canonical, record, series};
use crate::text::escape_for_humans;

/// Which records to print.
#[derive(Debug, Clone, Default)]
pub struct ShowFilter {
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
}

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShowFormat {
    /// Aligned columns for a terminal (controls, bidi and invisible characters escaped).
    #[default]
    Table,
    /// The matching lines, unchanged (so they still verify).
    Json,
    /// RFC 4180 CSV with a header row; cells escaped as in the table, and those that a
    /// spreadsheet would run as a formula prefixed with `'`.
    Csv,
}

/// What show saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShowStats {
    /// Records printed.
    pub shown: u64,
    /// Lines that were not JSON objects (skipped).
    pub skipped: u64,
}

impl ShowFilter {
    fn matches(&self, v: &Value) -> bool {
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
            .is_some_and(|d| s("session") != Some(d))
        {
            return false;
        }
        if let Some(g) = &self.path {
            let hit = [s("path"), s("path2")]
                .into_iter()
                .flatten()
                .any(|p| g.is_match(p));
            if !hit {
                return false;
            }
        }
        true
    }
}

const CSV_COLUMNS: &[&str] = &[
    "seq",
    "ts",
    "kind",
    "session",
    "transport",
    "peer",
    "op",
    "path",
    "path2",
    "args",
    "decision",
    "rule",
    "reason",
    "outcome",
    "bytes",
    "sha256",
    "backup",
    "policy_sha256",
    "duration_us",
    "details",
    "hash",
];

/// Prints the matching records of the logs in `paths`, in chain order.
pub fn show(
    paths: &[PathBuf],
    filter: &ShowFilter,
    format: ShowFormat,
    out: &mut dyn Write,
) -> Result<ShowStats, String> {
    let all = series::discover(paths)?;
    let mut stats = ShowStats::default();
    let w = |r: std::io::Result<()>| r.map_err(|e| format!("output: {e}"));
    match format {
        ShowFormat::Table => w(writeln!(
            out,
            "{:>7} {:<27} {:<12} {:<5} {:<9} {:<5} {:<7} {:>9} {:>8}  PATH  RULE",
            "SEQ", "TS", "SESSION", "VIA", "OP", "DEC", "OUTCOME", "BYTES", "US"
        ))?,
        ShowFormat::Csv => w(writeln!(out, "{}", CSV_COLUMNS.join(",")))?,
        ShowFormat::Json => {}
    }
    for s in &all {
        for path in &s.files {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for (_, line) in record::lines(&bytes) {
                let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(line) else {
                    stats.skipped += 1;
                    continue;
                };
                if !filter.matches(&v) {
                    continue;
                }
                stats.shown += 1;
                match format {
                    ShowFormat::Json => {
                        w(out.write_all(line))?;
                        w(out.write_all(b"\n"))?;
                    }
                    ShowFormat::Table => w(writeln!(out, "{}", table_row(&v)))?,
                    ShowFormat::Csv => w(writeln!(out, "{}", csv_row(&v)))?,
                }
            }
        }
    }
    Ok(stats)
}

/// A field as display text (objects as compact JSON).
fn text(v: &Value, k: &str) -> String {
    match v.get(k) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Escapes what an agent chose so that it cannot drive the terminal or read as another
/// name (see [`crate::text`]).
fn clean(s: &str) -> String {
    escape_for_humans(s).into_owned()
}

fn cut(s: &str, n: usize) -> String {
    let s = clean(s);
    if s.chars().count() <= n {
        s
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn table_row(v: &Value) -> String {
    let kind = text(v, "kind");
    // A change's intent and its reconciliation name the operation; their outcome column
    // says which they are (and what the disk showed). Every column is escaped once.
    let (op, outcome) = match kind.as_str() {
        record::KIND_REQUEST => (text(v, "op"), text(v, "outcome")),
        record::KIND_INTENT => (text(v, "op"), "intent".to_string()),
        record::KIND_RECONCILED => (text(v, "op"), text(&v["details"], "found")),
        _ => (format!("[{kind}]"), text(v, "outcome")),
    };
    let mut path = clean(&text(v, "path"));
    let p2 = text(v, "path2");
    if !p2.is_empty() {
        path = format!("{path} -> {}", clean(&p2));
    }
    let rule = clean(&text(v, "rule"));
    format!(
        "{:>7} {:<27} {:<12} {:<5} {:<9} {:<5} {:<7} {:>9} {:>8}  {}  {}",
        clean(&text(v, "seq")),
        cut(&text(v, "ts"), 27),
        cut(&text(v, "session"), 12),
        cut(&text(v, "transport"), 5),
        cut(&op, 9),
        cut(&text(v, "decision"), 5),
        cut(&outcome, 7),
        clean(&text(v, "bytes")),
        clean(&text(v, "duration_us")),
        path,
        rule
    )
}

fn csv_row(v: &Value) -> String {
    CSV_COLUMNS
        .iter()
        .map(|k| csv_cell(&clean(&text(v, k))))
        .collect::<Vec<_>>()
        .join(",")
}

/// Quotes a CSV cell when needed, and defuses formula-looking text.
fn csv_cell(s: &str) -> String {
    let numeric = !s.is_empty()
        && s.trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit());
    let mut s = s.to_owned();
    if !numeric && s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        s.insert(0, '\'');
    }
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_quoted_and_defused() {
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_cell("-32003"), "-32003");
        assert_eq!(csv_cell("-rf"), "'-rf");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(clean("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(clean("doc\u{202e}gnp.sh"), "doc\\u{202e}gnp.sh");
    }
}
