//! A compiled gitleaks allowlist, and its regexes, which the built-in rules' own
//! allowlists compile on first use.

use std::sync::{Arc, OnceLock};

use regex::Regex;
use regex::bytes::Regex as BytesRegex;

/// What an allowlist regex is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Secret,
    Match,
    Line,
}

/// A compiled gitleaks allowlist.
#[derive(Debug, Clone)]
pub(super) struct Allow {
    pub(super) description: Option<String>,
    /// AND (every set condition must hold) instead of OR (any).
    pub(super) and: bool,
    /// Commits were listed: under AND they make the allowlist never match.
    pub(super) has_commits: bool,
    pub(super) paths: Vec<Regex>,
    pub(super) target: Target,
    pub(super) regexes: AllowRegexes,
    /// Lowercased.
    pub(super) stopwords: Vec<String>,
}

impl Allow {
    /// Every condition as text, so two allowlists compare equal iff they allow the same.
    pub(super) fn shape(&self) -> String {
        let paths: Vec<&str> = self.paths.iter().map(Regex::as_str).collect();
        let regexes = &self.regexes.sources;
        format!(
            "{}: {} of paths {paths:?}, {:?} regexes {regexes:?}, stopwords {:?}{}",
            self.name(),
            if self.and { "AND" } else { "OR" },
            self.target,
            self.stopwords,
            if self.has_commits { ", commits" } else { "" }
        )
    }

    pub(super) fn name(&self) -> String {
        match &self.description {
            Some(d) => format!("allowlist \"{d}\""),
            None => "an allowlist".into(),
        }
    }

    fn path_allowed(&self, path: Option<&str>) -> bool {
        path.is_some_and(|p| self.paths.iter().any(|r| r.is_match(p)))
    }

    /// Gitleaks' file-level check: only paths (and commits) count here.
    pub(super) fn file_allowed(&self, path: Option<&str>) -> bool {
        if self.and {
            if !self.regexes.is_empty() || !self.stopwords.is_empty() || self.has_commits {
                return false;
            }
            !self.paths.is_empty() && self.path_allowed(path)
        } else {
            self.path_allowed(path)
        }
    }

    /// Gitleaks' finding-level check.
    pub(super) fn finding_allowed(
        &self,
        path: Option<&str>,
        secret: &[u8],
        whole: &[u8],
        line: &[u8],
    ) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        let regex_ok = self.regexes.any_match(target);
        let stop_ok = !self.stopwords.is_empty() && {
            let lower = String::from_utf8_lossy(secret).to_lowercase();
            self.stopwords.iter().any(|w| lower.contains(w.as_str()))
        };
        if self.and {
            let mut checks = Vec::with_capacity(4);
            if self.has_commits {
                checks.push(false);
            }
            if !self.paths.is_empty() {
                checks.push(self.path_allowed(path));
            }
            if !self.regexes.is_empty() {
                checks.push(regex_ok);
            }
            if !self.stopwords.is_empty() {
                checks.push(stop_ok);
            }
            !checks.is_empty() && checks.iter().all(|c| *c)
        } else {
            regex_ok || stop_ok
        }
    }
}

/// An allowlist's regexes. A policy's own are compiled when it loads, so that a mistake
/// in one is reported then. The built-in rules' allowlists (fixed and checked by the unit
/// tests) are compiled on first use, like the built-in rules' regexes: at load they were
/// most of a default policy's content rules, for a gateway that may never scan.
#[derive(Debug, Clone)]
pub(super) struct AllowRegexes {
    /// As written.
    pub(super) sources: Vec<String>,
    /// Shared by the policy's copies. Err: they cannot be compiled, and then none
    /// allows anything (fail closed: the finding stands).
    compiled: Arc<OnceLock<Result<Vec<BytesRegex>, String>>>,
}

impl AllowRegexes {
    /// Regexes compiled already.
    pub(super) fn compiled(sources: Vec<String>, regexes: Vec<BytesRegex>) -> AllowRegexes {
        AllowRegexes {
            sources,
            compiled: Arc::new(OnceLock::from(Ok(regexes))),
        }
    }

    /// Regexes compiled on first use.
    pub(super) fn deferred(sources: Vec<String>) -> AllowRegexes {
        AllowRegexes {
            sources,
            compiled: Arc::default(),
        }
    }

    /// Whether they have been compiled (or found not to compile).
    #[cfg(test)]
    pub(super) fn is_compiled(&self) -> bool {
        self.compiled.get().is_some()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The compiled regexes, compiling them if this is their first use.
    pub(super) fn get(&self) -> Result<&[BytesRegex], &str> {
        self.compiled
            .get_or_init(|| {
                let compiled = self
                    .sources
                    .iter()
                    .map(|s| {
                        super::regexes::bytes_regex(s)
                            .map_err(|e| format!("invalid allowlist regex {s:?}: {e}"))
                    })
                    .collect();
                if let Err(e) = &compiled {
                    // Only a broken build gets here (a unit test compiles the built-in
                    // ones); said once, not at every finding.
                    tracing::error!("built-in content rules: {e}");
                }
                compiled
            })
            .as_deref()
            .map_err(String::as_str)
    }

    /// Whether any regex matches `target`; none does when they cannot be compiled.
    pub(super) fn any_match(&self, target: &[u8]) -> bool {
        self.get()
            .is_ok_and(|res| res.iter().any(|r| r.is_match(target)))
    }
}
