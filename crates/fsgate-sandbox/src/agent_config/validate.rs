//! Checks of `[agent]`: values that parse but are wrong, entries that reach a protected
//! path, and (for `policy check` warnings) entries that reach credentials.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::{
    AgentConfigError, AgentSettings, NetworkSetting, ProtectedReach, SET_BY_FSGATE, expand, invalid,
};
use crate::plan::{AgentAccess, Protected};

/// Places under the operator's home where credentials usually live: a grant reaching
/// one draws a `policy check` warning.
pub(crate) const CREDENTIAL_PLACES: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".config/gcloud",
    ".azure",
];

/// Prefixes of model services' variables: credentials the agent is meant to have.
const MODEL_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "OPENAI_",
    "AZURE_OPENAI_",
    "GEMINI_",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_",
    "MISTRAL_",
    "GROQ_",
    "OPENROUTER_",
    "DEEPSEEK_",
    "XAI_",
];

/// Credential names a `PREFIX*` pattern must not cover.
const CREDENTIAL_SAMPLES: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "NPM_TOKEN",
    "DB_PASSWORD",
    "CLIENT_SECRET",
];

/// True if an `env` entry names (or, as a pattern, covers) a credential that is not a
/// model service's key: `AWS_*`, `GITHUB_TOKEN`, `GH_TOKEN`, `*_TOKEN`, `*SECRET*`,
/// `*PASSWORD*`.
pub fn credential_env_name(entry: &str) -> bool {
    let upper = entry.to_ascii_uppercase();
    let (text, pattern) = match upper.strip_suffix('*') {
        Some(prefix) => (prefix, true),
        None => (upper.as_str(), false),
    };
    if MODEL_PREFIXES.iter().any(|m| text.starts_with(m)) {
        return false;
    }
    let looks = text.starts_with("AWS_")
        || text == "GITHUB_TOKEN"
        || text == "GH_TOKEN"
        || text.ends_with("_TOKEN")
        || text.contains("SECRET")
        || text.contains("PASSWORD");
    looks || (pattern && CREDENTIAL_SAMPLES.iter().any(|c| c.starts_with(text)))
}

impl AgentSettings {
    /// The first mistake in the section (see [`Self::problems`]).
    pub fn validate(&self, user_home: Option<&Path>) -> Result<(), AgentConfigError> {
        match self.problems(user_home).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every mistake, in section order: paths neither absolute nor `~/...`, with `..`,
    /// naming the whole home, or `~/` without a home; bad variable names; a bad network.
    pub fn problems(&self, user_home: Option<&Path>) -> Vec<AgentConfigError> {
        let mut out: Vec<AgentConfigError> = self
            .path_entries()
            .iter()
            .filter_map(|e| {
                path_problem(e.value, user_home).map(|m| invalid(&e.key, e.span.clone(), m))
            })
            .collect();
        for (i, name) in self.env.iter().enumerate() {
            if let Some(m) = env_problem(name.get_ref()) {
                out.push(invalid(&format!("agent.env[{i}]"), Some(name.span()), m));
            }
        }
        if let Some(net) = &self.network {
            out.extend(network_problems(net));
        }
        out
    }

    /// Refuses any entry that equals, contains or lies inside a protected path, compared
    /// as written and, where they exist, with symlinks resolved.
    pub fn check_protected(
        &self,
        protected: &[Protected],
        user_home: Option<&Path>,
    ) -> Result<(), AgentConfigError> {
        match self
            .protected_violations(protected, user_home)
            .into_iter()
            .next()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every entry that reaches a protected path (see [`Self::check_protected`]).
    pub fn protected_violations(
        &self,
        protected: &[Protected],
        user_home: Option<&Path>,
    ) -> Vec<AgentConfigError> {
        let mut out = Vec::new();
        for e in self.path_entries() {
            let Some(path) = expand(e.value, user_home) else {
                continue;
            };
            if let Some((relation, prot)) = protected
                .iter()
                .find_map(|p| relation(&path, &p.path).map(|r| (r, p)))
            {
                out.push(AgentConfigError::Protected(Box::new(ProtectedReach {
                    key: e.key.clone(),
                    span: e.span.clone(),
                    path,
                    relation,
                    label: prot.label.clone(),
                    protected: prot.path.clone(),
                    verb: verb(e.access),
                })));
            }
        }
        out
    }

    /// Entries reaching a `CREDENTIAL_PLACES` entry under `user_home`: (key, span,
    /// the place as `~/...`).
    pub fn credential_grants(
        &self,
        user_home: &Path,
    ) -> Vec<(String, Option<std::ops::Range<usize>>, String)> {
        let mut out = Vec::new();
        for e in self.path_entries() {
            let Some(path) = expand(e.value, Some(user_home)) else {
                continue;
            };
            if let Some(place) = CREDENTIAL_PLACES
                .iter()
                .find(|c| relation(&path, &user_home.join(c)).is_some())
            {
                out.push((e.key.clone(), e.span.clone(), format!("~/{place}")));
            }
        }
        out
    }
}

/// What an entry lets the agent do, for messages.
fn verb(access: Option<AgentAccess>) -> &'static str {
    match access {
        Some(AgentAccess::Read) | Some(AgentAccess::ReadExec) => "read",
        Some(AgentAccess::ReadWrite | AgentAccess::Scratch { .. }) => "read and change",
        None => "connect to",
    }
}

/// How `a` stands to `p`: "is", "contains" or "lies inside"; None if apart. Compared as
/// written and with symlinks resolved (for whichever exists), so a link to a protected
/// directory is caught.
fn relation(a: &Path, p: &Path) -> Option<&'static str> {
    let forms = |x: &Path| -> Vec<PathBuf> {
        let mut v = vec![x.to_path_buf()];
        if let Ok(c) = std::fs::canonicalize(x)
            && c != x
        {
            v.push(c);
        }
        v
    };
    let (fa, fp) = (forms(a), forms(p));
    fa.iter().find_map(|a| {
        fp.iter().find_map(|p| {
            if a == p {
                Some("is")
            } else if p.starts_with(a) {
                Some("contains")
            } else if a.starts_with(p) {
                Some("lies inside")
            } else {
                None
            }
        })
    })
}

fn path_problem(text: &str, user_home: Option<&Path>) -> Option<String> {
    if text.is_empty() {
        return Some("an empty path".into());
    }
    if text.contains('\0') {
        return Some(format!("{text:?} contains a NUL byte"));
    }
    if text == "~" || text == "~/" {
        return Some(whole_home(text));
    }
    if text.starts_with('~') && !text.starts_with("~/") {
        return Some(format!(
            "`{text}`: only `~/` (the operator's home) is understood; write `~/...` or an absolute path"
        ));
    }
    if !text.starts_with("~/") && !Path::new(text).is_absolute() {
        return Some(format!(
            "`{text}` is relative: fsgate would resolve it against whatever directory it was started in, so the agent's access would change with it; write an absolute path or `~/...`"
        ));
    }
    if text.split('/').any(|c| c == "..") {
        return Some(format!(
            "`{text}` contains `..`: write the path it means without it, so the policy says plainly what the agent gets"
        ));
    }
    let Some(path) = expand(text, user_home) else {
        return Some(format!(
            "`{text}` starts with `~/` but HOME is not set (or not absolute): write an absolute path"
        ));
    };
    match user_home {
        Some(h) if h.starts_with(&path) => Some(whole_home(text)),
        _ => None,
    }
}

fn whole_home(text: &str) -> String {
    format!(
        "`{text}` would give the agent the operator's whole home directory (keys, tokens, every project); name the directories it needs"
    )
}

fn env_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("an empty variable name".into());
    }
    if name.contains(['=', '\0']) {
        return Some(format!(
            "{name:?} contains `=` or a NUL byte: not a variable name"
        ));
    }
    if name == "*" {
        return Some(
            "a bare `*` would pass the whole environment, which is exactly what this list replaces; name the variables (or `PREFIX_*`)"
                .into(),
        );
    }
    if name.trim_end_matches('*').contains('*') || name.ends_with("**") {
        return Some(format!("`{name}`: `*` may only end a name, once (`LC_*`)"));
    }
    if SET_BY_FSGATE.contains(&name) {
        return Some(format!(
            "{name} is set by fsgate (the agent's scratch dir, or [agent] home / tmpdir), never passed through"
        ));
    }
    None
}

fn network_problems(net: &Spanned<NetworkSetting>) -> Vec<AgentConfigError> {
    let key = "agent.network";
    match net.get_ref() {
        NetworkSetting::Mode(m) if m == "all" || m == "none" => Vec::new(),
        NetworkSetting::Mode(m) => vec![invalid(
            key,
            Some(net.span()),
            format!("`{m}`: expected \"all\", \"none\" or a list of TCP ports"),
        )],
        NetworkSetting::Ports(ports) if ports.is_empty() => vec![invalid(
            key,
            Some(net.span()),
            "an empty port list: write network = \"none\" for no TCP at all".into(),
        )],
        NetworkSetting::Ports(ports) => {
            let mut seen = HashSet::new();
            let mut out = Vec::new();
            for (i, p) in ports.iter().enumerate() {
                let n = *p.get_ref();
                let message = if !(1..=65535).contains(&n) {
                    format!("port {n} is outside 1..=65535")
                } else if !seen.insert(n) {
                    format!("port {n} is listed twice")
                } else {
                    continue;
                };
                out.push(invalid(&format!("{key}[{i}]"), Some(p.span()), message));
            }
            out
        }
    }
}
