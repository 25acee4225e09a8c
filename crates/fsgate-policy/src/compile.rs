//! Raw policy -> compiled policy: globs and regexes built once, every error located.//!
//! One file per part: `globs.rs` and `rule.rs` the `[[rule]]`s, `secrets.rs` the
//! secret-name patterns, `agent.rs` `[agent]`, `sections.rs` the sections other modules
//! own; here the limits and the whole compiled policy.

pub(crate) mod agent;
pub(crate) mod globs;
mod rule;
pub(crate) mod secrets;
mod sections;

use std::collections::HashSet;
use std::path::Path;

use crate::error::PolicyError;
use crate::position::at;
use crate::raw::RawPolicy;
use agent::{agent_error, agent_section};
use fsgate_decide::{BinaryMode, Limits, Rule, Secrets, Waivers};
use fsgate_sandbox::AgentSettings;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Default limits: 10 MiB reads and writes, binary denied, 24 MiB messages; 256 MiB files
/// through the view (a build's libraries and binaries).
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
    max_process_file_bytes: 256 * MIB,
};

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
    sections::check_sections(raw, src)?;
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
    let (secrets, waivers) = secrets::compile_secrets(raw, src)?;
    let mut rules = Vec::with_capacity(raw.rules.len());
    let mut ids = HashSet::new();
    for (i, r) in raw.rules.iter().enumerate() {
        let rule = rule::compile_rule(i, r, src)?;
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
        max_process_file_bytes: l
            .max_process_file_bytes
            .unwrap_or(DEFAULT_LIMITS.max_process_file_bytes),
    };
    if limits.max_process_file_bytes > u64::from(u32::MAX) {
        return Err(PolicyError::Invalid {
            key: "limits.max_process_file_bytes".into(),
            line: 0,
            message:
                "must be below 4 GiB (at most 4294967295): the gateway holds such a file whole"
                    .into(),
        });
    }
    if limits.max_message_bytes < 4 * KIB {
        return Err(PolicyError::Invalid {
            key: "limits.max_message_bytes".into(),
            line: 0,
            message: "must be at least 4096 bytes".into(),
        });
    }
    Ok((rules, secrets, waivers, limits))
}
