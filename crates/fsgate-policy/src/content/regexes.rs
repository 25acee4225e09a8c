//! A rule's regexes compiled with the size limit, and why one does not compile on one
//! line: shared by the rules and their allowlists.

use regex::Regex;
use regex::RegexBuilder;
use regex::bytes::{Regex as BytesRegex, RegexBuilder as BytesRegexBuilder};

/// Compiled-regex size limit: gitleaks rules use long bounded repetitions.
const REGEX_SIZE_LIMIT: usize = 64 << 20;

/// A content or allowlist regex (matched against bytes), compiled with the size limit;
/// Err: why not, on one line.
pub(super) fn bytes_regex(source: &str) -> Result<BytesRegex, String> {
    BytesRegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| one_line(&e.to_string()))
}

/// A path regex (matched against text), compiled with the size limit; Err: why not, on
/// one line.
pub(super) fn text_regex(source: &str) -> Result<Regex, String> {
    RegexBuilder::new(source)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| one_line(&e.to_string()))
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
