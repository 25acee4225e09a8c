//! `[agent]` compiled, and fsgate's own files (the policy's, the audit log's, the
//! backups') that no `[agent]` entry may reach.

use std::path::{Path, PathBuf};

use crate::error::PolicyError;
use crate::position::{key_line, line_col, section_line};
use crate::raw::RawPolicy;
use fsgate_sandbox::agent_config::user_home;
use fsgate_sandbox::{AgentConfigError, AgentSettings, Protected};

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
pub(super) fn agent_error(src: &str, e: Option<&AgentConfigError>) -> PolicyError {
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
