//! Secret content rules: a compiled [`ContentScanner`] that finds secrets *inside* file
//! content (a private key pasted into `notes.txt`), with gitleaks' rule semantics.
//!
//! Scanning is two-stage, as in gitleaks: one Aho-Corasick automaton over every rule's
//! keywords finds which rules can possibly match; only those rules' regexes run. A rule
//! without keywords runs on every file. Findings are then filtered by entropy and by
//! allowlists (global, then the rule's own) with gitleaks' AND/OR semantics.
//!
//! Deliberate difference from gitleaks: a `gitleaks:allow` comment on the line does NOT
//! suppress a finding. The content comes from an untrusted agent (on write) or may have
//! been planted by one (on read); an in-band opt-out would be a bypass.

mod allow;
pub(crate) mod build;
mod builtin;
mod clean;
pub(crate) mod format;
mod regexes;

use aho_corasick::AhoCorasick;
use regex::Regex;
use regex::bytes::Regex as BytesRegex;

use allow::{Allow, Target};
use fsgate_base::path::RelPath;
use fsgate_decide::OpClass;

/// A secret found in content. Carries no part of the content itself, so it can go into
/// refusals and audit records as is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContentHit {
    /// `content:<id>`: the deciding rule, for the refusal and the audit record.
    pub rule_id: String,
    /// 1-based line of the match; 0 for a `path`-only rule (the file itself).
    pub line: usize,
    /// 1-based byte column of the match on its line; 0 for a `path`-only rule.
    pub column: usize,
}

/// One content rule considered by [`ContentScanner::explain`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct ContentTraceStep {
    /// `content:<id>`.
    pub rule: String,
    /// True if the rule reports a finding on this content.
    pub hit: bool,
    /// What happened: prefilter, path condition, matches rejected and why, the hit.
    pub note: String,
}

/// One content rule as compiled, as text (see [`ContentScanner::rule_shapes`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ContentRuleShape {
    /// `content:<id>`.
    pub id: String,
    /// Regex, path condition, secret group, entropy, keywords and required rules.
    pub matcher: String,
    /// The rule's own allowlists.
    pub allowlists: Vec<String>,
}

/// Where a loaded gitleaks config came from, so audit records can name it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ContentSource {
    /// The file as resolved at load.
    pub path: std::path::PathBuf,
    /// SHA-256 of its text, hex.
    pub sha256: String,
}

/// `[[rules.required]]`, resolved to a rule index.
#[derive(Debug, Clone)]
struct Required {
    rule: usize,
    within_lines: Option<usize>,
    within_columns: Option<usize>,
}

/// A rule's content regex.
#[derive(Debug, Clone)]
enum Pattern {
    /// Compiled with the policy.
    Own(BytesRegex),
    /// Built-in rule number `n`: compiled once per process on first use, not at
    /// start-up.
    Builtin(usize),
}

/// A compiled content rule.
#[derive(Debug, Clone)]
struct CRule {
    /// `content:<id>`.
    id: String,
    regex: Option<Pattern>,
    path: Option<Regex>,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    /// Lowercased; empty = always run.
    keywords: Vec<String>,
    allowlists: Vec<Allow>,
    required: Vec<Required>,
    skip_report: bool,
}

/// Which of the automaton's `n` keywords occur in `text`: an overlapping search, one
/// state transition (a dependent load) per byte.
fn occurring_overlapping(ac: &AhoCorasick, text: &[u8], n: usize) -> Vec<bool> {
    let mut seen = vec![false; n];
    let mut left = n;
    overlapping_from(ac, text, 0, &mut seen, &mut left);
    seen
}

/// Marks in `seen` the keywords starting at or after `from` in `text` (`left`: how many
/// are still unseen; the search ends when none is).
fn overlapping_from(
    ac: &AhoCorasick,
    text: &[u8],
    from: usize,
    seen: &mut [bool],
    left: &mut usize,
) {
    if *left == 0 {
        return;
    }
    let input = aho_corasick::Input::new(text).span(from..text.len());
    for m in ac.find_overlapping_iter(input) {
        let k = m.pattern().as_usize();
        if !seen[k] {
            seen[k] = true;
            *left -= 1;
            if *left == 0 {
                break;
            }
        }
    }
}

/// The content rules' keywords, and their searches once built: on the first scan, not
/// at load (building them was a tenth of a gateway's start-up). Shared by the scanner's
/// clones.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prefilter {
    /// Every distinct keyword, in the order `keyword_rules` indexes them.
    keywords: Vec<String>,
    /// Ok(None): no keywords. Err: the automaton cannot be built.
    built: std::sync::Arc<std::sync::OnceLock<Result<Option<Keywords>, String>>>,
}

/// The keyword searches.
#[derive(Debug)]
pub(crate) struct Keywords {
    /// Every keyword, ASCII case-insensitive.
    pub(crate) ac: AhoCorasick,
    /// The same keywords for a SIMD search, where it can be built (see [`Packed`]).
    pub(crate) packed: Option<Packed>,
}

impl Prefilter {
    pub(crate) fn new(keywords: Vec<String>) -> Prefilter {
        Prefilter {
            keywords,
            built: Default::default(),
        }
    }

    /// The searches, building them if this is their first use.
    pub(crate) fn built(&self) -> Result<Option<&Keywords>, &str> {
        self.built
            .get_or_init(|| {
                if self.keywords.is_empty() {
                    return Ok(None);
                }
                let ac = AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&self.keywords)
                    .map_err(|e| format!("cannot build the keyword prefilter: {e}"))?;
                let packed = Packed::new(&self.keywords);
                Ok(Some(Keywords { ac, packed }))
            })
            .as_ref()
            .map(Option::as_ref)
            .map_err(String::as_str)
    }
}

/// Bytes of text lowercased at a time for [`Packed`].
const PACKED_WINDOW: usize = 16 * 1024;

/// [`Packed`] hands the rest of a text to the automaton once a window holds more than
/// one keyword start per this many bytes: each start costs a new search and a compare
/// of every keyword (about 100 ns), the automaton about 4 ns a byte whatever the text,
/// so text dense with keywords (`a3ta3t...`) would cost ten times the automaton's.
const PACKED_DENSITY: usize = 32;

/// The keyword prefilter's fast path: the keywords (ASCII-lowercased) in a packed SIMD
/// searcher (Teddy), run over the text ASCII-lowercased a window at a time. A leftmost
/// search from a position finds the first position at or after it where some keyword
/// starts; there every keyword is compared, and the search goes on one byte later: so
/// every position where a keyword starts is visited, and the keywords found are exactly
/// those an overlapping ASCII case-insensitive search finds, with most bytes skipped
/// many at a time instead of one automaton step each.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    searcher: aho_corasick::packed::Searcher,
    /// Indexed as the prefilter's patterns.
    keywords: Vec<Vec<u8>>,
    longest: usize,
}

impl Packed {
    /// None if the searcher cannot be built for these keywords (too many, an empty one,
    /// or no SIMD on this CPU): the automaton's overlapping search is used instead.
    pub(crate) fn new(keywords: &[String]) -> Option<Packed> {
        let keywords: Vec<Vec<u8>> = keywords
            .iter()
            .map(|k| k.as_bytes().to_ascii_lowercase())
            .collect();
        if keywords.iter().any(Vec::is_empty) {
            return None;
        }
        let searcher = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder()
            .extend(&keywords)
            .build()?;
        let longest = keywords.iter().map(Vec::len).max().unwrap_or(0);
        Some(Packed {
            searcher,
            keywords,
            longest,
        })
    }

    /// Which keywords occur in `text`, lowercasing `window` bytes at a time (each window
    /// also holds the bytes a keyword starting in it may reach into the next); from a
    /// window dense with keyword starts on, through the automaton `ac` instead.
    fn occurring(&self, text: &[u8], window: usize, ac: &AhoCorasick) -> Vec<bool> {
        self.occurring_counted(text, window, ac).0
    }

    /// [`Packed::occurring`], also saying how many keyword starts the packed search
    /// stopped at.
    fn occurring_counted(
        &self,
        text: &[u8],
        window: usize,
        ac: &AhoCorasick,
    ) -> (Vec<bool>, usize) {
        let mut seen = vec![false; self.keywords.len()];
        let mut left = seen.len();
        let mut buf = Vec::with_capacity(window.min(text.len()) + self.longest);
        let (mut base, mut stops) = (0, 0);
        while base < text.len() && left > 0 {
            let own = window.min(text.len() - base);
            let end = (base + own + self.longest - 1).min(text.len());
            buf.clear();
            buf.extend(text[base..end].iter().map(u8::to_ascii_lowercase));
            let (mut at, mut here) = (0, 0);
            while left > 0 {
                let span = aho_corasick::Span::from(at..buf.len());
                let Some(m) = self.searcher.find_in(&buf, span) else {
                    break;
                };
                let s = m.start();
                if s >= own {
                    break; // the next window's
                }
                here += 1;
                if here * PACKED_DENSITY > own {
                    // Starts before `base` were all visited; the automaton does the rest.
                    overlapping_from(ac, text, base, &mut seen, &mut left);
                    return (seen, stops);
                }
                stops += 1;
                for (k, kw) in self.keywords.iter().enumerate() {
                    if !seen[k] && buf[s..].starts_with(kw) {
                        seen[k] = true;
                        left -= 1;
                    }
                }
                at = s + 1;
            }
            base += own;
        }
        (seen, stops)
    }
}

/// A finding before it becomes a [`ContentHit`].
#[derive(Debug, Clone, Copy)]
struct Finding {
    line: usize,
    column: usize,
}

/// The compiled content rules of a policy. Immutable; cheap to share.
#[derive(Debug, Clone)]
pub struct ContentScanner {
    rules: Vec<CRule>,
    /// Untargeted global allowlists.
    global: Vec<Allow>,
    /// Every distinct keyword, searched ASCII case-insensitively; built on first scan.
    prefilter: Prefilter,
    /// Prefilter pattern index -> rules having that keyword.
    keyword_rules: Vec<Vec<usize>>,
    /// Indexed by `OpClass as usize`.
    ops: [bool; 4],
    sources: Vec<ContentSource>,
    /// Texts this scanner found clean (shared by its clones: the same rules).
    clean: std::sync::Arc<clean::CleanScans>,
}

impl ContentScanner {
    /// True if content of operations of class `op` is scanned.
    pub fn applies_to(&self, op: OpClass) -> bool {
        self.ops[op as usize]
    }

    /// The first finding in `text` (rules in load order), if any.
    pub fn scan(&self, path: &RelPath, text: &[u8]) -> Option<ContentHit> {
        self.run(Some(path.as_str()), text, true, None)
            .into_iter()
            .next()
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

    /// Every finding in `text`.
    pub fn scan_all(&self, path: &RelPath, text: &[u8]) -> Vec<ContentHit> {
        self.run(Some(path.as_str()), text, false, None)
    }

    /// Every reportable rule with what happened to it on `text`, for `policy explain`.
    pub fn explain(&self, path: &RelPath, text: &[u8]) -> Vec<ContentTraceStep> {
        let mut trace = Vec::new();
        self.run(Some(path.as_str()), text, false, Some(&mut trace));
        trace
    }

    /// The ids of the rules that can report (`content:<id>`), in load order.
    pub(crate) fn rule_ids(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .filter(|r| !r.skip_report)
            .map(|r| r.id.as_str())
    }

    /// What each rule matches and what its allowlists let through, as comparable text
    /// (for `policy diff`): reportable rules in load order.
    pub(crate) fn rule_shapes(&self) -> Vec<ContentRuleShape> {
        self.rules
            .iter()
            .filter(|r| !r.skip_report)
            .map(|r| ContentRuleShape {
                id: r.id.clone(),
                matcher: self.matcher_text(r),
                allowlists: r.allowlists.iter().map(Allow::shape).collect(),
            })
            .collect()
    }

    /// The global allowlists as comparable text (for `policy diff`).
    pub(crate) fn global_allowlist_shapes(&self) -> Vec<String> {
        self.global.iter().map(Allow::shape).collect()
    }

    fn matcher_text(&self, r: &CRule) -> String {
        let regex = match &r.regex {
            None => "none".to_string(),
            Some(Pattern::Own(re)) => format!("/{}/", re.as_str()),
            Some(Pattern::Builtin(n)) => format!("built-in #{n}"),
        };
        let required: Vec<String> = r
            .required
            .iter()
            .map(|q| {
                let id = self.rules.get(q.rule).map_or("?", |x| x.id.as_str());
                format!("{id} within {:?}/{:?}", q.within_lines, q.within_columns)
            })
            .collect();
        format!(
            "regex {regex}, path {:?}, secretGroup {:?}, entropy {:?}, keywords {:?}, required {required:?}",
            r.path.as_ref().map(Regex::as_str),
            r.secret_group,
            r.entropy,
            r.keywords
        )
    }

    /// True if some rule is one of the built-in ones (compiled on first use).
    #[cfg(test)]
    pub(crate) fn uses_builtin(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.regex, Some(Pattern::Builtin(_))))
    }

    /// The gitleaks config files loaded.
    pub(crate) fn sources(&self) -> &[ContentSource] {
        &self.sources
    }

    /// Compiles now what is otherwise built on the first scan (the keyword prefilter,
    /// the built-in rules' allowlists).
    pub(crate) fn compile_deferred(&self) -> Result<(), String> {
        self.prefilter.built().map_err(str::to_string)?;
        let rules = self.rules.iter().flat_map(|r| &r.allowlists);
        for allow in self.global.iter().chain(rules) {
            allow.regexes.get().map_err(str::to_string)?;
        }
        Ok(())
    }

    /// Which rules the keyword prefilter lets through for `text`.
    fn candidates(&self, text: &[u8]) -> Vec<bool> {
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
    fn detect(
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
            Some(Pattern::Builtin(n)) => match build::builtin_regex(*n) {
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

/// Shannon entropy in bits per character, computed as gitleaks does (character counts
/// over the byte length).
pub(crate) fn shannon_entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let text = String::from_utf8_lossy(data);
    let mut counts: std::collections::HashMap<char, usize> = std::collections::HashMap::new();
    for c in text.chars() {
        *counts.entry(c).or_default() += 1;
    }
    let inv = 1.0 / data.len() as f64;
    counts
        .values()
        .map(|&n| {
            let f = n as f64 * inv;
            -f * f.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests;
