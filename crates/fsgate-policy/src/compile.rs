//! Raw policy -> compiled policy: globs and regexes built once, every error located.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use toml::Spanned;

use super::error::PolicyError;
use super::position::line_col;
use super::raw::{RawPolicy, RawRule};
use fsgate_base::path::RelPath;
use fsgate_decide::{BinaryMode, Condition, Effect, Secrets, Waivers};
use fsgate_decide::{Limits, OpClass, Rule, SecretPattern};
use fsgate_sandbox::agent_config::user_home;
use fsgate_sandbox::{AgentConfigError, AgentSettings, Protected};

/// Built-in secret-name patterns: (id, regex), matched case-insensitively per component.
pub(crate) const BUILTIN_SECRETS: &[(&str, &str)] = &[
    ("dotenv", r"^\.env(rc)?(\..*)?$"),
    ("ssh-private-key", r"^id_(rsa|dsa|ecdsa|ed25519)(_sk)?$"),
    ("ssh-dir", r"^\.ssh$"),
    (
        "key-material",
        r"\.(pem|key|p12|pfx|jks|keystore|kdbx|ppk)$",
    ),
    ("credentials", r"^\.?(git-)?credentials"),
    ("secret", r"secret"),
    ("netrc", r"^[._]?netrc$"),
    ("package-tokens", r"^\.(npmrc|pypirc|pgpass|dockercfg)$"),
    ("cloud-credentials", r"^\.(aws|azure|gnupg|kube|docker)$"),
    ("vcs-internals", r"^\.(git|hg|svn)$"),
];

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Default limits: 10 MiB reads and writes, binary denied, 24 MiB messages.
///
/// Why 24 MiB: an MCP answer carries a read twice (a text block and the structured
/// content its output schema promises, as the reference server's does), so a read of
/// `max_read_bytes` (10 MiB) needs a message of twice that plus its JSON escaping; 24 MiB
/// fits any 10 MiB text file whose escaping adds up to 20% (ordinary text adds 1-5%).
pub(crate) const DEFAULT_LIMITS: Limits = Limits {
    max_read_bytes: 10 * MIB,
    max_write_bytes: 10 * MIB,
    binary: BinaryMode::Deny,
    max_message_bytes: 24 * MIB,
};

fn at<T>(src: &str, s: &Spanned<T>) -> usize {
    line_col(src, s.span().start).0
}

pub(crate) struct Compiled {
    pub rules: Vec<Rule>,
    pub secrets: Secrets,
    pub waivers: Waivers,
    pub limits: Limits,
    pub content: Option<super::content::ContentScanner>,
    pub agent: AgentSettings,
}

/// `base`: the directory relative paths in the policy (a gitleaks config) are relative to.
pub(crate) fn compile(
    raw: &RawPolicy,
    src: &str,
    base: Option<&Path>,
) -> Result<Compiled, PolicyError> {
    if *raw.version.get_ref() != 1 {
        return Err(PolicyError::Invalid {
            key: "version".into(),
            line: at(src, &raw.version),
            message: format!(
                "unsupported version {}; this fsgate understands version 1",
                raw.version.get_ref()
            ),
        });
    }
    // A policy's own content rules (their regexes are most of its compiling) are
    // compiled on a second thread meanwhile, when a thread can be had; their errors come
    // after the others', as in file order. The built-in rules alone are compiled on
    // first use: making a thread for them would cost more than it saves.
    let content_rules = || super::content::build::compile(raw.content.as_ref(), src, base);
    let (head, content) = std::thread::scope(|scope| {
        let second = match &raw.content {
            Some(c) if c.compiles_own_regexes() => std::thread::Builder::new()
                .name("fsgate-policy".into())
                .spawn_scoped(scope, content_rules),
            _ => Err(std::io::ErrorKind::Unsupported.into()),
        };
        match second {
            Ok(thread) => {
                let head = compile_head(raw, src);
                let content = thread
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                (head, content)
            }
            Err(_) => (compile_head(raw, src), content_rules()),
        }
    });
    let (rules, secrets, waivers, limits) = head?;
    let content = content?;
    check_sections(raw, src)?;
    let agent = match agent_section(raw, base) {
        Ok(agent) => agent,
        Err(errors) => {
            return Err(errors
                .first()
                .map_or_else(|| agent_error(src, None), |e| agent_error(src, Some(e))));
        }
    };
    Ok(Compiled {
        rules,
        secrets,
        waivers,
        limits,
        content,
        agent,
    })
}

/// The parts of [`compile`] besides the content rules: the path rules, the secret names
/// and their waivers, and the limits.
fn compile_head(
    raw: &RawPolicy,
    src: &str,
) -> Result<(Vec<Rule>, Secrets, Waivers, Limits), PolicyError> {
    let (secrets, waivers) = compile_secrets(raw, src)?;
    let mut rules = Vec::with_capacity(raw.rules.len());
    let mut ids = HashSet::new();
    for (i, r) in raw.rules.iter().enumerate() {
        let rule = compile_rule(i, r, src)?;
        if !ids.insert(rule.id.clone()) {
            return Err(PolicyError::Invalid {
                key: format!("rule[{i}].id"),
                line: at(src, &r.id),
                message: format!("duplicate rule id `{}`: ids must be unique", rule.id),
            });
        }
        rules.push(rule);
    }
    let l = &raw.limits;
    let limits = Limits {
        max_read_bytes: l.max_read_bytes.unwrap_or(DEFAULT_LIMITS.max_read_bytes),
        max_write_bytes: l.max_write_bytes.unwrap_or(DEFAULT_LIMITS.max_write_bytes),
        binary: l.binary.unwrap_or(DEFAULT_LIMITS.binary),
        max_message_bytes: l
            .max_message_bytes
            .unwrap_or(DEFAULT_LIMITS.max_message_bytes),
    };
    if limits.max_message_bytes < 4 * KIB {
        return Err(PolicyError::Invalid {
            key: "limits.max_message_bytes".into(),
            line: 0,
            message: "must be at least 4096 bytes".into(),
        });
    }
    Ok((rules, secrets, waivers, limits))
}

/// The sections other modules own (`[ws]`, `[http]`, `[audit]`, `[backup]`) are checked
/// here too, so that `fsgate policy check` refuses what `fsgate serve` would refuse.
fn check_sections(raw: &RawPolicy, src: &str) -> Result<(), PolicyError> {
    if let Some(audit) = &raw.audit
        && let Err(message) = fsgate_audit::ship::check_all(&audit.ship)
    {
        let line = match key_line(src, "audit", "ship") {
            0 => section_line(src, "audit"),
            n => n,
        };
        return Err(PolicyError::Invalid {
            key: "audit.ship".into(),
            line,
            message,
        });
    }
    if let Some(a) = &raw.audit
        && let Err((key, message)) = a.validate()
    {
        let line = key_line(src, "audit", key);
        return Err(PolicyError::Invalid {
            key: format!("audit.{key}"),
            line: if line == 0 {
                section_line(src, "audit")
            } else {
                line
            },
            message,
        });
    }
    let doors = [
        ("ws", raw.ws.as_ref().map(|s| s.validate())),
        ("http", raw.http.as_ref().map(|s| s.validate())),
    ];
    for (section, checked) in doors {
        if let Some(Err(m)) = checked {
            let (key, message) = match m.split_once(": ") {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (section.to_string(), m),
            };
            return Err(PolicyError::Invalid {
                key,
                line: section_line(src, section),
                message,
            });
        }
    }
    if let Some(b) = &raw.backup
        && let Err(e) = b.retention()
    {
        // Messages start "[backup] <key> ...": point at that key's line.
        let message = e.to_string();
        let key = message
            .strip_prefix("[backup] ")
            .and_then(|rest| rest.split([' ', ':']).next())
            .unwrap_or_default();
        let line = key_line(src, "backup", key);
        return Err(PolicyError::Invalid {
            key: if key.is_empty() {
                "backup".into()
            } else {
                format!("backup.{key}")
            },
            line: if line == 0 {
                section_line(src, "backup")
            } else {
                line
            },
            message,
        });
    }
    Ok(())
}

/// `[agent]` in force (with the older `[sandbox] agent_system_paths`), or every
/// mistake in it: bad values first; if none, entries reaching a file the policy itself
/// names ([`policy_protected`]).
pub(crate) fn agent_section(
    raw: &RawPolicy,
    base: Option<&Path>,
) -> Result<AgentSettings, Vec<AgentConfigError>> {
    let agent = AgentSettings::from_sections(raw.agent.as_ref(), raw.sandbox.as_ref())
        .map_err(|e| vec![e])?;
    let home = user_home();
    let mut errors = agent.problems(home.as_deref());
    if errors.is_empty() {
        errors = agent.protected_violations(&policy_protected(raw, base), home.as_deref());
    }
    if errors.is_empty() {
        Ok(agent)
    } else {
        Err(errors)
    }
}

/// fsgate's own files the policy names, which no `[agent]` entry may reach: the audit
/// log and its directory, the signing key, a checkpoint sink file, the backup store.
/// Relative paths are relative to `base` (the policy's directory), else to the current
/// directory.
pub(crate) fn policy_protected(raw: &RawPolicy, base: Option<&Path>) -> Vec<Protected> {
    let resolve = |p: &Path| {
        let p = match base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p.to_path_buf(),
        };
        std::path::absolute(&p).unwrap_or(p)
    };
    let mut out = Vec::new();
    let mut push = |path: PathBuf, label: &str| {
        out.push(Protected {
            path,
            label: label.to_owned(),
        })
    };
    if let Some(audit) = &raw.audit {
        if let Some(log) = audit.path.as_deref().map(resolve) {
            if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
                push(dir.to_path_buf(), "audit log directory");
            }
            push(log, "audit log");
        }
        if let Some(key) = audit.signing_key.as_deref().map(resolve) {
            push(key, "audit signing key");
        }
        for key in audit.ship.iter().filter_map(|d| d.tls_key.as_deref()) {
            push(resolve(key), "audit ship TLS key");
        }
        if let Some(sink) = audit
            .checkpoint_sink
            .as_deref()
            .filter(|s| !s.starts_with("syslog"))
        {
            push(resolve(Path::new(sink)), "audit checkpoint sink");
        }
    }
    if let Some(dir) = raw.backup.as_ref().and_then(|b| b.dir.as_deref()) {
        push(resolve(dir), "backup store");
    }
    out
}

/// The policy file itself, as a path no `[agent]` entry may reach.
pub(crate) fn policy_file_protected(path: &Path) -> Protected {
    Protected {
        path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        label: "policy file".to_owned(),
    }
}

/// Refuses a loaded policy whose `[agent]` reaches the file it was loaded from.
pub(crate) fn check_agent_policy_file(
    agent: &AgentSettings,
    path: &Path,
    src: &str,
) -> Result<(), PolicyError> {
    let home = user_home();
    match agent.check_protected(&[policy_file_protected(path)], home.as_deref()) {
        Ok(()) => Ok(()),
        Err(e) => Err(agent_error(src, Some(&e))),
    }
}

/// An `[agent]` error as a policy error, on the line of its value (or of its key).
fn agent_error(src: &str, e: Option<&AgentConfigError>) -> PolicyError {
    let Some(e) = e else {
        return PolicyError::Invalid {
            key: "agent".into(),
            line: section_line(src, "agent"),
            message: "invalid".into(),
        };
    };
    let line = match e.span() {
        Some(span) => line_col(src, span.start).0,
        None => match key_line(src, e.section(), e.field()) {
            0 => section_line(src, e.section()),
            line => line,
        },
    };
    PolicyError::Invalid {
        key: e.key().to_owned(),
        line,
        message: e.message(),
    }
}

/// The line of `key = ...` inside the `[section]` table (0 if not found).
pub(crate) fn key_line(src: &str, section: &str, key: &str) -> usize {
    let start = section_line(src, section);
    if start == 0 || key.is_empty() {
        return 0;
    }
    src.lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(0, |(i, _)| i + 1)
}

/// The line of a `[name]` table header (0 if not found).
pub(crate) fn section_line(src: &str, name: &str) -> usize {
    let header = format!("[{name}]");
    src.lines()
        .position(|l| l.trim() == header)
        .map_or(0, |i| i + 1)
}

fn compile_secrets(raw: &RawPolicy, src: &str) -> Result<(Secrets, Waivers), PolicyError> {
    let waived = waived_builtins(raw, src)?;
    let mut patterns: Vec<SecretPattern> = Vec::new();
    let mut waivers = Vec::new();
    if raw.secrets.builtin_on() {
        for (id, re) in BUILTIN_SECRETS {
            let p = SecretPattern {
                id: format!("secrets:{id}"),
                source: (*re).to_string(),
                builtin: true,
            };
            if waived.contains(id) {
                waivers.push(p);
            } else {
                patterns.push(p);
            }
        }
    }
    for (i, p) in raw.secrets.patterns.iter().enumerate() {
        let key = format!("secrets.patterns[{i}].regex");
        build_regex(p.regex.get_ref()).map_err(|e| PolicyError::Invalid {
            key: key.clone(),
            line: at(src, &p.regex),
            message: format!("invalid regex: {}", first_line(&e.to_string())),
        })?;
        patterns.push(SecretPattern {
            id: format!("secrets:{}", p.id),
            source: p.regex.get_ref().clone(),
            builtin: false,
        });
    }
    Ok((secrets_of(patterns), waivers_of(waivers)?))
}

/// The built-in pattern ids `[secrets] disabled_patterns` names (`secret` or
/// `secrets:secret`); an unknown id is an error at its position.
fn waived_builtins(raw: &RawPolicy, src: &str) -> Result<Vec<&'static str>, PolicyError> {
    let mut out = Vec::new();
    for (i, w) in raw.secrets.disabled_patterns.iter().enumerate() {
        let name = w.get_ref().trim();
        let name = name.strip_prefix("secrets:").unwrap_or(name);
        let (line, col) = line_col(src, w.span().start);
        let located = |message: String| PolicyError::Located {
            key: format!("secrets.disabled_patterns[{i}]"),
            line,
            col,
            message,
        };
        let Some((id, _)) = BUILTIN_SECRETS.iter().find(|(id, _)| *id == name) else {
            let known: Vec<&str> = BUILTIN_SECRETS.iter().map(|(id, _)| *id).collect();
            return Err(located(format!(
                "unknown built-in secret-name pattern `{name}`; the built-in ids are {}",
                known.join(", ")
            )));
        };
        if !raw.secrets.builtin_on() {
            return Err(located(
                "waives a built-in pattern, but `builtin = false` turns them all off".into(),
            ));
        }
        out.push(*id);
    }
    Ok(out)
}

/// The secret-name patterns in force; their set is compiled on first use (each pattern
/// of the file was compiled alone when it was read, so a mistake in one is reported at
/// load).
pub(crate) fn secrets_of(patterns: Vec<SecretPattern>) -> Secrets {
    Secrets::deferred(patterns)
}

/// The waived patterns, compiled (no set when nothing is waived: deciding skips it).
pub(crate) fn waivers_of(patterns: Vec<SecretPattern>) -> Result<Waivers, PolicyError> {
    let set = if patterns.is_empty() {
        None
    } else {
        Some(
            pattern_set(&patterns).map_err(|message| PolicyError::Invalid {
                key: "secrets.patterns".into(),
                line: 0,
                message,
            })?,
        )
    };
    Ok(Waivers { patterns, set })
}

/// The patterns as one case-insensitive set; Err: why it cannot be compiled.
fn pattern_set(patterns: &[SecretPattern]) -> Result<RegexSet, String> {
    RegexSetBuilder::new(patterns.iter().map(|p| p.source.as_str()))
        .case_insensitive(true)
        .build()
        .map_err(|e| first_line(&e.to_string()))
}

pub(crate) fn build_regex(src: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(src).case_insensitive(true).build()
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn compile_rule(i: usize, r: &RawRule, src: &str) -> Result<Rule, PolicyError> {
    let id = r.id.get_ref().trim().to_string();
    let invalid = |key: &str, line: usize, message: String| PolicyError::Invalid {
        key: format!("rule[{i}].{key}"),
        line,
        message,
    };
    if id.is_empty() || id.starts_with("secrets:") || id == fsgate_decide::DEFAULT_DENY {
        return Err(invalid(
            "id",
            at(src, &r.id),
            format!("`{id}` is not a usable rule id (empty or reserved)"),
        ));
    }
    let mut ops = [false; 4];
    if r.ops.is_empty() {
        return Err(invalid(
            "ops",
            at(src, &r.id),
            "a rule needs at least one op (read, write, delete, list or \"*\")".into(),
        ));
    }
    for op in &r.ops {
        match op.get_ref().as_str() {
            "*" => ops = [true; 4],
            name => match OpClass::parse(name) {
                Some(c) => ops[c as usize] = true,
                None => {
                    return Err(invalid(
                        "ops",
                        at(src, op),
                        format!("unknown op `{name}`: expected read, write, delete, list or \"*\""),
                    ));
                }
            },
        }
    }
    if r.paths.is_empty() && r.extensions.is_none() {
        return Err(invalid(
            "paths",
            at(src, &r.id),
            "a rule needs `paths` (globs) or `extensions`".into(),
        ));
    }
    let (paths, bases, globs, whole) = compile_paths(r, src, &invalid)?;
    if let (Some(min), Some(max)) = (&r.min_size, &r.max_size)
        && min.get_ref() > max.get_ref()
    {
        return Err(invalid(
            "min_size",
            at(src, min),
            format!(
                "min_size {} is larger than max_size {}: the rule could never apply",
                min.get_ref(),
                max.get_ref()
            ),
        ));
    }
    let mut conditions = Vec::new();
    if let Some(exts) = &r.extensions {
        let exts = exts.iter();
        let lower = exts.map(|e| e.trim_start_matches('.').to_ascii_lowercase());
        conditions.push(Condition::Extension(lower.collect()));
    }
    let (min, max) = (r.min_size.as_ref(), r.max_size.as_ref());
    if min.is_some() || max.is_some() {
        let (min, max) = (min.map(|s| *s.get_ref()), max.map(|s| *s.get_ref()));
        conditions.push(Condition::Size { min, max });
    }
    Ok(Rule {
        id,
        effect: r.effect,
        ops,
        globs,
        paths,
        bases,
        whole,
        conditions,
        reason: r.reason.clone(),
        line: at(src, &r.id),
        workspaces: rule_workspaces(r, src, &invalid)?,
    })
}

/// A rule's `workspaces`: valid names, at least one.
fn rule_workspaces(
    r: &RawRule,
    src: &str,
    invalid: &Invalid<'_>,
) -> Result<Option<Vec<String>>, PolicyError> {
    let Some(names) = &r.workspaces else {
        return Ok(None);
    };
    if names.is_empty() {
        return Err(invalid(
            "workspaces",
            at(src, &r.id),
            "an empty `workspaces` list would apply nowhere; leave it out to apply everywhere"
                .into(),
        ));
    }
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        if !fsgate_base::state::valid_workspace_name(n.get_ref()) {
            return Err(invalid(
                "workspaces",
                at(src, n),
                format!(
                    "`{}` is no workspace name (letters, digits, `.`, `_`, `-`)",
                    n.get_ref()
                ),
            ));
        }
        out.push(n.get_ref().clone());
    }
    Ok(Some(out))
}

type Invalid<'a> = dyn Fn(&str, usize, String) -> PolicyError + 'a;

/// A rule's compiled globs (None: any path), their literal bases, the globs as written,
/// and the directories whose whole contents the globs match.
type CompiledPaths = (Option<GlobSet>, Vec<RelPath>, Vec<String>, Vec<RelPath>);

/// A rule's globs, normalised (D1) and compiled, each also covering what lies beneath
/// what it matches. Deny and ask rules match case-insensitively, allow rules exactly: a
/// case variant never slips past a deny or an ask, and an allow never grows by folding
/// case.
fn compile_paths(
    r: &RawRule,
    src: &str,
    invalid: &Invalid<'_>,
) -> Result<CompiledPaths, PolicyError> {
    let fold = r.effect != Effect::Allow;
    let mut set = GlobSetBuilder::new();
    let mut bases = Vec::new();
    let mut globs = Vec::new();
    let mut whole = Vec::new();
    for g in &r.paths {
        let text = normalise_glob(g.get_ref());
        let alternatives =
            glob_alternatives(g.get_ref()).map_err(|m| invalid("paths", at(src, g), m))?;
        for alt in alternatives {
            if alt.split('/').any(|c| c == "..") {
                return Err(invalid(
                    "paths",
                    at(src, g),
                    format!(
                        "glob `{text}` contains `..`: globs are relative to the workspace root"
                    ),
                ));
            }
            let glob = build_glob_case(&alt, fold)
                .map_err(|e| invalid("paths", at(src, g), format!("invalid glob: {}", e.kind())))?;
            set.add(glob);
            whole.extend(whole_dir(&alt));
            // A glob also covers everything beneath what it matches (`src` covers `src/a`).
            if !alt.ends_with("/**")
                && alt != "**"
                && let Ok(glob) = build_glob_case(&format!("{alt}/**"), fold)
            {
                set.add(glob);
            }
        }
        bases.push(RelPath::parse_rooted(&format!("/{}", literal_base(&text))).unwrap_or_default());
        globs.push(g.get_ref().clone());
    }
    let paths = set
        .build()
        .map_err(|e| invalid("paths", at(src, &r.id), format!("invalid glob set: {e}")))?;
    Ok(((!r.paths.is_empty()).then_some(paths), bases, globs, whole))
}

/// The directory everything beneath which a normalised glob (one alternative) matches,
/// if it is `**`, a literal path `L` (which also covers `L/**`) or `L/**`: what lets a
/// listing decide a directory's entries without matching each path. Anything with
/// another wildcard or escape is left to the glob set.
fn whole_dir(alt: &str) -> Option<RelPath> {
    if alt == "**" {
        return Some(RelPath::root());
    }
    let lit = alt.strip_suffix("/**").unwrap_or(alt);
    if lit.is_empty() || lit.contains(['*', '?', '[', ']', '{', '}', '\\', ',', '!']) {
        return None;
    }
    RelPath::parse_rooted(&format!("/{lit}")).ok()
}

/// D1: `./secrets`, `/secrets`, `secrets/`, `secrets//` and `secrets` are one glob. A
/// leading `/` or `./`, repeated `/`, interior `.` components and a trailing `/` go;
/// what is left of nothing (`/`, `.`) is the whole workspace.
pub(crate) fn normalise_glob(text: &str) -> String {
    let kept: Vec<&str> = text
        .trim()
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if kept.is_empty() {
        "**".to_string()
    } else {
        kept.join("/")
    }
}

/// At most this many `{a,b}` alternatives are spelled out of one glob to normalise each.
const MAX_GLOB_ALTERNATIVES: usize = 256;

/// The globs a written glob compiles to, each normalised (D1). A brace alternative is
/// normalised on its own (`{./a,b/}` is `{a,b}`), else `./a` inside braces would match
/// no path; a glob whose alternatives need nothing of the kind compiles as written.
fn glob_alternatives(written: &str) -> Result<Vec<String>, String> {
    let text = normalise_glob(written);
    if !text.contains('{') {
        return Ok(vec![text]);
    }
    let Some(alts) = super::lint::globs::expand_all(&text, MAX_GLOB_ALTERNATIVES) else {
        return Err(format!(
            "glob `{written}` spells out more than {MAX_GLOB_ALTERNATIVES} brace alternatives"
        ));
    };
    if alts.iter().any(|a| a.split('/').any(|c| c == "..")) {
        return Err(format!(
            "glob `{text}` contains `..`: globs are relative to the workspace root"
        ));
    }
    if alts.iter().all(|a| normalise_glob(a) == *a) {
        return Ok(vec![text]);
    }
    // `src/{,x}` would read as `src/` (all of `src`), wider than globs matched before:
    // an empty alternative that normalising would widen is refused, not guessed at.
    if text.contains("{,") || text.contains(",}") || text.contains(",,") {
        return Err(format!(
            "glob `{written}` has an empty brace alternative next to a `/`: write the alternatives out"
        ));
    }
    let mut out = Vec::with_capacity(alts.len());
    for a in alts {
        let kept: Vec<&str> = a
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if kept.is_empty() {
            // Only `/` or `.` on its own means the whole workspace; never by accident.
            return Err(format!(
                "a brace alternative of glob `{written}` leaves nothing (`{a}`): write `**` for the whole workspace"
            ));
        }
        let n = kept.join("/");
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

/// Compiles one policy glob: `*` stays within a component, a backslash escapes.
pub(crate) fn build_glob(text: &str) -> Result<globset::Glob, globset::Error> {
    build_glob_case(text, false)
}

/// [`build_glob`], matching case-insensitively when `fold`.
fn build_glob_case(text: &str, fold: bool) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(text)
        .literal_separator(true)
        .backslash_escape(true)
        .case_insensitive(fold)
        .build()
}

/// The directory part of a glob before its first wildcard: `src/**/*.rs` -> `src`.
fn literal_base(glob: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for comp in glob.split('/') {
        if comp.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        out.push(comp);
    }
    out.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases() {
        assert_eq!(literal_base("src/**/*.rs"), "src");
        assert_eq!(literal_base("**"), "");
        assert_eq!(literal_base("docs/api/index.md"), "docs/api/index.md");
    }

    use crate::{EntryKind, OpClass, Policy};

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    /// Everything readable and listable, except what `deny` names.
    fn with_deny(deny: &str) -> Policy {
        let text = format!(
            "version = 1\n[secrets]\nbuiltin = false\n\
[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n\
[[rule]]\nid = \"no\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [{deny:?}]\n"
        );
        Policy::from_toml(&text, "t").unwrap()
    }

    #[test]
    fn globs_are_normalised() {
        assert_eq!(normalise_glob("./secrets"), "secrets");
        assert_eq!(normalise_glob("/secrets"), "secrets");
        assert_eq!(normalise_glob("secrets/"), "secrets");
        assert_eq!(normalise_glob("a//b"), "a/b");
        assert_eq!(normalise_glob("././a/./b//"), "a/b");
        assert_eq!(normalise_glob("/"), "**");
        assert_eq!(normalise_glob("src/*.rs"), "src/*.rs");
    }

    #[test]
    fn every_spelling_of_a_directory_denies_it_and_its_contents() {
        for form in [
            "./secrets",
            "secrets/",
            "/secrets",
            "secrets",
            ".//secrets//",
        ] {
            let pol = with_deny(form);
            let d = pol.decide(OpClass::Read, &rel("secrets/db.yaml"), EntryKind::File);
            assert_eq!(d.rule, "no", "{form}: read secrets/db.yaml");
            let d = pol.decide(OpClass::List, &rel("secrets"), EntryKind::Dir);
            assert_eq!(d.rule, "no", "{form}: list secrets");
            let d = pol.decide(OpClass::Read, &rel("secretsx/a"), EntryKind::File);
            assert_eq!(d.rule, "all", "{form}: a sibling with a longer name");
        }
        let pol = with_deny("a//b");
        assert_eq!(
            pol.decide(OpClass::Write, &rel("a/b/c"), EntryKind::File)
                .rule,
            "no"
        );
        // The trace shows the glob as written.
        assert_eq!(pol.rules()[1].globs, vec!["a//b".to_string()]);
    }

    #[test]
    fn brace_alternatives_are_normalised_one_by_one() {
        let pol = with_deny("{./a,/b,c/,d//e}");
        for p in ["a", "a/f", "b", "c", "c/f", "d/e/f"] {
            let d = pol.decide(OpClass::Read, &rel(p), EntryKind::File);
            assert_eq!(d.rule, "no", "{p}");
        }
        let d = pol.decide(OpClass::Read, &rel("d/x"), EntryKind::File);
        assert_eq!(d.rule, "all");
        // An alternative left empty is not the whole workspace by accident.
        let text = "version = 1\n[[rule]]\nid = \"r\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"{/,src}\"]\n";
        assert!(Policy::from_toml(text, "t").is_err());
        let empty = text.replace("{/,src}", "src/{,x}");
        assert!(Policy::from_toml(&empty, "t").is_err(), "empty alternative");
        let text = text.replace("{/,src}", "{x,../y}");
        assert!(Policy::from_toml(&text, "t").is_err(), "`..` inside braces");
    }

    #[test]
    fn denies_fold_case_and_allows_do_not() {
        let text = "version = 1\n\
[[rule]]\nid = \"src\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"src/**\", \"infra/**\"]\n\
[[rule]]\nid = \"no-prod\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"infra/prod/**\"]\n";
        let pol = Policy::from_toml(text, "t").unwrap();
        for p in [
            "infra/PROD/main.tf",
            "INFRA/prod/main.tf",
            "infra/prod/main.tf",
        ] {
            let d = pol.decide(OpClass::Write, &rel(p), EntryKind::File);
            assert_eq!(d.rule, "no-prod", "{p}");
        }
        let d = pol.decide(OpClass::Write, &rel("infra/dev/main.tf"), EntryKind::File);
        assert_eq!(d.rule, "src");
        let d = pol.decide(OpClass::Read, &rel("SRC/x"), EntryKind::File);
        assert_eq!(d.rule, crate::DEFAULT_DENY, "an allow does not fold case");
        assert!(
            pol.decide(OpClass::Read, &rel("src/x"), EntryKind::File)
                .allowed()
        );
    }

    #[test]
    fn size_bounds_must_leave_room() {
        let text = "version = 1\n[[rule]]\nid = \"r\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"**\"]\nmin_size = 10\nmax_size = 5\n";
        match Policy::from_toml(text, "t") {
            Err(PolicyError::Invalid { key, line, .. }) => {
                assert_eq!((key.as_str(), line), ("rule[0].min_size", 7));
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn line_cols() {
        assert_eq!(line_col("a\nbc\nd", 3), (2, 2));
        assert_eq!(line_col("abc", 0), (1, 1));
    }

    #[test]
    fn sections_other_modules_own_are_checked_with_the_policy() {
        for (extra, key, line) in [
            ("[ws]\nmax_connections = 0\n", "ws.max_connections", 2),
            (
                "[ws]\nallowed_origins = [\"not an origin\"]\n",
                "ws.allowed_origins",
                2,
            ),
            ("[backup]\nkeep_versions = 0\n", "backup.keep_versions", 3),
            ("[backup]\nmax_age = \"forever\"\n", "backup.max_age", 3),
            (
                "[backup]\nkeep_versions = 3\n\nmax_file_bytes = 0\n",
                "backup.max_file_bytes",
                5,
            ),
            (
                "[backup]\nmax_total_bytes = 0\n",
                "backup.max_total_bytes",
                3,
            ),
            (
                "[backup]\nmax_sparse_bytes = 0\n",
                "backup.max_sparse_bytes",
                3,
            ),
        ] {
            let text = format!("version = 1\n{extra}");
            match crate::Policy::from_toml(&text, "t") {
                Err(PolicyError::Invalid {
                    key: k, line: l, ..
                }) => {
                    assert_eq!((k.as_str(), l), (key, line), "{extra}");
                }
                other => panic!("{extra}: {:?}", other.err()),
            }
        }
    }
}
