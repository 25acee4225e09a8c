//! The policy file: TOML loaded (`raw`), composed (`compose`) and compiled (`compile`)
//! into the decision engine of `fsgate-decide`, which a [`Policy`] derefs to.
//!
//! # Layer
//!
//! Owns: the policy file, every section of it, compose and `extends`, the content
//! rules, and the `policy` tools (check, explain, test, diff, schema). Depends on
//! `fsgate-base`, `fsgate-decide` (the engine it builds) and on the settings types of
//! `fsgate-audit`, `fsgate-backup` and `fsgate-sandbox` (the policy file holds their
//! sections). May not touch: the workspace or any door; it decides nothing itself.

pub mod cli;
mod compile;
mod compose;
pub(crate) mod content;
pub(crate) mod diff;
mod error;
pub mod floor;
mod full_decision;
pub mod http;
pub mod lint;
pub mod media;
pub(crate) mod oversight;
mod position;
pub(crate) mod raw;
pub(crate) mod schema;
mod settings;
pub mod testrun;
pub mod ws;

use std::path::Path;
use std::sync::Arc;

pub use content::{ContentHit, ContentScanner};
use fsgate_decide::{Engine, SecretPattern};
// The engine's names, for this crate's own modules only (never re-exported).
pub use error::PolicyError;
pub(crate) use fsgate_decide::{
    Access, DEFAULT_DENY, Decision, Effect, EntryKind, Limits, OpClass, PathFacts, Rule, TraceStep,
};
pub use raw::{AcpSettings, RawPolicy};
pub use settings::Settings;

/// The text of the built-in default policy (`policies/default.toml`).
pub const DEFAULT_POLICY_TOML: &str = include_str!("../../../policies/default.toml");

/// A loaded, compiled policy. Immutable; share it behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The decision engine built from the file: rules, secret names, limits, floor.
    pub(crate) engine: Engine,
    content: Option<ContentScanner>,
    /// `[agent]` in force (the older `[sandbox] agent_system_paths` folded in), checked.
    agent: fsgate_sandbox::AgentSettings,
    /// The sections other layers read, typed, with their defaults.
    settings: Settings,
    /// Shared: `policy check` copies the policy once per rule (`lint::only`).
    raw: Arc<RawPolicy>,
    sha256: String,
    origin: String,
    /// The files an `extends` chain read, base first (empty: a single file).
    bases: Vec<String>,
    /// Their texts as read, for what is compared as written (`policy diff`).
    base_texts: Arc<[String]>,
    /// Rules written by a base file: (rule id, file).
    inherited: Arc<[(String, String)]>,
    /// Sets named in rules' `paths`: (rule id, set name). Kept as composed; only the
    /// tests read it so far.
    #[cfg_attr(not(test), expect(dead_code, reason = "read only by the tests so far"))]
    set_refs: Arc<[(String, String)]>,
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
        compile::agent::check_agent_policy_file(policy.agent(), path, &text)?;
        for base in &policy.bases {
            compile::agent::check_agent_policy_file(policy.agent(), Path::new(base), &text)?;
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
            engine: Engine::new(
                compiled.rules,
                compiled.secrets,
                compiled.waivers,
                compiled.limits,
            ),
            content: compiled.content,
            agent: compiled.agent,
            settings: Settings::of(&built.raw, base),
            raw: Arc::new(built.raw),
            sha256: built.sha256,
            origin: origin.to_string(),
            bases: built.bases,
            base_texts: built.base_texts.into(),
            inherited: built.inherited.into(),
            set_refs: built.set_refs.into(),
        })
    }

    /// The policy as it applies in the workspace `name`: the rules for every workspace
    /// and those whose `workspaces` name it, in file order.
    pub fn for_workspace(&self, name: &str) -> Policy {
        let mut p = self.clone();
        p.engine = self.engine.for_workspace(name);
        p
    }

    /// This policy with `other`'s refusals added: its secret names (and their waivers)
    /// and its `deny` rules, scoped as they were. `fsgate undo` runs under a policy that
    /// allows what the changes it undoes did, yet never where the gateway's policy
    /// refuses every agent (`.git/hooks`, a `deny` rule), whatever `--force` says.
    pub fn with_denials_of(mut self, other: &Policy) -> Policy {
        self.engine = self.engine.with_denials_of(&other.engine);
        self
    }

    /// The decision engine built from the file.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Marks paths that no rule can allow (fsgate's own files inside the workspace).
    pub fn set_floor(&mut self, floor: fsgate_decide::floor::FixedFloor) {
        self.engine.set_floor(floor);
    }

    /// The secret-name patterns in force.
    pub(crate) fn secret_patterns(&self) -> &[SecretPattern] {
        self.engine.secrets().patterns()
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
        self.engine
            .secrets()
            .compile()
            .map_err(|m| invalid("secrets.patterns", m))?;
        match &self.content {
            Some(c) => c.compile_deferred().map_err(|m| invalid("content", &m)),
            None => Ok(()),
        }
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
}

/// A policy is its decision engine, with the file it was built from: every decision
/// (`decide`, `decide_access`, `entry_filter`, `limits`...) is the engine's.
impl std::ops::Deref for Policy {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// The parser's message on one line, with line and column.
fn describe_toml_error(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (line, col) = position::line_col(text, span.start);
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
mod access_tests;
#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod entries_tests;
#[cfg(test)]
mod tests;
