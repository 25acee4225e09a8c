//! What a lint finds, how it is reported and located, and the policy a check runs
//! against (`only`).

use std::fmt;
use std::path::PathBuf;

use crate::Policy;
use crate::position::line_col;
use fsgate_base::text::Esc;

/// How bad a finding is. Errors and warnings make `policy check` exit 1; notes do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The policy is wrong or unsafe.
    Error,
    /// Probably not what the author meant.
    Warning,
    /// Worth knowing; not a problem.
    Note,
}

impl Severity {
    /// `error`, `warning`, `note`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One located problem.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// The file as named on the command line.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// How bad it is.
    pub severity: Severity,
    /// A stable name for the check (`dead-rule`, `parse`, ...), for CI filters.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
    /// How to fix it, in one line.
    pub hint: String,
}

/// Escaped: a finding quotes the file name and the policy's own text.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {} (hint: {})",
            Esc(&self.file),
            self.line,
            self.col,
            self.severity.as_str(),
            Esc(&self.message),
            Esc(&self.hint)
        )
    }
}

/// What `policy check` needs beyond the file.
#[derive(Debug, Clone, Default)]
pub struct LintOptions {
    /// The workspace the policy will serve: enables the exact fixed-floor check (the
    /// policy file, `[audit] path` and `[backup] dir` inside it).
    pub workspace: Option<PathBuf>,
}

/// The findings for one file.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LintReport {
    /// Sorted by position.
    pub findings: Vec<Finding>,
    /// The file could not be read or does not load: `policy check` exits 2.
    pub invalid: bool,
}

impl LintReport {
    /// Findings that fail the check (errors and warnings).
    pub(crate) fn failing(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity != Severity::Note)
            .count()
    }
}

/// Collects findings for one file.
pub(crate) struct Sink<'a> {
    pub(crate) file: &'a str,
    pub(crate) src: &'a str,
    pub(crate) out: Vec<Finding>,
    /// Rules an `extends` chain brought in: (rule id, the base file it is written in).
    pub(crate) origins: Vec<(String, String)>,
}

impl Sink<'_> {
    pub(crate) fn at(
        &mut self,
        pos: (usize, usize),
        severity: Severity,
        code: &'static str,
        message: String,
        hint: &str,
    ) {
        let file = self.file.to_string();
        self.push(file, pos, severity, code, message, hint);
    }

    fn push(
        &mut self,
        file: String,
        (line, col): (usize, usize),
        severity: Severity,
        code: &'static str,
        message: String,
        hint: &str,
    ) {
        self.out.push(Finding {
            file,
            line: line.max(1),
            col: col.max(1),
            severity,
            code,
            message,
            hint: hint.to_string(),
        });
    }

    /// A finding at rule `r`: in the base file that wrote it when it was inherited
    /// (its line is that file's), else at its line here.
    pub(crate) fn at_rule(
        &mut self,
        r: &crate::Rule,
        severity: Severity,
        code: &'static str,
        message: String,
        hint: &str,
    ) {
        let (file, line, col) = self.rule_pos(r);
        self.push(file, (line, col), severity, code, message, hint);
    }

    /// Where rule `r` is written: (file, line, column).
    pub(crate) fn rule_pos(&self, r: &crate::Rule) -> (String, usize, usize) {
        match self.origins.iter().find(|(id, _)| *id == r.id) {
            Some((_, file)) => (file.clone(), r.line, 1),
            None => {
                let (line, col) = self.line_pos(r.line);
                (self.file.to_string(), line, col)
            }
        }
    }

    /// Position of a byte offset.
    pub(crate) fn pos(&self, offset: usize) -> (usize, usize) {
        line_col(self.src, offset)
    }

    /// Position of the first non-blank character of `line`.
    pub(crate) fn line_pos(&self, line: usize) -> (usize, usize) {
        let col = self
            .src
            .lines()
            .nth(line.saturating_sub(1))
            .map_or(1, |l| l.len() - l.trim_start().len() + 1);
        (line, col)
    }

    /// Position of an `[agent]` error: its value, else its key's line.
    pub(crate) fn agent_pos(&self, e: &fsgate_sandbox::AgentConfigError) -> (usize, usize) {
        match e.span() {
            Some(span) => self.pos(span.start),
            None => self.key_pos(e.field()),
        }
    }

    /// Position of the first line that sets `key` (`key =`), or 1:1.
    pub(crate) fn key_pos(&self, key: &str) -> (usize, usize) {
        for (i, l) in self.src.lines().enumerate() {
            let t = l.trim_start();
            if t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                return (i + 1, l.len() - t.len() + 1);
            }
        }
        (1, 1)
    }
}

/// A copy of `policy` holding only `rules`: no secret names, no content rules. Lets the
/// real decision function answer "what does this one rule match?".
pub(crate) fn only(policy: &Policy, rules: Vec<crate::Rule>) -> Policy {
    let mut p = policy.clone();
    p.engine = policy.engine().only(rules);
    p.content = None;
    p
}
