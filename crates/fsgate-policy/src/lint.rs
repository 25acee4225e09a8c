//! `fsgate policy check`: every problem in a policy file as a located finding with a
//! severity and a one-line fix hint (`file:line:col: severity: message (hint: ...)`).
//!
//! Loading problems (syntax, unknown keys, types, bad globs and regexes) come first and
//! make the file invalid; the semantic checks (dead and duplicate rules, exposed secrets,
//! write wider than read, limits, untested denies, the fixed floor) live in `checks`.

mod checks;
mod findings;
pub(crate) mod globs;
mod reach;
mod shadow;

use std::path::Path;

use super::compile::globs::build_glob;
use super::compile::secrets::build_regex;
use super::raw::RawPolicy;
use super::{DEFAULT_DENY, OpClass, Policy, PolicyError};

pub use findings::{Finding, LintOptions, LintReport, Severity};
pub(crate) use findings::{Sink, only};

/// Lints a policy file.
///
/// # Ambient Authority
/// Reads `path` (and the gitleaks config it names; with `options.workspace`, resolves
/// the workspace and fsgate's own files to compare them).
pub(crate) fn lint_file(path: &Path, options: &LintOptions) -> LintReport {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let base = path.parent().filter(|p| !p.as_os_str().is_empty());
            lint_text(
                &text,
                &name,
                Some(base.unwrap_or(Path::new("."))),
                Some(path),
                options,
            )
        }
        Err(e) => LintReport {
            findings: vec![Finding {
                file: name,
                line: 1,
                col: 1,
                severity: Severity::Error,
                code: "unreadable",
                message: format!("cannot read the policy: {e}"),
                hint: "check the path and its permissions".into(),
            }],
            invalid: true,
        },
    }
}

/// Lints policy text. `base` resolves a relative gitleaks config; `policy_path` is where
/// the file lives (for the fixed-floor check with a workspace).
pub fn lint_text(
    text: &str,
    file: &str,
    base: Option<&Path>,
    policy_path: Option<&Path>,
    options: &LintOptions,
) -> LintReport {
    let mut sink = Sink {
        file,
        src: text,
        out: Vec::new(),
        origins: Vec::new(),
    };
    let raw: RawPolicy = match toml::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let pos = e.span().map_or((1, 1), |s| sink.pos(s.start));
            let msg = e.message().trim().replace('\n', " ");
            let hint = parse_hint(&msg);
            sink.at(pos, Severity::Error, "parse", msg, hint);
            return LintReport {
                findings: sink.out,
                invalid: true,
            };
        }
    };
    prevalidate(&raw, &mut sink);
    prevalidate_agent(&raw, base, policy_path, &mut sink);
    // What a gateway compiles on first use is compiled here, so it is reported now.
    let loaded =
        Policy::from_toml_in(text, file, base).and_then(|p| p.compile_deferred().map(|()| p));
    let policy = match loaded {
        Ok(p) => p,
        Err(e) => {
            if !sink.out.iter().any(|f| f.severity == Severity::Error) {
                report_load_error(&raw, &e, &mut sink);
            }
            sink.out.sort_by_key(|f| (f.line, f.col));
            return LintReport {
                findings: sink.out,
                invalid: true,
            };
        }
    };
    if base.is_some() {
        ship_tls_files(&policy, &mut sink);
    }
    sink.origins = policy
        .rules()
        .iter()
        .filter_map(|r| Some((r.id.clone(), policy.rule_origin(&r.id)?.to_string())))
        .collect();
    checks::run(&policy, text, &mut sink, policy_path, options);
    // Rules scoped to workspaces are checked as they apply in each (a finding about a
    // rule for every workspace comes out once).
    for name in policy.scoped_workspaces() {
        let scoped = policy.for_workspace(name);
        sink.origins.extend(
            scoped
                .rules()
                .iter()
                .filter_map(|r| Some((r.id.clone(), scoped.rule_origin(&r.id)?.to_string()))),
        );
        checks::run(&scoped, text, &mut sink, policy_path, options);
    }
    let mut findings = sink.out;
    // The file checked first, then what its bases wrote.
    findings.sort_by_key(|f| (f.file != file, f.line, f.col, f.severity));
    findings.dedup();
    let invalid = findings.iter().any(|f| f.code == "invalid");
    LintReport { findings, invalid }
}

/// `[audit] ship`'s TLS files, read and parsed as `serve` reads them at start (only with
/// the policy file's directory known: relative names are relative to it).
fn ship_tls_files(policy: &Policy, sink: &mut Sink<'_>) {
    if let Err(e) = fsgate_audit::ship::check_tls_files(&policy.settings().audit.ship) {
        let pos = sink.key_pos("ship");
        sink.at(
            pos,
            Severity::Error,
            "invalid",
            e,
            "name readable PEM files: tls_ca the collector's CA certificate(s), tls_cert the client certificate chain and tls_key its own key",
        );
    }
}

/// The error loading stopped at, where it points (reported when the prevalidation
/// found none of its own).
fn report_load_error(raw: &RawPolicy, e: &PolicyError, sink: &mut Sink<'_>) {
    let (pos, msg) = match e {
        PolicyError::Invalid { key, line, message } => (
            value_pos(raw, key).map_or_else(|| sink.line_pos(*line), |o| sink.pos(o)),
            format!("{key}: {message}"),
        ),
        PolicyError::Located {
            key,
            line,
            col,
            message,
        } => ((*line, *col), format!("{key}: {message}")),
        other => ((1, 1), other.to_string()),
    };
    sink.at(
        pos,
        Severity::Error,
        "invalid",
        msg,
        "fix the value; policies/README.md documents every key",
    );
}

/// The byte offset of the value a loader error names, when the raw policy kept its span
/// (the loader itself reports lines only).
fn value_pos(raw: &RawPolicy, key: &str) -> Option<usize> {
    let i: usize = key
        .strip_prefix("content.disabled_rules[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let id = raw.content.as_ref()?.disabled_rules.get(i)?;
    Some(id.span().start)
}

fn parse_hint(msg: &str) -> &'static str {
    if msg.contains("unknown field") {
        "check the spelling; the keys allowed here are listed in the message and in policies/README.md"
    } else if msg.contains("missing field") {
        "add the required key (policies/README.md lists them)"
    } else if msg.contains("unknown variant") {
        "use one of the values listed in the message"
    } else if msg.contains("invalid type") {
        "give the value the type policies/README.md documents for this key"
    } else if msg.contains("invalid value") {
        "give a value in the range policies/README.md documents for this key (counts, sizes and seconds are never negative)"
    } else {
        "fix the TOML syntax at this position"
    }
}

/// Every `[agent]` error the loader would stop at, at its value's exact position.
fn prevalidate_agent(
    raw: &RawPolicy,
    base: Option<&Path>,
    policy_path: Option<&Path>,
    sink: &mut Sink<'_>,
) {
    let errors = match super::compile::agent::agent_section(raw, base) {
        Err(errors) => errors,
        // `Policy::load` refuses an [agent] reaching the policy file itself.
        Ok(agent) => match policy_path {
            Some(p) => agent.protected_violations(
                &[super::compile::agent::policy_file_protected(p)],
                fsgate_sandbox::agent_config::user_home().as_deref(),
            ),
            None => return,
        },
    };
    for e in errors {
        let pos = sink.agent_pos(&e);
        let hint = match &e {
            fsgate_sandbox::AgentConfigError::Protected(_) => {
                "remove the entry or narrow it: the agent reaches fsgate's own files never, and the workspace only through the gateway"
            }
            _ => "fix the value; policies/README.md documents [agent]",
        };
        sink.at(pos, Severity::Error, "invalid", e.to_string(), hint);
    }
}

/// Every loading error the compiler would stop at, all at once and at their exact
/// positions (the compiler reports only the first).
fn prevalidate(raw: &RawPolicy, sink: &mut Sink<'_>) {
    let mut ids = std::collections::HashMap::new();
    for (i, r) in raw.rules.iter().enumerate() {
        prevalidate_rule(i, r, &mut ids, sink);
    }
    prevalidate_secrets(raw, sink);
    prevalidate_tests(raw, sink);
}

/// Rule `i`: its id (non-empty, not reserved, unique: `ids` holds the lines of those
/// seen), its ops, its paths or extensions, and each of its globs.
fn prevalidate_rule(
    i: usize,
    r: &crate::raw::RawRule,
    ids: &mut std::collections::HashMap<String, usize>,
    sink: &mut Sink<'_>,
) {
    let id = r.id.get_ref().trim();
    let id_pos = sink.pos(r.id.span().start);
    if id.is_empty()
        || id.starts_with("secrets:")
        || id.starts_with("content:")
        || id == DEFAULT_DENY
    {
        sink.at(
            id_pos,
            Severity::Error,
            "invalid",
            format!("rule[{i}].id: `{id}` is empty or reserved"),
            "pick a unique name that does not start with secrets: or content:",
        );
    } else if let Some(first) = ids.insert(id.to_string(), id_pos.0) {
        sink.at(
            id_pos,
            Severity::Error,
            "invalid",
            format!("rule[{i}].id: duplicate rule id `{id}` (first at line {first})"),
            "rename one of the rules: refusals and audit records name rules by id",
        );
    }
    if r.ops.is_empty() {
        sink.at(
            id_pos,
            Severity::Error,
            "invalid",
            format!("rule `{id}` has no ops"),
            "set ops = [\"read\", \"list\"] or the classes the rule is about",
        );
    }
    for op in &r.ops {
        if op.get_ref() != "*" && OpClass::parse(op.get_ref()).is_none() {
            sink.at(
                sink.pos(op.span().start),
                Severity::Error,
                "invalid",
                format!("rule `{id}`: unknown op `{}`", op.get_ref()),
                "use read, write, delete, list or \"*\"",
            );
        }
    }
    if r.paths.is_empty() && r.extensions.is_none() {
        sink.at(
            id_pos,
            Severity::Error,
            "invalid",
            format!("rule `{id}` has neither paths nor extensions"),
            "add paths = [\"**\"] (everything) or the globs the rule is about",
        );
    }
    prevalidate_globs(id, r, sink);
}

/// A rule's globs: none may contain `..`, and each must compile.
fn prevalidate_globs(id: &str, r: &crate::raw::RawRule, sink: &mut Sink<'_>) {
    for g in &r.paths {
        let text = g.get_ref().trim_start_matches('/');
        let pos = sink.pos(g.span().start);
        if text.split('/').any(|c| c == "..") {
            sink.at(
                pos,
                Severity::Error,
                "invalid",
                format!("rule `{id}`: glob `{text}` contains `..`"),
                "globs are relative to the workspace root; nothing outside it is reachable",
            );
        } else if let Err(e) = build_glob(text) {
            sink.at(
                pos,
                Severity::Error,
                "invalid",
                format!("rule `{id}`: invalid glob `{text}` in paths: {}", e.kind()),
                "check brackets and braces; escape literal metacharacters with a backslash",
            );
        }
    }
}

/// The secret patterns' regexes must compile.
fn prevalidate_secrets(raw: &RawPolicy, sink: &mut Sink<'_>) {
    for p in &raw.secrets.patterns {
        if let Err(e) = build_regex(p.regex.get_ref()) {
            let msg = e.to_string();
            let last = msg.lines().last().unwrap_or("").trim().to_string();
            sink.at(
                sink.pos(p.regex.span().start),
                Severity::Error,
                "invalid",
                format!("secret pattern `{}`: invalid regex: {last}", p.id),
                "write the regex in single quotes ('...') so backslashes stay literal",
            );
        }
    }
}

/// Each `[[test]]` must name an operation class or gateway operation.
fn prevalidate_tests(raw: &RawPolicy, sink: &mut Sink<'_>) {
    for t in &raw.tests {
        if super::Access::parse(t.op.get_ref()).is_none() {
            sink.at(
                sink.pos(t.op.span().start),
                Severity::Error,
                "invalid-test",
                format!(
                    "[[test]] op `{}` is not an operation class or gateway operation",
                    t.op.get_ref()
                ),
                "use read, write, delete, list, stat, ls, glob, tree, grep, edit, mkdir or rm",
            );
        }
    }
}

#[cfg(test)]
mod tests;
