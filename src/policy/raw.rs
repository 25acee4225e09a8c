//! The policy file as written: serde structs mirroring the TOML, strict about keys.
//!
//! `deny_unknown_fields` everywhere: a typo in a policy must be an error, never a
//! silently ignored key that leaves access wider than the author meant.

use serde::Deserialize;
use toml::Spanned;

/// The whole policy file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// Format version; only 1 exists.
    pub version: Spanned<u32>,
    /// Secret-name patterns matched on every path component.
    #[serde(default)]
    pub secrets: RawSecrets,
    /// Size and content limits.
    #[serde(default)]
    pub limits: RawLimits,
    /// Allow and deny rules, in file order.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RawRule>,
    /// Test cases the policy carries for itself (`fsgate policy test`).
    #[serde(default, rename = "test")]
    pub tests: Vec<RawTest>,
    // WIRE: [audit], [backup], [sandbox] sections land with their modules.
}

/// `[secrets]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecrets {
    /// Keep the built-in secret-name list.
    #[serde(default = "yes")]
    pub builtin: bool,
    /// Extra patterns.
    #[serde(default)]
    pub patterns: Vec<RawSecretPattern>,
}

impl Default for RawSecrets {
    fn default() -> Self {
        RawSecrets {
            builtin: true,
            patterns: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}

/// One `[[secrets.patterns]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSecretPattern {
    /// Name used in refusals and audit records (`secrets:<id>`).
    pub id: String,
    /// Regex matched case-insensitively against each path component.
    pub regex: Spanned<String>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Largest file the agent may read, in bytes.
    pub max_read_bytes: Option<u64>,
    /// Largest content the agent may write in one request, in bytes.
    pub max_write_bytes: Option<u64>,
    /// What to do with binary content.
    pub binary: Option<BinaryMode>,
    /// Largest single protocol message (one JSON-RPC line), in bytes.
    pub max_message_bytes: Option<u64>,
}

/// How binary files are treated on read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryMode {
    /// Refuse to read binary files.
    Deny,
    /// `_fsgate/read_file` returns them base64-encoded.
    Base64,
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Grants the operation.
    Allow,
    /// Refuses the operation; wins over any allow.
    Deny,
}

/// One `[[rule]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Unique name, shown in refusals and audit records.
    pub id: Spanned<String>,
    /// allow or deny.
    pub effect: Effect,
    /// Operation classes covered: read, write, delete, list, or "*".
    pub ops: Vec<Spanned<String>>,
    /// Workspace-relative globs; a directory glob covers everything beneath it.
    #[serde(default)]
    pub paths: Vec<Spanned<String>>,
    /// File extensions (without the dot, case-insensitive) the rule is limited to.
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
    /// Human explanation, shown in refusals.
    #[serde(default)]
    pub reason: Option<String>,
}

/// One `[[test]]` case.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    /// Operation class: read, write, delete or list.
    pub op: Spanned<String>,
    /// Workspace-relative path.
    pub path: String,
    /// "allow" or "deny".
    pub expect: Effect,
    /// The rule expected to decide.
    #[serde(default)]
    pub rule: Option<String>,
    /// Content for content rules.
    #[serde(default)]
    pub content: Option<String>,
    /// Whether the path is a directory (default: a file).
    #[serde(default)]
    pub dir: bool,
}
