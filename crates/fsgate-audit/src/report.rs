//! What verify reports: verdicts, the first failure, per-file figures, and the
//! human-readable rendering (`--json` serialises the same structures).

use std::path::PathBuf;

use serde::Serialize;

use fsgate_base::text::Esc;

/// What verify concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Everything checked out.
    Intact,
    /// A file could not be read: nothing can be concluded.
    Unreadable,
    /// Something was changed, removed, reordered or cut.
    Tampered,
}

/// The kinds of failure, as named in FORMAT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A line is not a canonical record (or a sidecar line is not well formed).
    Malformed,
    /// A record's content does not match its hash, or does not chain on its predecessor.
    Modified,
    /// Records are missing (a seq jump, or no genesis and no tombstone).
    Missing,
    /// Records are out of order.
    Reordered,
    /// The tail was cut: a torn last line, or a checkpoint beyond the last record.
    Truncated,
    /// A file does not continue the previous one.
    Gap,
    /// The log differs from a checkpoint or the trusted state: rewritten.
    Replaced,
    /// A checkpoint or tombstone signature is missing, foreign or wrong.
    BadSignature,
    /// A file could not be read.
    Unreadable,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// What is wrong.
    pub kind: FailureKind,
    /// The seq concerned (the offending line's seq, or the checkpoint's), if known.
    pub seq: Option<u64>,
    /// The file concerned.
    pub file: Option<String>,
    /// The line (1-based) concerned.
    pub line: Option<u64>,
    /// A sentence for people.
    pub message: String,
}

/// One log file's share of the series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Records in it that verified.
    pub records: u64,
    /// Seq range of those records.
    pub first_seq: Option<u64>,
    /// Last seq.
    pub last_seq: Option<u64>,
    /// First timestamp.
    pub first_ts: Option<String>,
    /// Last timestamp.
    pub last_ts: Option<String>,
    /// Hash of the last record.
    pub last_hash: Option<String>,
}

/// The latest checkpoint that verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointReport {
    /// Its seq.
    pub seq: u64,
    /// When it was taken.
    pub ts: String,
    /// `periodic`, `heartbeat`, `shutdown`, `start`.
    pub kind: String,
    /// `pinned`, `unpinned` or `unsigned`.
    pub signature: String,
}

/// The result for one series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeriesReport {
    /// The active file's path.
    pub log: String,
    /// The log id.
    pub log_id: Option<String>,
    /// The conclusion.
    pub verdict: Verdict,
    /// Records that verified (before the failure, if any).
    pub records: u64,
    /// Seq range validated.
    pub first_seq: Option<u64>,
    /// Last seq validated.
    pub last_seq: Option<u64>,
    /// Time range validated.
    pub first_ts: Option<String>,
    /// Last timestamp validated.
    pub last_ts: Option<String>,
    /// Per file.
    pub files: Vec<FileReport>,
    /// The latest checkpoint.
    pub checkpoint: Option<CheckpointReport>,
    /// The first failure.
    pub error: Option<Failure>,
    /// Things a reviewer should know that do not make the log tampered.
    pub warnings: Vec<String>,
    /// Write-ahead intents that no outcome or reconciliation closed, oldest first.
    pub open_intents: Vec<OpenIntent>,
}

/// An `intent` record left open (audit/FORMAT.md, section 9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenIntent {
    /// The intent's seq.
    pub seq: u64,
    /// The seq of a later log `start` that should have reconciled it (None: the log
    /// ends while it is open: a change in progress, or a crash the next start settles).
    pub passed_start: Option<u64>,
}

/// The result for all the paths given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Worst verdict: tampered, else unreadable, else intact.
    pub verdict: Verdict,
    /// One entry per log found.
    pub series: Vec<SeriesReport>,
    /// Why nothing could be checked at all, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VerifyReport {
    /// The exit code: 0 intact, 1 tampered, 2 unreadable.
    pub fn exit_code(&self) -> i32 {
        match self.verdict {
            Verdict::Intact => 0,
            Verdict::Tampered => 1,
            Verdict::Unreadable => 2,
        }
    }
}

impl SeriesReport {
    /// One line: verdict and the first failure, or what was validated.
    pub fn summary_line(&self) -> String {
        match &self.error {
            Some(f) => format!(
                "{}: {:?} at {}{}: {}",
                self.log,
                self.verdict,
                f.file.as_deref().unwrap_or("?"),
                f.line.map(|l| format!(" line {l}")).unwrap_or_default(),
                f.message
            ),
            None => format!(
                "{}: intact, {} records, seq {}..{}",
                self.log,
                self.records,
                self.first_seq.unwrap_or(0),
                self.last_seq.unwrap_or(0)
            ),
        }
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let word = match self.verdict {
            Verdict::Intact => "INTACT",
            Verdict::Tampered => "TAMPERED",
            Verdict::Unreadable => "UNREADABLE",
        };
        let _ = writeln!(out, "{word}  {}", Esc(&self.log));
        if let Some(f) = &self.error {
            let _ = writeln!(
                out,
                "  first bad record: {}{}{}",
                f.seq.map(|s| format!("seq {s}, ")).unwrap_or_default(),
                Esc(f.file.as_deref().unwrap_or_default()),
                f.line.map(|l| format!(" line {l}")).unwrap_or_default()
            );
            let _ = writeln!(out, "  what is wrong: {:?}: {}", f.kind, Esc(&f.message));
        }
        let _ = writeln!(
            out,
            "  {} {} records checked in {} file(s), seq {}..{}, {} .. {}",
            if self.error.is_some() {
                "before it:"
            } else {
                "validated:"
            },
            self.records,
            self.files.len(),
            self.first_seq.map_or("-".into(), |s| s.to_string()),
            self.last_seq.map_or("-".into(), |s| s.to_string()),
            Esc(self.first_ts.as_deref().unwrap_or("-")),
            Esc(self.last_ts.as_deref().unwrap_or("-")),
        );
        if let Some(c) = &self.checkpoint {
            let _ = writeln!(
                out,
                "  checkpoint: seq {} ({}, {}), signature {}",
                c.seq,
                Esc(&c.kind),
                Esc(&c.ts),
                Esc(&c.signature)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {}", Esc(w));
        }
        out
    }
}

impl VerifyReport {
    /// One line per series.
    pub fn summary_line(&self) -> String {
        match &self.error {
            Some(e) => e.clone(),
            None => self
                .series
                .iter()
                .map(SeriesReport::summary_line)
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        match &self.error {
            Some(e) => format!("UNREADABLE  {}\n", Esc(e)),
            None => self.series.iter().map(SeriesReport::render).collect(),
        }
    }
}
