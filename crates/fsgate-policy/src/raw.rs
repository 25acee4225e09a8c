//! The policy file as written: serde structs mirroring the TOML, strict about keys.
//!
//! `deny_unknown_fields` everywhere: a typo in a policy must be an error, never a
//! silently ignored key that leaves access wider than the author meant.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

pub(crate) use super::content::format::RawContent;
use fsgate_decide::{BinaryMode, Effect};

/// The whole policy file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// Format version; only 1 exists.
    #[schemars(with = "u32", range(min = 1, max = 1))]
    pub version: Spanned<u32>,
    /// A base policy this one extends (relative to this file's directory): its rules
    /// come first, and this file may only add denies or narrow its allows (see
    /// policies/README.md, "extends").
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub extends: Option<Spanned<String>>,
    /// Named path sets: `infra = ["infra/**", "terraform/**"]`, used in a rule's
    /// `paths` as `"@infra"`.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, Vec<String>>")]
    pub sets: std::collections::BTreeMap<String, Vec<Spanned<String>>>,
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
    /// Secret content rules (gitleaks format): refuse reads and writes of content that
    /// holds a secret. Absent: content is not scanned.
    #[serde(default)]
    pub content: Option<RawContent>,
    /// The audit log (`[audit]`), owned by the audit module.
    #[serde(default)]
    pub audit: Option<fsgate_audit::AuditSettings>,
    /// The backup store (`[backup]`), owned by the backup module.
    #[serde(default)]
    pub backup: Option<fsgate_backup::BackupSettings>,
    /// Landlock confinement (`[sandbox]`).
    #[serde(default)]
    pub sandbox: Option<fsgate_sandbox::SandboxSettings>,
    /// What a confined agent may reach, its environment and network (`[agent]`).
    #[serde(default)]
    pub agent: Option<fsgate_sandbox::AgentSettings>,
    /// The ACP proxy (`[acp]`).
    #[serde(default)]
    pub acp: Option<AcpSettings>,
    /// The WebSocket files channel (`[ws]`), owned by the ws transport.
    #[serde(default)]
    pub ws: Option<super::ws::WsSettings>,
    /// MCP over Streamable HTTP (`[http]`), owned by the http transport.
    #[serde(default)]
    pub http: Option<super::http::HttpSettings>,
    /// How long a person has to answer an `ask` rule (`[ask]`).
    #[serde(default)]
    pub ask: Option<super::oversight::AskSettings>,
    /// Telling the client what the gateway changed (`[notify]`).
    #[serde(default)]
    pub notify: Option<super::oversight::NotifySettings>,
    /// Staging changed files in git (`[vcs]`).
    #[serde(default)]
    pub vcs: Option<super::oversight::VcsSettings>,
}

/// `[secrets]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSecrets {
    /// Keep the built-in secret-name list (default true).
    #[serde(default)]
    pub builtin: Option<bool>,
    /// Built-in patterns to waive, by id (`secret` or `secrets:secret`): the waiver is
    /// shown by `policy explain` and recorded in the audit log.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub disabled_patterns: Vec<Spanned<String>>,
    /// Extra patterns.
    #[serde(default)]
    pub patterns: Vec<RawSecretPattern>,
}

impl RawSecrets {
    /// Whether the built-in list is on (it is unless `builtin = false`).
    pub(crate) fn builtin_on(&self) -> bool {
        self.builtin.unwrap_or(true)
    }
}

/// One `[[secrets.patterns]]` entry.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSecretPattern {
    /// Name used in refusals and audit records (`secrets:<id>`).
    pub id: String,
    /// Regex matched case-insensitively against each path component.
    #[schemars(with = "String")]
    pub regex: Spanned<String>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Largest file the agent may read, in bytes.
    pub max_read_bytes: Option<u64>,
    /// Largest content the agent may write in one request, in bytes.
    pub max_write_bytes: Option<u64>,
    /// What to do with binary content.
    pub binary: Option<BinaryMode>,
    /// Largest single protocol message (one JSON-RPC line), in bytes. Default 24 MiB:
    /// room for an MCP answer carrying a 10 MiB read twice (text and structured content).
    pub max_message_bytes: Option<u64>,
    /// Largest file a process may open or write through `fsgate run`'s view (and a
    /// confined agent's), in bytes. Default 256 MiB: a build's libraries and binaries.
    /// It stands for `max_read_bytes` and `max_write_bytes` there, which bound what
    /// reaches a model; the gateway holds such a file whole while it checks its content
    /// or applies a write, so it bounds the host's memory.
    pub max_process_file_bytes: Option<u64>,
}

/// One `[[rule]]`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Unique name, shown in refusals and audit records.
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    /// allow, deny or ask.
    pub effect: Effect,
    /// Operation classes covered: read, write, delete, list, or "*".
    #[schemars(with = "Vec<RuleOp>")]
    pub ops: Vec<Spanned<String>>,
    /// Workspace-relative globs; a directory glob covers everything beneath it.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub paths: Vec<Spanned<String>>,
    /// File extensions (without the dot, case-insensitive) the rule is limited to.
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
    /// Applies only to files of at least this many bytes (for a write, the larger of the
    /// file's current size and its new size). Directories never match a size condition.
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub min_size: Option<Spanned<u64>>,
    /// Applies only to files of at most this many bytes (as `min_size`).
    #[serde(default)]
    #[schemars(with = "Option<u64>")]
    pub max_size: Option<Spanned<u64>>,
    /// Human explanation, shown in refusals.
    #[serde(default)]
    pub reason: Option<String>,
    /// In a base policy: a policy that `extends` this one may replace the rule (same id)
    /// with anything. Default false: it may only narrow an allow rule.
    #[serde(default)]
    pub overridable: bool,
    /// The workspaces (names, as `--workspace NAME=DIR` gives them) the rule applies
    /// in, when several are served. Default: every workspace.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub workspaces: Option<Vec<Spanned<String>>>,
}

/// One `[[test]]` case.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    /// An operation class (read, write, delete, list) or a gateway operation (stat, ls,
    /// glob, tree, grep, edit, mkdir, rm), decided as the gateway decides it.
    #[schemars(with = "TestOp")]
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
    /// The file's size in bytes, for rules with `min_size` / `max_size` (default:
    /// unknown, and size-conditioned rules are judged as before the size is known).
    #[serde(default)]
    pub size: Option<u64>,
    /// The workspace the path lies in, for rules scoped with `workspaces` (default:
    /// none named: only the rules that apply in every workspace).
    #[serde(default)]
    pub workspace: Option<String>,
}

/// An operation class as written in a rule's `ops` (schema only; parsed in `compile`).
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum RuleOp {
    /// Reading content: read_text_file, read_file, grep.
    Read,
    /// Creating or changing: write, edit, mkdir, rename target.
    Write,
    /// Removing: rm, rename source.
    Delete,
    /// Seeing names and metadata: ls, stat, glob.
    List,
    /// Every operation class.
    #[serde(rename = "*")]
    All,
}

/// An operation as written in a `[[test]]` (schema only; parsed by `Access::parse`).
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub(crate) enum TestOp {
    /// Reading content.
    Read,
    /// Creating or changing.
    Write,
    /// Removing.
    Delete,
    /// Seeing names and metadata.
    List,
    /// Metadata of the path: `list` on it.
    Stat,
    /// The path appears in its parent's listing: `list` on the parent and on it.
    Ls,
    /// The path appears in a glob from the root: `list` on it and its ancestors.
    Glob,
    /// The path appears in a directory tree from the root: as `glob`.
    Tree,
    /// The file's lines can appear in search results: `list` on its ancestors, `list`
    /// and `read` on it, then the content rules.
    Grep,
    /// Edit the file: `write` (and `read`, for the text it replaces).
    Edit,
    /// Create the directory: `write` on it as a directory.
    Mkdir,
    /// Remove the path: `delete`.
    Rm,
}

/// `[acp]`: what the proxy lets a hosted agent do besides file access.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AcpSettings {
    /// Pass the agent's `terminal/*` requests to the editor (audited). Default false:
    /// they are refused.
    pub allow_terminal: bool,
}
