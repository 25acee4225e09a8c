//! Scanning a text with a policy's content rules: the keyword prefilter picks the
//! rules to run, each rule's regex (a built-in one compiled on first use, see `rule`)
//! finds candidates, and entropy, allowlists and `required` rules keep the findings.

use regex::bytes::Regex as BytesRegex;

use super::rule::builtin_regex;
use super::zeros::without_zeros;
use super::{
    CRule, ContentHit, ContentScanner, ContentTraceStep, Finding, Keywords, PACKED_WINDOW, Pattern,
    occurring_overlapping, shannon_entropy,
};
use fsgate_base::path::RelPath;

impl ContentScanner {
    /// The first finding in `text` (rules in load order), if any.
    pub fn scan(&self, path: &RelPath, text: &[u8]) -> Option<ContentHit> {
        let first = |t: &[u8]| {
            self.run(Some(path.as_str()), t, true, None)
                .into_iter()
                .next()
        };
        first(text).or_else(|| without_zeros(text).and_then(|t| first(&t)))
    }

    /// [`scan`](Self::scan) of a text whose SHA-256 is `digest`: a text found clean at
    /// `path` before is not scanned again (see `clean`).
    pub fn scan_digested(
        &self,
        path: &RelPath,
        text: &[u8],
        digest: &[u8; 32],
    ) -> Option<ContentHit> {
        if self.clean.contains(path.as_str(), digest) {
            return None;
        }
        let hit = self.scan(path, text);
        if hit.is_none() {
            self.clean.insert(path.as_str(), *digest);
        }
        hit
    }

    /// Every finding in `text`; text holding zero bytes (UTF-16, UTF-32) is scanned
    /// without them too (a finding's line and column are then those of the text
    /// scanned).
    pub fn scan_all(&self, path: &RelPath, text: &[u8]) -> Vec<ContentHit> {
        let mut hits = self.run(Some(path.as_str()), text, false, None);
        if let Some(other) = without_zeros(text) {
            hits.extend(self.run(Some(path.as_str()), &other, false, None));
        }
        hits
    }

    /// Every reportable rule with what happened to it on `text`, for `policy explain`;
    /// then, if it holds zero bytes, on the text without them (notes marked so).
    pub fn explain(&self, path: &RelPath, text: &[u8]) -> Vec<ContentTraceStep> {
        let mut trace = Vec::new();
        self.run(Some(path.as_str()), text, false, Some(&mut trace));
        if let Some(other) = without_zeros(text) {
            let mut more = Vec::new();
            self.run(Some(path.as_str()), &other, false, Some(&mut more));
            trace.extend(more.into_iter().map(|mut step| {
                step.note = format!("its zero bytes left out: {}", step.note);
                step
            }));
        }
        trace
    }

    /// Which rules the keyword prefilter lets through for `text`.
    pub(super) fn candidates(&self, text: &[u8]) -> Vec<bool> {
        let mut cand: Vec<bool> = self.rules.iter().map(|r| r.keywords.is_empty()).collect();
        let keywords = match self.prefilter.built() {
            Ok(k) => k,
            // Without the prefilter every rule runs (slower, nothing missed).
            Err(_) => return vec![true; self.rules.len()],
        };
        if let Some(Keywords { ac, packed }) = keywords {
            let seen = match packed {
                Some(p) => p.occurring(text, PACKED_WINDOW, ac),
                None => occurring_overlapping(ac, text, self.keyword_rules.len()),
            };
            for (k, _) in seen.iter().enumerate().filter(|(_, s)| **s) {
                for &r in &self.keyword_rules[k] {
                    cand[r] = true;
                }
            }
        }
        cand
    }

    fn run(
        &self,
        path: Option<&str>,
        text: &[u8],
        first_only: bool,
        mut trace: Option<&mut Vec<ContentTraceStep>>,
    ) -> Vec<ContentHit> {
        let cand = self.candidates(text);
        let mut hits = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.skip_report {
                continue;
            }
            if !cand[i] {
                if let Some(t) = trace.as_deref_mut() {
                    t.push(ContentTraceStep {
                        rule: rule.id.clone(),
                        hit: false,
                        note: format!(
                            "skipped: content contains none of the keywords {:?}",
                            rule.keywords
                        ),
                    });
                }
                continue;
            }
            let mut notes = trace.is_some().then(Vec::new);
            let found = self.detect(i, path, text, notes.as_mut());
            if let Some(t) = trace.as_deref_mut() {
                let mut note = notes.unwrap_or_default().join("; ");
                if let Some(f) = found.first() {
                    let at = if f.line == 0 {
                        "the file's path".to_string()
                    } else {
                        format!("line {}, column {}", f.line, f.column)
                    };
                    note = if note.is_empty() {
                        format!("FINDING at {at}")
                    } else {
                        format!("FINDING at {at} ({note})")
                    };
                } else if note.is_empty() {
                    note = "regex does not match".into();
                }
                t.push(ContentTraceStep {
                    rule: rule.id.clone(),
                    hit: !found.is_empty(),
                    note,
                });
            }
            for f in found {
                hits.push(ContentHit {
                    rule_id: rule.id.clone(),
                    line: f.line,
                    column: f.column,
                });
                if first_only {
                    return hits;
                }
            }
        }
        hits
    }

    /// Findings of rule `ri`, composite (`required`) rules resolved.
    pub(super) fn detect(
        &self,
        ri: usize,
        path: Option<&str>,
        text: &[u8],
        mut notes: Option<&mut Vec<String>>,
    ) -> Vec<Finding> {
        let primary = self.detect_one(ri, path, text, notes.as_deref_mut());
        let rule = &self.rules[ri];
        if rule.required.is_empty() || primary.is_empty() {
            return primary;
        }
        let parts: Vec<Vec<Finding>> = rule
            .required
            .iter()
            .map(|req| self.detect_one(req.rule, path, text, None))
            .collect();
        let kept: Vec<Finding> = primary
            .into_iter()
            .filter(|p| {
                rule.required.iter().zip(&parts).all(|(req, found)| {
                    found.iter().any(|f| {
                        req.within_lines
                            .is_none_or(|n| p.line.abs_diff(f.line) <= n)
                            && req
                                .within_columns
                                .is_none_or(|n| p.column.abs_diff(f.column) <= n)
                    })
                })
            })
            .collect();
        if kept.is_empty()
            && let Some(n) = notes
        {
            n.push("matched, but its required rules did not match nearby".into());
        }
        kept
    }

    /// Findings of one rule on its own (gitleaks' `detectRule` without required rules).
    /// `path: None` (true/false-positive checks) ignores the rule's path condition.
    fn detect_one(
        &self,
        ri: usize,
        path: Option<&str>,
        text: &[u8],
        mut notes: Option<&mut Vec<String>>,
    ) -> Vec<Finding> {
        let rule = &self.rules[ri];
        match self.gate(rule, path, notes.as_deref_mut()) {
            Gate::Scan(re) => self.matches(rule, re, (path, text), notes),
            Gate::Done(out) => out,
        }
    }

    /// What decides a rule before its regex runs: an allowlist covering the file, the
    /// rule's path regex (a path-only rule is a finding when it matches), and the
    /// regex itself (a built-in one that cannot be built refuses the content).
    fn gate<'r>(
        &self,
        rule: &'r CRule,
        path: Option<&str>,
        mut notes: Option<&mut Vec<String>>,
    ) -> Gate<'r> {
        let allows = || self.global.iter().chain(&rule.allowlists);
        if let Some(a) = allows().find(|a| a.file_allowed(path)) {
            if let Some(n) = notes.as_deref_mut() {
                n.push(format!("the file is allowed by {}", a.name()));
            }
            return Gate::Done(Vec::new());
        }
        if let Some(pre) = &rule.path {
            match path {
                Some(p) if !pre.is_match(p) => {
                    if let Some(n) = notes.as_deref_mut() {
                        n.push(format!("path does not match /{}/", pre.as_str()));
                    }
                    return Gate::Done(Vec::new());
                }
                _ => {}
            }
            if rule.regex.is_none() {
                let out = match path {
                    Some(_) => vec![Finding { line: 0, column: 0 }],
                    None => Vec::new(),
                };
                return Gate::Done(out);
            }
        }
        match &rule.regex {
            None => Gate::Done(Vec::new()),
            Some(Pattern::Own(re)) => Gate::Scan(re),
            Some(Pattern::Builtin(n)) => match builtin_regex(*n) {
                Ok(re) => Gate::Scan(re),
                Err(e) => {
                    // Only a broken build gets here (a unit test checks the built-in
                    // rules); refuse the content rather than pass it unscanned.
                    tracing::error!("content rule {}: {e}", rule.id);
                    if let Some(n) = notes {
                        n.push(format!("refused: {e}"));
                    }
                    Gate::Done(vec![Finding { line: 0, column: 0 }])
                }
            },
        }
    }

    /// The rule's findings in `text`: each match whose secret is random enough (when
    /// the rule asks) and that no allowlist covers, at its line and column.
    fn matches(
        &self,
        rule: &CRule,
        re: &BytesRegex,
        (path, text): (Option<&str>, &[u8]),
        mut notes: Option<&mut Vec<String>>,
    ) -> Vec<Finding> {
        let allows = || self.global.iter().chain(&rule.allowlists);
        let mut out = Vec::new();
        let mut lines = LineCount::new();
        for caps in re.captures_iter(text) {
            let Some(m) = caps.get(0) else { continue };
            let (start, end) = trim_newlines(text, m.start(), m.end());
            let whole = &text[start..end];
            let secret = secret_of(&caps, rule.secret_group, whole);
            lines.advance(text, start);
            let line_no = lines.line_no;
            let line = lines.line(text, end);
            if let Some(min) = rule.entropy {
                let e = shannon_entropy(secret);
                if e <= min {
                    if let Some(n) = notes.as_deref_mut() {
                        n.push(format!("line {line_no}: entropy {e:.2} <= {min}"));
                    }
                    continue;
                }
            }
            if let Some(a) = allows().find(|a| a.finding_allowed(path, secret, whole, line)) {
                if let Some(n) = notes.as_deref_mut() {
                    n.push(format!("line {line_no}: allowed by {}", a.name()));
                }
                continue;
            }
            out.push(Finding {
                line: line_no,
                column: start - lines.line_start + 1,
            });
        }
        out
    }
}

/// A rule before its regex runs: the regex to scan with, or its findings already.
enum Gate<'r> {
    Scan(&'r BytesRegex),
    Done(Vec<Finding>),
}

/// Where line counting is in a text: matches come in order, so it is incremental.
struct LineCount {
    /// Bytes counted so far.
    counted_to: usize,
    /// The line (1-based) at `counted_to`, and where it starts.
    line_no: usize,
    line_start: usize,
}

impl LineCount {
    fn new() -> LineCount {
        LineCount {
            counted_to: 0,
            line_no: 1,
            line_start: 0,
        }
    }

    /// Counts the lines up to `start` (a match's start).
    fn advance(&mut self, text: &[u8], start: usize) {
        for (off, b) in text
            .get(self.counted_to..start)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            if *b == b'\n' {
                self.line_no += 1;
                self.line_start = self.counted_to + off + 1;
            }
        }
        self.counted_to = self.counted_to.max(start);
    }

    /// The current line, up to the newline after `end` (a match's end).
    fn line<'t>(&self, text: &'t [u8], end: usize) -> &'t [u8] {
        let line_end = text[end..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(text.len(), |p| end + p);
        &text[self.line_start..line_end]
    }
}

/// The secret in a match: the rule's `secretGroup`, else the first non-empty group,
/// else the whole match.
fn secret_of<'t>(
    caps: &regex::bytes::Captures<'t>,
    secret_group: Option<usize>,
    whole: &'t [u8],
) -> &'t [u8] {
    match secret_group {
        Some(g) if g > 0 => caps.get(g).map_or(&[][..], |c| c.as_bytes()),
        _ => (1..caps.len())
            .filter_map(|g| caps.get(g))
            .map(|c| c.as_bytes())
            .find(|c| !c.is_empty())
            .unwrap_or(whole),
    }
}

/// Gitleaks trims newlines off both ends of a match.
fn trim_newlines(text: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    while start < end && text[start] == b'\n' {
        start += 1;
    }
    while end > start && text[end - 1] == b'\n' {
        end -= 1;
    }
    (start, end)
}
