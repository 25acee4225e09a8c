//! The policy engine: a TOML file, loaded (`raw`), compiled (`compile`), and decided by
//! a pure function (`decide`) that names the rule behind every decision.
//!
//! # Layer
//!
//! Owns: the policy file, loaded, composed, compiled and decided, and the `policy`
//! tools (check, explain, test, diff, schema). Depends on `fsgate-base` and on the
//! settings types of `fsgate-audit`, `fsgate-backup` and `fsgate-sandbox` (the policy
//! file holds their sections). May not touch: the workspace or any door; a decision
//! is a pure function of the compiled policy and the facts it is given.
//!
//! Deny wins over allow; nothing matched means deny (`default-deny`).

mod access;
pub mod cli;
mod compile;
mod compose;
pub(crate) mod content;
mod decide;
pub(crate) mod diff;
mod entries;
pub mod floor;
mod full_decision;
pub mod http;
pub mod lint;
pub mod media;
pub(crate) mod oversight;
pub(crate) mod raw;
pub(crate) mod schema;
mod settings;
pub mod testrun;
pub mod ws;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use globset::GlobSet;
use regex::RegexSet;
use regex_automata::meta;

pub use access::{ACCESS_NAMES, Access, AccessStep};
pub use content::{ContentHit, ContentScanner};
pub use decide::{Decision, EntryKind, PathFacts, TraceStep};
pub use entries::EntryFilter;
pub use raw::{AcpSettings, BinaryMode, Effect, RawPolicy};
pub use settings::Settings;

/// The text of the built-in default policy (`policies/default.toml`).
pub const DEFAULT_POLICY_TOML: &str = include_str!("../../../policies/default.toml");

/// The rule id reported when no rule matched.
pub(crate) const DEFAULT_DENY: &str = "default-deny";

/// Operation classes the policy distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    /// Reading content: read_text_file, read_file, grep.
    Read = 0,
    /// Creating or changing: write, edit, mkdir, rename target.
    Write = 1,
    /// Removing: rm, rename source.
    Delete = 2,
    /// Seeing names and metadata: ls, stat, glob.
    List = 3,
}

impl OpClass {
    /// All classes, in index order.
    pub const ALL: [OpClass; 4] = [
        OpClass::Read,
        OpClass::Write,
        OpClass::Delete,
        OpClass::List,
    ];

    /// Parses `read`, `write`, `delete`, `list`.
    pub fn parse(s: &str) -> Option<OpClass> {
        match s {
            "read" => Some(OpClass::Read),
            "write" => Some(OpClass::Write),
            "delete" => Some(OpClass::Delete),
            "list" => Some(OpClass::List),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Delete => "delete",
            OpClass::List => "list",
        }
    }
}

/// Why a policy cannot be loaded. The process refuses to start on any of these.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// TOML syntax, unknown key or wrong type (the parser's message names key and line).
    #[error("{origin}: {message}")]
    Parse {
        /// The file (or `<built-in default policy>`).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A value that parses but is not valid (bad glob, bad regex, unknown op...).
    #[error("{key} (line {line}): {message}")]
    Invalid {
        /// The key, e.g. `rules[2].paths[0]`.
        key: String,
        /// Its line in the file (0: unknown).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Like `Invalid`, for a value whose column is known (a set reference, a waiver id).
    #[error("{key} (line {line}, column {col}): {message}")]
    Located {
        /// The key.
        key: String,
        /// Its line.
        line: usize,
        /// Its column.
        col: usize,
        /// What is wrong.
        message: String,
    },
    /// An error in a policy this one `extends` (or in how it extends it).
    #[error("{file}: {source}")]
    InFile {
        /// The extended file.
        file: String,
        /// The error in it.
        source: Box<PolicyError>,
    },
}

/// Size and content limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Largest file the agent may read, in bytes.
    pub max_read_bytes: u64,
    /// Largest content the agent may write in one request, in bytes.
    pub max_write_bytes: u64,
    /// Binary files: deny, base64 for media files only, or base64.
    pub binary: BinaryMode,
    /// Largest protocol message.
    pub max_message_bytes: u64,
}

/// A compiled `[[rule]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// allow or deny.
    pub effect: Effect,
    /// Which op classes it covers, indexed by `OpClass as usize`.
    pub ops: [bool; 4],
    /// The globs as written, for explain and lint.
    pub globs: Vec<String>,
    /// The compiled globs (each also covering what lies beneath); None = any path.
    paths: Option<GlobSet>,
    /// Literal directory prefixes of the globs, so listing an ancestor is allowed.
    bases: Vec<fsgate_base::path::RelPath>,
    /// Directories whose every descendant the globs match (`**` -> the root, `src/**`
    /// or `src` -> `src`): a listing below one needs no glob match per entry.
    whole: Vec<fsgate_base::path::RelPath>,
    /// Lowercased extensions the rule is limited to.
    pub extensions: Option<Vec<String>>,
    /// Files of at least this many bytes only.
    pub min_size: Option<u64>,
    /// Files of at most this many bytes only.
    pub max_size: Option<u64>,
    /// Human explanation.
    pub reason: Option<String>,
    /// Line of the rule's `id` in the source.
    pub line: usize,
    /// The workspaces the rule applies in (None: every one).
    pub workspaces: Option<Vec<String>>,
}

impl Rule {
    /// True if `other` decides what this rule decides, the same way (its reason and
    /// place in the file aside).
    pub fn same_scope(&self, other: &Rule) -> bool {
        self.effect == other.effect
            && self.ops == other.ops
            && self.globs == other.globs
            && self.extensions == other.extensions
            && self.min_size == other.min_size
            && self.max_size == other.max_size
            && self.workspaces == other.workspaces
    }

    /// Whether the rule applies in the workspace `name` (None: a workspace with no
    /// name, where only the rules for every workspace apply).
    pub(crate) fn applies_in(&self, name: Option<&str>) -> bool {
        match (&self.workspaces, name) {
            (None, _) => true,
            (Some(names), Some(n)) => names.iter().any(|w| w == n),
            (Some(_), None) => false,
        }
    }
}

/// A secret-name pattern.
#[derive(Debug, Clone)]
pub(crate) struct SecretPattern {
    /// `secrets:<id>`.
    pub id: String,
    /// The regex source.
    pub source: String,
    /// True for fsgate's built-in list.
    pub builtin: bool,
}

#[derive(Debug, Clone)]
struct Secrets {
    patterns: Vec<SecretPattern>,
    /// The patterns as one search (case-insensitive, Unicode, any of them), compiled on
    /// first use and shared by the policy's copies: compiled at load, with the literal
    /// prefilter a `RegexSet` adds, it was a fifth of a gateway's start-up (see
    /// [`compile::name_matcher`]). Err: it cannot be compiled; every name then counts as
    /// a secret (fail closed). `policy check` compiles it at once
    /// ([`Policy::compile_deferred`]).
    matcher: Arc<OnceLock<Result<meta::Regex, String>>>,
}

impl Secrets {
    /// No secret-name patterns.
    fn none() -> Secrets {
        Secrets::deferred(Vec::new())
    }

    /// `patterns`, compiled on first use.
    fn deferred(patterns: Vec<SecretPattern>) -> Secrets {
        Secrets {
            patterns,
            matcher: Arc::default(),
        }
    }

    /// The compiled search, compiling it if this is its first use.
    fn matcher(&self) -> Result<&meta::Regex, &str> {
        self.matcher
            .get_or_init(|| compile::name_matcher(&self.patterns))
            .as_ref()
            .map_err(String::as_str)
    }

    /// Whether `name` matches a pattern (or the patterns cannot be compiled: fail closed).
    fn is_match(&self, name: &str) -> bool {
        match self.matcher() {
            Ok(re) => re.is_match(name),
            Err(_) => true,
        }
    }

    /// The first pattern `name` matches, if any; Err if the patterns cannot be compiled.
    fn first_match(&self, name: &str) -> Result<Option<usize>, &str> {
        let re = self.matcher()?;
        // `is_match` first: almost no name is a secret.
        if !re.is_match(name) {
            return Ok(None);
        }
        let mut which = regex_automata::PatternSet::new(re.pattern_len());
        re.which_overlapping_matches(&regex_automata::Input::new(name), &mut which);
        Ok(which.iter().next().map(|p| p.as_usize()))
    }

    /// The search a listing runs on every entry's name with a cache of its own (taken
    /// from another thread than the one that built it, the search's shared cache pool
    /// locks). None if it cannot be compiled: the listing then asks [`Secrets::is_match`].
    fn names(&self) -> Option<&meta::Regex> {
        self.matcher().ok()
    }
}

/// Built-in secret-name patterns waived by `disabled_patterns`: they no longer deny, but
/// are still matched so that a decision can say a waiver let the path through.
#[derive(Debug, Clone, Default)]
struct Waivers {
    patterns: Vec<SecretPattern>,
    set: Option<RegexSet>,
}

/// A loaded, compiled policy. Immutable; share it behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The rules in force: those for every workspace, and those scoped to `workspace`.
    rules: Vec<Rule>,
    /// Every rule of the file, scoped ones included, for [`Policy::for_workspace`].
    all_rules: Vec<Rule>,
    /// The workspace this policy is for, when several are served.
    workspace: Option<String>,
    secrets: Secrets,
    waivers: Waivers,
    limits: Limits,
    content: Option<ContentScanner>,
    /// `[agent]` in force (the older `[sandbox] agent_system_paths` folded in), checked.
    agent: fsgate_sandbox::AgentSettings,
    /// The sections other layers read, typed, with their defaults.
    settings: Settings,
    raw: RawPolicy,
    sha256: String,
    origin: String,
    /// The files an `extends` chain read, base first (empty: a single file).
    bases: Vec<String>,
    /// Their texts as read, for what is compared as written (`policy diff`).
    base_texts: Vec<String>,
    /// Rules written by a base file: (rule id, file).
    inherited: Vec<(String, String)>,
    /// Sets named in rules' `paths`: (rule id, set name). Kept as composed; only the
    /// tests read it so far.
    #[cfg_attr(not(test), expect(dead_code, reason = "read only by the tests so far"))]
    set_refs: Vec<(String, String)>,
    /// Paths no policy can allow: fsgate's own audit log, backups and policy file when
    /// they lie inside the workspace. Set by the gateway at start-up.
    floor: floor::FixedFloor,
}

impl Policy {
    /// Loads the built-in default policy.
    pub fn builtin_default() -> Result<Policy, PolicyError> {
        Policy::from_toml(DEFAULT_POLICY_TOML, "<built-in default policy>")
    }

    /// Loads a policy file. A gitleaks config it names is read relative to its directory.
    /// A policy whose `[agent]` section reaches the file itself is refused.
    ///
    /// # Ambient Authority
    /// Reads `path` (and the gitleaks config it names) from the ambient filesystem;
    /// start-up code only.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty());
        let policy = Policy::from_toml_in(
            &text,
            &path.display().to_string(),
            Some(base.unwrap_or(Path::new("."))),
        )?;
        compile::check_agent_policy_file(policy.agent(), path, &text)?;
        for base in &policy.bases {
            compile::check_agent_policy_file(policy.agent(), Path::new(base), &text)?;
        }
        Ok(policy)
    }

    /// Parses and compiles policy text; `origin` names it in errors. A relative
    /// `[content] gitleaks_config` is resolved against the current directory.
    pub fn from_toml(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        Policy::from_toml_in(text, origin, None)
    }

    /// Parses and compiles policy text whose relative paths are relative to `base`.
    ///
    /// # Ambient Authority
    /// Reads the gitleaks config the policy names, if any.
    pub fn from_toml_in(
        text: &str,
        origin: &str,
        base: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| PolicyError::Parse {
            origin: origin.to_string(),
            message: describe_toml_error(&e, text),
        })?;
        let built = compose::build(raw, text, origin, base)?;
        let compiled = built.compiled;
        Ok(Policy {
            rules: compiled
                .rules
                .iter()
                .filter(|r| r.applies_in(None))
                .cloned()
                .collect(),
            all_rules: compiled.rules,
            workspace: None,
            secrets: compiled.secrets,
            waivers: compiled.waivers,
            limits: compiled.limits,
            content: compiled.content,
            agent: compiled.agent,
            settings: Settings::of(&built.raw, base),
            raw: built.raw,
            sha256: built.sha256,
            origin: origin.to_string(),
            bases: built.bases,
            base_texts: built.base_texts,
            inherited: built.inherited,
            set_refs: built.set_refs,
            floor: floor::FixedFloor::default(),
        })
    }

    /// The policy as it applies in the workspace `name`: the rules for every workspace
    /// and those whose `workspaces` name it, in file order.
    pub fn for_workspace(&self, name: &str) -> Policy {
        let mut p = self.clone();
        p.rules = self
            .all_rules
            .iter()
            .filter(|r| r.applies_in(Some(name)))
            .cloned()
            .collect();
        p.workspace = Some(name.to_string());
        p
    }

    /// This policy with `other`'s refusals added: its secret names (and their waivers)
    /// and its `deny` rules, scoped as they were. `fsgate undo` runs under a policy that
    /// allows what the changes it undoes did, yet never where the gateway's policy
    /// refuses every agent (`.git/hooks`, a `deny` rule), whatever `--force` says.
    pub fn with_denials_of(mut self, other: &Policy) -> Policy {
        self.secrets = other.secrets.clone();
        self.waivers = other.waivers.clone();
        let denials = |rules: &[Rule]| -> Vec<Rule> {
            rules
                .iter()
                .filter(|r| r.effect == Effect::Deny)
                .cloned()
                .collect()
        };
        let mut rules = denials(&other.rules);
        rules.append(&mut self.rules);
        self.rules = rules;
        let mut all = denials(&other.all_rules);
        all.append(&mut self.all_rules);
        self.all_rules = all;
        self.workspace = other.workspace.clone();
        self
    }

    /// The workspace this policy was narrowed to ([`Policy::for_workspace`]).
    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    /// Every workspace name a rule is scoped to.
    pub fn scoped_workspaces(&self) -> std::collections::BTreeSet<&str> {
        self.all_rules
            .iter()
            .filter_map(|r| r.workspaces.as_ref())
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// Marks paths that no rule can allow (fsgate's own files inside the workspace).
    pub fn set_floor(&mut self, floor: floor::FixedFloor) {
        self.floor = floor;
    }

    /// The fixed floor in force.
    pub fn floor(&self) -> &floor::FixedFloor {
        &self.floor
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The rule with id `id`, if any.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules().iter().find(|r| r.id == id)
    }

    /// The compiled rules, in file order.
    pub(crate) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The secret-name patterns in force.
    pub(crate) fn secret_patterns(&self) -> &[SecretPattern] {
        &self.secrets.patterns
    }

    /// Compiles now what is otherwise compiled on first use (the secret-name set, the
    /// content rules' keyword prefilter), so that `policy check` reports what a gateway
    /// would only meet at its first request.
    pub(crate) fn compile_deferred(&self) -> Result<(), PolicyError> {
        let invalid = |key: &str, message: &str| PolicyError::Invalid {
            key: key.into(),
            line: 0,
            message: message.to_string(),
        };
        self.secrets
            .matcher()
            .map_err(|m| invalid("secrets.patterns", m))?;
        match &self.content {
            Some(c) => c.compile_deferred().map_err(|m| invalid("content", &m)),
            None => Ok(()),
        }
    }

    /// The built-in secret-name patterns waived by `[secrets] disabled_patterns`.
    pub(crate) fn waived_patterns(&self) -> &[SecretPattern] {
        &self.waivers.patterns
    }

    /// The base files an `extends` chain read, base first (empty for a single file).
    pub fn bases(&self) -> &[String] {
        &self.bases
    }

    /// The texts of [`Policy::bases`], as they were read when the policy loaded.
    pub(crate) fn base_texts(&self) -> &[String] {
        &self.base_texts
    }

    /// The base file a rule comes from, when an `extends` chain merged it in (its
    /// `line` is a line of that file); `None` for the policy's own rules.
    pub(crate) fn rule_origin(&self, id: &str) -> Option<&str> {
        self.inherited
            .iter()
            .find(|(rule, _)| rule == id)
            .map(|(_, file)| file.as_str())
    }

    /// The `[sets]` a rule's `paths` named (`"@infra"` -> `infra`), in order: its
    /// `globs` hold the sets' globs, expanded.
    #[cfg(test)]
    pub(crate) fn rule_sets(&self, id: &str) -> impl Iterator<Item = &str> {
        self.set_refs
            .iter()
            .filter(move |(rule, _)| rule == id)
            .map(|(_, set)| set.as_str())
    }

    /// The secret content rules, if the policy has a `[content]` section. The gateway
    /// scans read and written bytes with it when [`ContentScanner::applies_to`] the op;
    /// a hit refuses with the rule id `content:<id>`.
    pub fn content_scanner(&self) -> Option<&ContentScanner> {
        self.content.as_ref()
    }

    /// The `[agent]` section in force, validated: a confined agent's own paths,
    /// environment, network and Unix sockets (defaults when the policy has none).
    pub fn agent(&self) -> &fsgate_sandbox::AgentSettings {
        &self.agent
    }

    /// The sections other layers own (`[audit]`, `[backup]`, `[sandbox]`, `[acp]`,
    /// `[ws]`, `[http]`), as they are used.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The raw file, for the policy tools (check, diff, the test runner).
    pub fn raw(&self) -> &RawPolicy {
        &self.raw
    }

    /// SHA-256 (hex) of the policy text, or of every text of an `extends` chain (base
    /// first, each followed by a NUL byte): names the policy in audit records.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Where the policy came from (a path, or the built-in default).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// True if some allow or ask rule covers `op` at all: drives ACP capability flags and
    /// Landlock rights the kernel grants.
    pub fn can_ever(&self, op: OpClass) -> bool {
        self.rules
            .iter()
            .any(|r| r.effect != Effect::Deny && r.ops[op as usize])
    }
}

/// The parser's message on one line, with line and column.
fn describe_toml_error(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (line, col) = compile::line_col(text, span.start);
            // Quote the offending line so the key is named even when the parser's
            // message only names the value.
            let source = text
                .lines()
                .nth(line.saturating_sub(1))
                .unwrap_or("")
                .trim();
            if source.is_empty() || source.len() > 120 {
                format!("line {line}, column {col}: {msg}")
            } else {
                format!("line {line}, column {col}: {msg} (in `{source}`)")
            }
        }
        None => msg,
    }
}

pub use fsgate_base::state::valid_workspace_name;

#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod tests;
