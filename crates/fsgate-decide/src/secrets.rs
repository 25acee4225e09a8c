//! Secret-name patterns: any path component they match is denied before any rule, and
//! the built-in ones a policy waives, still matched so a decision can say so.

use std::sync::{Arc, OnceLock};

use regex::RegexSet;
use regex_automata::meta;

/// A secret-name pattern.
#[derive(Debug, Clone)]
pub struct SecretPattern {
    /// `secrets:<id>`.
    pub id: String,
    /// The regex source.
    pub source: String,
    /// True for fsgate's built-in list.
    pub builtin: bool,
}

/// The secret-name patterns in force.
#[derive(Debug, Clone)]
pub struct Secrets {
    pub(crate) patterns: Vec<SecretPattern>,
    /// The patterns as one search (case-insensitive, Unicode, any of them), compiled on
    /// first use and shared by the engine's copies: compiled at load, with the literal
    /// prefilter a `RegexSet` adds, it was a fifth of a gateway's start-up (see
    /// [`name_matcher`]). Err: it cannot be compiled; every name then counts as a secret
    /// (fail closed). `policy check` compiles it at once ([`Secrets::compile`]).
    matcher: Arc<OnceLock<Result<meta::Regex, String>>>,
}

impl Secrets {
    /// No secret-name patterns.
    pub fn none() -> Secrets {
        Secrets::deferred(Vec::new())
    }

    /// `patterns`, compiled on first use (each pattern was compiled alone when it was
    /// read, so a mistake in one is reported at load).
    pub fn deferred(patterns: Vec<SecretPattern>) -> Secrets {
        Secrets {
            patterns,
            matcher: Arc::default(),
        }
    }

    /// The patterns.
    pub fn patterns(&self) -> &[SecretPattern] {
        &self.patterns
    }

    /// The patterns, taken out.
    pub fn into_patterns(self) -> Vec<SecretPattern> {
        self.patterns
    }

    /// Compiles the search now if it was not yet; Err: why it cannot be compiled.
    pub fn compile(&self) -> Result<(), &str> {
        self.matcher().map(|_| ())
    }

    /// The compiled search, compiling it if this is its first use.
    fn matcher(&self) -> Result<&meta::Regex, &str> {
        self.matcher
            .get_or_init(|| name_matcher(&self.patterns))
            .as_ref()
            .map_err(String::as_str)
    }

    /// Whether a pattern takes `name` for a secret (a built-in pattern's exception does
    /// not count); true if the patterns cannot be compiled (fail closed).
    pub fn is_match(&self, name: &str) -> bool {
        match self.matcher() {
            Ok(re) => re.is_match(name) && self.confirmed(name),
            Err(_) => true,
        }
    }

    /// The first pattern that takes `name` for a secret, if any (a built-in pattern's
    /// exception does not count); Err if the patterns cannot be compiled.
    pub fn first_match(&self, name: &str) -> Result<Option<usize>, &str> {
        let re = self.matcher()?;
        // `is_match` first: almost no name is a secret.
        if !re.is_match(name) {
            return Ok(None);
        }
        let mut which = regex_automata::PatternSet::new(re.pattern_len());
        re.which_overlapping_matches(&regex_automata::Input::new(name), &mut which);
        Ok(which
            .iter()
            .map(|p| p.as_usize())
            .find(|&i| !self.exempts(i, name)))
    }

    /// For a name the search matched: whether a pattern takes it for a secret (not only
    /// a built-in pattern that leaves it out, see [`PUBLIC_NAMES`]).
    pub(crate) fn confirmed(&self, name: &str) -> bool {
        let public = PUBLIC_NAMES
            .iter()
            .any(|(_, n)| name.eq_ignore_ascii_case(n));
        !public || !matches!(self.first_match(name), Ok(None))
    }

    /// Whether pattern `i` leaves `name` out.
    fn exempts(&self, i: usize, name: &str) -> bool {
        (self.patterns.get(i)).is_some_and(|p| p.builtin && leaves_out(&p.id, name))
    }

    /// The search a listing runs on every entry's name with a cache of its own (taken
    /// from another thread than the one that built it, the search's shared cache pool
    /// locks). None if it cannot be compiled: the listing then asks [`Secrets::is_match`].
    pub(crate) fn names(&self) -> Option<&meta::Regex> {
        self.matcher().ok()
    }
}

/// Names a built-in pattern would take for secrets that are public by convention, and
/// the pattern that leaves each out: `cacert.pem` is the CA bundle (certificates only)
/// that pip, certifi, requests and curl ship, so a virtual environment or a vendored
/// package in the workspace can be installed. Only the content rules then stand between
/// a key stored under that name and the agent. A policy's own pattern still takes it.
pub(crate) const PUBLIC_NAMES: &[(&str, &str)] = &[("secrets:key-material", "cacert.pem")];

/// Whether the built-in pattern `id` leaves the component `name` out: `cacert.pem` for
/// `secrets:key-material` (the CA bundle pip, certifi and curl ship).
pub fn leaves_out(id: &str, name: &str) -> bool {
    PUBLIC_NAMES
        .iter()
        .any(|(i, n)| *i == id && name.eq_ignore_ascii_case(n))
}

/// What built-in pattern `p` leaves out, for a trace: `, except `cacert.pem``, or nothing.
pub(crate) fn left_out(p: &SecretPattern) -> String {
    let names: Vec<&str> = PUBLIC_NAMES
        .iter()
        .filter(|(id, _)| p.builtin && p.id == *id)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(", except `{}`", names.join("`, `"))
    }
}

/// Built-in secret-name patterns waived by `disabled_patterns`: they no longer deny, but
/// are still matched so that a decision can say a waiver let the path through.
#[derive(Debug, Clone, Default)]
pub struct Waivers {
    /// The waived patterns.
    pub patterns: Vec<SecretPattern>,
    /// Them as one case-insensitive set (None when nothing is waived: deciding skips it).
    pub set: Option<RegexSet>,
}

/// The secret-name patterns as one search: case-insensitive, Unicode, any of them, but
/// without the literal prefilter a `RegexSet` builds (on names of a few bytes it costs
/// more than the automaton it saves, and building it doubled the compilation: about
/// 1.3 ms against 0.6). Err: why it cannot be compiled.
fn name_matcher(patterns: &[SecretPattern]) -> Result<meta::Regex, String> {
    use regex_automata::util::syntax;
    let config = meta::Config::new()
        .match_kind(regex_automata::MatchKind::All)
        .utf8_empty(true)
        .auto_prefilter(false)
        .nfa_size_limit(Some(10 * (1 << 20)))
        .hybrid_cache_capacity(2 * (1 << 20));
    meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().case_insensitive(true).utf8(true))
        .build_many(
            &patterns
                .iter()
                .map(|p| p.source.as_str())
                .collect::<Vec<_>>(),
        )
        .map_err(|e| {
            e.to_string()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
}
