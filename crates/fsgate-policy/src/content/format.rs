//! The `[content]` policy section and the gitleaks rule format it shares with gitleaks
//! config files, as serde structs (strict about keys, like the rest of the policy).
//!
//! Keys inside rules and allowlists keep gitleaks' own spelling (`secretGroup`,
//! `regexTarget`, `targetRules`) so a rule can be pasted from a `.gitleaks.toml` as is.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

fn yes() -> bool {
    true
}

/// `[content]`: refuse file content that holds secrets, on read and on write.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawContent {
    /// Use fsgate's built-in content rules (private key blocks, AWS access key ids,
    /// GitHub/GitLab/Slack tokens, generic high-entropy `key = "..."` assignments).
    /// Default: true.
    #[serde(default = "yes")]
    pub builtin: bool,
    /// A gitleaks config file (TOML) whose `[[rules]]` and `[[allowlists]]` are added,
    /// relative to the policy file's directory. Its `[extend] path` is followed (two
    /// levels at most, as in gitleaks); `[extend] useDefault` is not supported.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub gitleaks_config: Option<Spanned<String>>,
    /// Rule ids to switch off, whether built-in, from the gitleaks config or inline.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub disabled_rules: Vec<Spanned<String>>,
    /// Operation classes whose content is scanned: "read" (content the agent would
    /// receive) and/or "write" (content the agent sends). Default: both.
    #[serde(default)]
    #[schemars(with = "Option<Vec<ScanOp>>")]
    pub ops: Option<Vec<Spanned<String>>>,
    /// Inline content rules, in gitleaks' `[[rules]]` format.
    #[serde(default)]
    pub rules: Vec<GitleaksRule>,
    /// Allowlists applying to every content rule (or to `targetRules`), in gitleaks'
    /// `[[allowlists]]` format.
    #[serde(default)]
    pub allowlists: Vec<GitleaksAllowlist>,
}

impl RawContent {
    /// True if the section brings regexes of its own (rules, allowlists, a gitleaks
    /// config) to compile when the policy loads; the built-in rules' are compiled on
    /// first use.
    pub(crate) fn compiles_own_regexes(&self) -> bool {
        self.gitleaks_config.is_some() || !self.rules.is_empty() || !self.allowlists.is_empty()
    }
}

/// Operation classes content scanning can apply to (schema only).
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum ScanOp {
    /// Content returned to the agent.
    Read,
    /// Content the agent writes.
    Write,
}

/// A gitleaks config file (`.gitleaks.toml`), as far as fsgate understands it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GitleaksFile {
    /// Informational.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "accepted, not used: deny_unknown_fields must know it"
    )]
    pub title: Option<String>,
    /// Informational.
    #[serde(default)]
    #[expect(
        dead_code,
        reason = "accepted, not used: deny_unknown_fields must know it"
    )]
    pub description: Option<String>,
    /// Informational (the gitleaks version the file targets).
    #[serde(default, rename = "minVersion")]
    #[expect(
        dead_code,
        reason = "accepted, not used: deny_unknown_fields must know it"
    )]
    pub min_version: Option<String>,
    /// Another config this one extends.
    #[serde(default)]
    pub extend: Option<GitleaksExtend>,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<GitleaksRule>,
    /// Deprecated single global allowlist (`[allowlist]`).
    #[serde(default)]
    pub allowlist: Option<GitleaksAllowlist>,
    /// Global allowlists (`[[allowlists]]`).
    #[serde(default)]
    pub allowlists: Vec<GitleaksAllowlist>,
}

/// `[extend]` of a gitleaks config.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GitleaksExtend {
    /// A config file to extend, relative to the extending file's directory.
    #[serde(default)]
    pub path: Option<String>,
    /// Not supported by fsgate (no network access at load).
    #[serde(default)]
    pub url: Option<String>,
    /// Not supported by fsgate (gitleaks' default rules are not bundled).
    #[serde(default, rename = "useDefault", alias = "usedefault")]
    pub use_default: bool,
    /// Rule ids of the extended config to leave out.
    #[serde(default, rename = "disabledRules", alias = "disabledrules")]
    pub disabled_rules: Vec<String>,
}

/// One content rule in gitleaks' format.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitleaksRule {
    /// Unique id; refusals and audit records name the rule as `content:<id>`.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// Human description.
    #[serde(default)]
    pub description: Option<String>,
    /// Regex (RE2/Rust syntax, case-sensitive unless it starts with `(?i)`) matched
    /// against the content.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub regex: Option<Spanned<String>>,
    /// Regex matched against the workspace-relative path (`src/app.py`): the rule only
    /// applies to matching files. A rule with `path` and no `regex` flags the file itself.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    /// Which capture group of `regex` is the secret (for `entropy`, stopwords and
    /// allowlist regexes). Default: the first non-empty group, else the whole match.
    #[serde(default, rename = "secretGroup", alias = "secretgroup")]
    pub secret_group: Option<usize>,
    /// Minimum Shannon entropy (bits per character) the secret must exceed.
    #[serde(default)]
    pub entropy: Option<f64>,
    /// Prefilter: the regex only runs on content containing one of these (ASCII
    /// case-insensitive). A rule without keywords runs on every file.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Informational.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Allowlists of this rule.
    #[serde(default)]
    pub allowlists: Vec<GitleaksAllowlist>,
    /// Deprecated single allowlist (`[rules.allowlist]`); not together with `allowlists`.
    #[serde(default)]
    pub allowlist: Option<GitleaksAllowlist>,
    /// Composite rule: only report when each of these rules also matches nearby.
    #[serde(default)]
    pub required: Vec<GitleaksRequired>,
    /// Only used as a `required` part of another rule, never reported alone.
    #[serde(default, rename = "skipReport", alias = "skipreport")]
    pub skip_report: bool,
    /// fsgate: true-positive examples; each must be detected by this rule, or the policy
    /// does not load. For a `path`-only rule these are paths.
    #[serde(default)]
    pub tps: Vec<String>,
    /// fsgate: false-positive examples; none may be detected by this rule.
    #[serde(default)]
    pub fps: Vec<String>,
}

/// `[[rules.required]]`: a rule that must also match near the primary finding.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitleaksRequired {
    /// Id of the required rule.
    pub id: String,
    /// Its finding must start within this many lines of the primary one.
    #[serde(default, rename = "withinLines", alias = "withinlines")]
    pub within_lines: Option<usize>,
    /// Its finding must start within this many columns of the primary one.
    #[serde(default, rename = "withinColumns", alias = "withincolumns")]
    pub within_columns: Option<usize>,
}

/// A gitleaks allowlist: a finding it matches is not a finding.
///
/// `condition = "OR"` (default): any of `paths`, `regexes`, `stopwords` matching allows.
/// `condition = "AND"`: every one of those that is set must match. `commits` never match
/// here (there are no commits), so an AND allowlist with commits allows nothing.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitleaksAllowlist {
    /// Human description.
    #[serde(default)]
    pub description: Option<String>,
    /// "OR" (default) or "AND" (also "||", "&&"; case-insensitive).
    #[serde(default)]
    pub condition: Option<String>,
    /// Commit SHAs (accepted for compatibility; never match).
    #[serde(default)]
    pub commits: Vec<String>,
    /// Regexes matched against the workspace-relative path.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub paths: Vec<Spanned<String>>,
    /// What `regexes` are matched against: "secret" (default), "match" or "line".
    #[serde(default, rename = "regexTarget", alias = "regextarget")]
    pub regex_target: Option<String>,
    /// Regexes that allow a finding.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub regexes: Vec<Spanned<String>>,
    /// Words that allow a finding whose secret contains one (case-insensitive).
    #[serde(default, alias = "stopWords")]
    pub stopwords: Vec<String>,
    /// Global allowlists only: the rule ids it applies to (default: all rules).
    #[serde(default, rename = "targetRules", alias = "targetrules")]
    pub target_rules: Vec<String>,
}
