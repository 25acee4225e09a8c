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
//!
//! The scan is in `scan`; one rule compiled, and the built-in rules, in `rule`; the
//! `[content]` section loaded into a scanner in `build`.

mod allow;
pub(crate) mod build;
mod builtin;
mod clean;
mod examples;
pub(crate) mod format;
mod gitleaks;
mod regexes;
mod rule;
mod scan;
mod zeros;

use aho_corasick::AhoCorasick;
use regex::Regex;
use regex::bytes::Regex as BytesRegex;

use allow::{Allow, Target};
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

    /// Whether a finding can depend on the file's path: a rule or an allowlist with a
    /// path condition. If none has one, content is decided alike at every path.
    pub fn depends_on_path(&self) -> bool {
        let has_paths = |a: &Allow| !a.paths.is_empty();
        self.global.iter().any(has_paths)
            || (self.rules.iter()).any(|r| r.path.is_some() || r.allowlists.iter().any(has_paths))
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
