//! The `[agent]` policy section: what a confined agent (`fsgate acp --confine-agent`)
//! may reach besides fsgate's built-ins, the environment it gets, its TCP network and
//! the pathname Unix sockets it may connect to.
//!
//! ```toml
//! [agent]
//! read = ["~/.config/agent-x"]        # read
//! read_write = ["~/.cache/agent-x"]   # read and write
//! execute = ["~/tools"]               # read and execute
//! home = "~/.agent-home"              # real HOME (read-write) instead of the scratch dir
//! tmpdir = "/var/tmp/agent"           # real TMPDIR (read-write) instead of the scratch dir
//! env = ["ANTHROPIC_API_KEY", "LC_*"] # passed through, on top of DEFAULT_AGENT_ENV
//! network = "all"                     # "all" | "none" | [443, 11434]
//! unix_sockets = ["/run/user/1000/bus"]
//! system_paths = ["/usr", "/lib"]     # replaces the built-in read+exec system list
//! discover = true                     # grant the agent's own installation
//! profile = "auto"                    # turn the agent's built-in file tools off
//! ```
//!
//! Values keep their position in the file (`toml::Spanned`), so every refusal points at
//! the exact entry.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use toml::Spanned;

use crate::config::SandboxSettings;
use crate::plan::{AgentAccess, AgentGrant, AgentNetwork};

/// Environment variables a confined agent gets without the policy naming them: what a
/// program needs to find its tools, speak the user's language, draw text and trust the
/// machine's TLS certificate authorities (the CA-bundle variables hold file names, no
/// secret; without them an agent behind a TLS-inspecting proxy cannot reach its model).
/// `LC_*` is every locale category. HOME and TMPDIR are not passed through: fsgate sets them (to
/// the agent's scratch dir, or `[agent] home` / `tmpdir`). Everything else, tokens and
/// keys included, stays behind unless `[agent] env` names it.
pub(crate) const DEFAULT_AGENT_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Variables fsgate sets for the agent itself; never taken from the environment.
const SET_BY_FSGATE: &[&str] = &["HOME", "TMPDIR"];

/// `[agent]`: the confined agent's own files, environment, network and sockets.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSettings {
    /// Paths the agent may read (a directory with everything beneath it): absolute, or
    /// `~/...` under the operator's home. They must not reach the workspace or fsgate's
    /// own files.
    #[schemars(with = "Vec<String>")]
    pub read: Vec<Spanned<String>>,
    /// Paths the agent may read and write (create, change, remove; no execute).
    #[schemars(with = "Vec<String>")]
    pub read_write: Vec<Spanned<String>>,
    /// Paths the agent may read and execute (tools, interpreters, installations).
    #[schemars(with = "Vec<String>")]
    pub execute: Vec<Spanned<String>>,
    /// The agent's HOME, granted read-write. Default: a private scratch directory fsgate
    /// creates for the session and empties afterwards.
    #[schemars(with = "Option<String>")]
    pub home: Option<Spanned<String>>,
    /// The agent's TMPDIR, granted read-write. Default: the same scratch directory.
    #[schemars(with = "Option<String>")]
    pub tmpdir: Option<Spanned<String>>,
    /// Environment variables passed to the agent on top of the default list (PATH, LANG,
    /// LANGUAGE, LC_*, TERM, TZ, USER, LOGNAME): exact names, or a prefix ending in `*`
    /// (`LC_*`). Nothing else of fsgate's environment reaches the agent. HOME and TMPDIR
    /// are set by fsgate and cannot be listed.
    #[schemars(with = "Vec<String>")]
    pub env: Vec<Spanned<String>>,
    /// TCP the agent may use (enforced with Landlock ABI 4 or later): "all" (default),
    /// "none", or a list of ports it may connect to (no listening).
    #[schemars(with = "Option<NetworkSchema>")]
    pub network: Option<Spanned<NetworkSetting>>,
    /// Pathname Unix sockets the agent may connect to (D-Bus, an SSH agent...). Default:
    /// none.
    #[schemars(with = "Vec<String>")]
    pub unix_sockets: Vec<Spanned<String>>,
    /// Paths the agent may read and execute, replacing fsgate's built-in list of system
    /// directories (/usr, /lib, parts of /etc, ...). Replaces the older
    /// `[sandbox] agent_system_paths`, which is still accepted; setting both is an error.
    #[schemars(with = "Option<Vec<String>>")]
    pub system_paths: Option<Vec<Spanned<String>>>,
    /// Grant the agent's own installation read+execute (its resolved executable, the
    /// interpreter's prefix, script files named on its command line and their package
    /// roots). Default true.
    pub discover: bool,
    /// Which agent's documented settings fsgate applies to turn its built-in file tools
    /// off (see docs/agents.md): "auto" (default: detected from the agent's command),
    /// "none", or one of "claude-agent-acp", "gemini-cli", "fast-agent", "opencode",
    /// "codex-acp".
    pub profile: super::profile::ProfileSetting,
    /// `system_paths` came from `[sandbox] agent_system_paths` (keys and positions).
    #[serde(skip)]
    legacy_system_paths: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            read: Vec::new(),
            read_write: Vec::new(),
            execute: Vec::new(),
            home: None,
            tmpdir: None,
            env: Vec::new(),
            network: None,
            unix_sockets: Vec::new(),
            system_paths: None,
            discover: true,
            profile: super::profile::ProfileSetting::Auto,
            legacy_system_paths: false,
        }
    }
}

/// `network` as written: a mode, or ports with their positions.
#[derive(Debug, Clone, PartialEq)]
pub enum NetworkSetting {
    /// `"all"` or `"none"` (anything else is refused at validation).
    Mode(String),
    /// Connect ports, as written (range checked at validation).
    Ports(Vec<Spanned<i64>>),
}

impl<'de> Deserialize<'de> for NetworkSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NetworkSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"all\", \"none\" or a list of TCP ports")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NetworkSetting, E> {
                Ok(NetworkSetting::Mode(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NetworkSetting, A::Error> {
                let mut ports = Vec::new();
                while let Some(p) = seq.next_element::<Spanned<i64>>()? {
                    ports.push(p);
                }
                Ok(NetworkSetting::Ports(ports))
            }
        }
        // Not an untagged enum: that would buffer the value and lose the ports' spans.
        d.deserialize_any(V)
    }
}

/// "all", "none", or the TCP ports the agent may connect to.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum NetworkSchema {
    /// "all" or "none".
    Mode(NetworkMode),
    /// TCP ports the agent may connect to.
    Ports(#[schemars(length(min = 1))] Vec<Port>),
}

/// Every TCP connect and bind, or none.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum NetworkMode {
    /// Every TCP connect and bind (the default).
    All,
    /// No TCP at all.
    None,
}

/// A TCP port.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Port(#[schemars(range(min = 1, max = 65535))] u16);

/// A mistake in `[agent]`, or an entry that would reach a protected path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentConfigError {
    /// A value that parses but is not valid.
    #[error("{key}: {message}")]
    Invalid {
        /// `agent.read[2]`, `agent.network`, `sandbox.agent_system_paths[0]`...
        key: String,
        /// Byte range of the value in the policy text (None: not known).
        span: Option<Range<usize>>,
        /// What is wrong and why.
        message: String,
    },
    /// An entry equal to, containing or inside a path the agent must never reach.
    #[error("{0}")]
    Protected(Box<ProtectedReach>),
}

/// An `[agent]` entry that reaches a protected path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{key}: {path} {relation} the {label} {protected}: the agent could {verb} it without the gateway"
)]
pub struct ProtectedReach {
    /// The entry's key and index.
    pub key: String,
    /// Byte range of the value in the policy text (None: not known).
    pub span: Option<Range<usize>>,
    /// The entry, `~` expanded.
    pub path: PathBuf,
    /// "is", "contains" or "lies inside".
    pub relation: &'static str,
    /// What the protected path is ("audit log directory", "workspace", ...).
    pub label: String,
    /// The protected path.
    pub protected: PathBuf,
    /// What the entry would let the agent do there ("read", "read and change"...).
    pub verb: &'static str,
}

impl AgentConfigError {
    /// The key and index the error is about (`agent.read[2]`).
    pub fn key(&self) -> &str {
        match self {
            AgentConfigError::Invalid { key, .. } => key,
            AgentConfigError::Protected(r) => &r.key,
        }
    }

    /// Byte range of the offending value in the policy text, when known.
    pub fn span(&self) -> Option<Range<usize>> {
        match self {
            AgentConfigError::Invalid { span, .. } => span.clone(),
            AgentConfigError::Protected(r) => r.span.clone(),
        }
    }

    /// The message without the key.
    pub fn message(&self) -> String {
        let full = self.to_string();
        full.strip_prefix(&format!("{}: ", self.key()))
            .map_or(full.clone(), str::to_owned)
    }

    /// The TOML key alone (`read` for `agent.read[2]`), for finding its line.
    pub fn field(&self) -> &str {
        let key = self.key();
        let last = key.rsplit('.').next().unwrap_or(key);
        last.split('[').next().unwrap_or(last)
    }

    /// The table the key lives in (`agent` or `sandbox`).
    pub fn section(&self) -> &str {
        self.key().split('.').next().unwrap_or("agent")
    }
}

fn invalid(key: &str, span: Option<Range<usize>>, message: String) -> AgentConfigError {
    AgentConfigError::Invalid {
        key: key.to_owned(),
        span,
        message,
    }
}

/// One path-valued entry of the section, with its key and what it grants.
pub(crate) struct PathEntry<'a> {
    /// `agent.read[2]`.
    pub key: String,
    /// The text as written.
    pub value: &'a str,
    /// Its position.
    pub span: Option<Range<usize>>,
    /// What it grants (None: a Unix socket to connect to).
    pub access: Option<AgentAccess>,
}

/// The operator's home directory (`$HOME`, if set and absolute): what `~/` expands to.
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// `~/x` under `user_home`, or the path as written; None for `~/` without a home.
fn expand(text: &str, user_home: Option<&Path>) -> Option<PathBuf> {
    match text.strip_prefix("~/") {
        Some(rest) => user_home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(text)),
    }
}

impl AgentSettings {
    /// The section in force: `[agent]`, with `system_paths` taken from the older
    /// `[sandbox] agent_system_paths` when only that is set. Both set is an error.
    pub fn from_sections(
        agent: Option<&AgentSettings>,
        sandbox: Option<&SandboxSettings>,
    ) -> Result<AgentSettings, AgentConfigError> {
        let mut out = agent.cloned().unwrap_or_default();
        let Some(old) = sandbox.and_then(|s| s.agent_system_paths.as_ref()) else {
            return Ok(out);
        };
        if let Some(new) = &out.system_paths {
            return Err(invalid(
                "agent.system_paths",
                new.first().map(Spanned::span),
                "both [agent] system_paths and the older [sandbox] agent_system_paths are set; \
                 keep only [agent] system_paths"
                    .into(),
            ));
        }
        out.system_paths = Some(
            old.iter()
                .map(|p| Spanned::new(0..0, p.to_string_lossy().into_owned()))
                .collect(),
        );
        out.legacy_system_paths = true;
        Ok(out)
    }

    /// File grants from `read`, `read_write`, `execute`, `home` and `tmpdir`, `~/`
    /// expanded against `user_home`, each with its source (`"[agent] read"`). Not
    /// `system_paths` (see [`Self::system_paths`]) nor `unix_sockets`.
    pub fn grants(&self, user_home: Option<&Path>) -> Vec<AgentGrant> {
        self.path_entries()
            .into_iter()
            .filter(|e| !e.key.contains("system_paths"))
            .filter_map(|e| {
                let access = e.access?;
                let path = expand_or_warn(&e, user_home)?;
                let field = e.key.split('[').next().unwrap_or(&e.key);
                let field = field.strip_prefix("agent.").unwrap_or(field);
                Some(AgentGrant {
                    path,
                    access,
                    source: format!("[agent] {field}"),
                })
            })
            .collect()
    }

    /// The agent's environment: of `vars` (fsgate's own environment), the variables
    /// `DEFAULT_AGENT_ENV` or `env` names, in their order. Never HOME or TMPDIR (fsgate
    /// sets those), never a name that is not UTF-8.
    pub fn environment(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.into_iter().filter(|(k, _)| self.passes(k)).collect()
    }

    /// Whether the variable `name` reaches the agent.
    pub(crate) fn passes(&self, name: &OsStr) -> bool {
        let Some(name) = name.to_str() else {
            return false;
        };
        if SET_BY_FSGATE.contains(&name) {
            return false;
        }
        DEFAULT_AGENT_ENV
            .iter()
            .copied()
            .chain(self.env.iter().map(|s| s.get_ref().as_str()))
            .any(|pattern| env_matches(pattern, name))
    }

    /// The TCP network: `All` unless the section says otherwise. Call after validation
    /// (an invalid value reads as `None`, the safe side).
    pub fn network(&self) -> AgentNetwork {
        match self.network.as_ref().map(Spanned::get_ref) {
            None => AgentNetwork::All,
            Some(NetworkSetting::Mode(m)) if m == "all" => AgentNetwork::All,
            Some(NetworkSetting::Mode(_)) => AgentNetwork::None,
            Some(NetworkSetting::Ports(ports)) => {
                let mut out: Vec<u16> = ports
                    .iter()
                    .filter_map(|p| u16::try_from(*p.get_ref()).ok())
                    .filter(|p| *p != 0)
                    .collect();
                out.sort_unstable();
                out.dedup();
                if out.is_empty() {
                    AgentNetwork::None
                } else {
                    AgentNetwork::Ports(out)
                }
            }
        }
    }

    /// The pathname Unix sockets the agent may connect to, `~/` expanded.
    pub fn unix_sockets(&self, user_home: Option<&Path>) -> Vec<PathBuf> {
        self.path_entries()
            .iter()
            .filter(|e| e.access.is_none())
            .filter_map(|e| expand_or_warn(e, user_home))
            .collect()
    }

    /// The agent's real HOME, if the section names one (else the scratch dir).
    pub fn home(&self, user_home: Option<&Path>) -> Option<PathBuf> {
        self.home
            .as_ref()
            .and_then(|h| expand(h.get_ref(), user_home))
    }

    /// The agent's real TMPDIR, if the section names one (else the scratch dir).
    pub fn tmpdir(&self, user_home: Option<&Path>) -> Option<PathBuf> {
        self.tmpdir
            .as_ref()
            .and_then(|t| expand(t.get_ref(), user_home))
    }

    /// The read+exec system paths replacing the built-in list
    /// ([`super::DEFAULT_AGENT_SYSTEM_PATHS`]); None keeps the built-in list.
    pub fn system_paths(&self, user_home: Option<&Path>) -> Option<Vec<PathBuf>> {
        self.system_paths.as_ref().map(|paths| {
            paths
                .iter()
                .filter_map(|p| expand(p.get_ref(), user_home))
                .collect()
        })
    }

    /// Where `system_paths` comes from, for grant sources and messages.
    pub fn system_paths_source(&self) -> &'static str {
        if self.legacy_system_paths {
            "[sandbox] agent_system_paths"
        } else {
            "[agent] system_paths"
        }
    }

    /// Whether fsgate grants the agent's own installation (default true).
    pub fn discover(&self) -> bool {
        self.discover
    }

    /// Which agent profile to apply (default `auto`).
    pub fn profile(&self) -> super::profile::ProfileSetting {
        self.profile
    }

    /// Every path-valued entry with its key, position and access.
    pub(crate) fn path_entries(&self) -> Vec<PathEntry<'_>> {
        let mut out = Vec::new();
        let lists: [ListEntry<'_>; 4] = [
            ("agent.read", &self.read, Some(AgentAccess::Read)),
            (
                "agent.read_write",
                &self.read_write,
                Some(AgentAccess::ReadWrite),
            ),
            ("agent.execute", &self.execute, Some(AgentAccess::ReadExec)),
            ("agent.unix_sockets", &self.unix_sockets, None),
        ];
        for (key, items, access) in lists {
            out.extend(items.iter().enumerate().map(|(i, s)| PathEntry {
                key: format!("{key}[{i}]"),
                value: s.get_ref(),
                span: Some(s.span()),
                access,
            }));
        }
        for (key, item) in [("agent.home", &self.home), ("agent.tmpdir", &self.tmpdir)] {
            out.extend(item.iter().map(|s| PathEntry {
                key: key.to_owned(),
                value: s.get_ref(),
                span: Some(s.span()),
                access: Some(AgentAccess::ReadWrite),
            }));
        }
        let key = if self.legacy_system_paths {
            "sandbox.agent_system_paths"
        } else {
            "agent.system_paths"
        };
        for (i, s) in self.system_paths.iter().flatten().enumerate() {
            out.push(PathEntry {
                key: format!("{key}[{i}]"),
                value: s.get_ref(),
                span: (!self.legacy_system_paths).then(|| s.span()),
                access: Some(AgentAccess::ReadExec),
            });
        }
        out
    }
}

/// A list-valued key, its entries and what they grant.
type ListEntry<'a> = (&'a str, &'a [Spanned<String>], Option<AgentAccess>);

/// The entry `~/` expanded; None, with a warning, when there is no home to expand
/// against (validation refuses that, so only a changed environment gets here).
fn expand_or_warn(e: &PathEntry<'_>, user_home: Option<&Path>) -> Option<PathBuf> {
    let p = expand(e.value, user_home);
    if p.is_none() {
        tracing::warn!("{}: {} skipped: HOME is not set", e.key, e.value);
    }
    p
}

/// `LC_*` matches every name starting `LC_`; anything else only itself.
fn env_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

pub mod validate;

#[cfg(test)]
mod tests;
