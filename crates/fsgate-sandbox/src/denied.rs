//! Which path a confined agent was denied, read from what the agent itself printed.
//!
//! Landlock refuses silently: the agent sees EACCES and usually prints the path it could
//! not open before it dies. fsgate relays the agent's stderr anyway; it also picks out
//! those paths, so that when the agent fails to start it can say which path was denied
//! and which `[agent]` key would allow it, instead of leaving the person with a
//! "permission denied" from inside the agent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::plan::{AgentAccess, AgentPlan};

/// At most this many distinct denied paths are kept.
const MAX_PATHS: usize = 16;
/// Longest path kept, in bytes (an agent can print anything).
const MAX_PATH_BYTES: usize = 4096;

/// The absolute path in one line of an agent's stderr that reports a permission error,
/// as printed by Node (`EACCES: permission denied, open '/x'`), Python
/// (`[Errno 13] Permission denied: '/x'`, `can't open file '/x': [Errno 13]`), shells
/// (`/bin/sh: 1: /x: Permission denied`) and most C programs (`/x: Permission denied`).
pub(crate) fn denied_path(line: &str) -> Option<PathBuf> {
    let lower = line.to_ascii_lowercase();
    if !(lower.contains("permission denied") || lower.contains("eacces")) {
        return None;
    }
    quoted_absolute(line).or_else(|| colon_before_denied(line))
}

/// The first `'/...'` or `"/..."` quoted absolute path.
fn quoted_absolute(line: &str) -> Option<PathBuf> {
    for quote in ['\'', '"'] {
        let opening = format!("{quote}/");
        let mut rest = line;
        while let Some(at) = rest.find(&opening) {
            let after = &rest[at + 1..];
            let Some(end) = after.find(quote) else { break };
            if end <= MAX_PATH_BYTES {
                return Some(PathBuf::from(&after[..end]));
            }
            rest = &after[end..];
        }
    }
    None
}

/// `.../x: Permission denied`: the last `: `-separated field before the message that is
/// an absolute path.
fn colon_before_denied(line: &str) -> Option<PathBuf> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find(": permission denied")?;
    line[..at]
        .rsplit(": ")
        .next()
        .map(str::trim)
        .filter(|p| p.starts_with('/') && p.len() <= MAX_PATH_BYTES)
        .map(PathBuf::from)
}

/// The denied paths seen so far, shared between the thread relaying the agent's stderr
/// and the code that reports its exit. Bounded: the first `MAX_PATHS` distinct paths.
#[derive(Debug, Clone, Default)]
pub struct Denials(Arc<Mutex<Vec<PathBuf>>>);

impl Denials {
    /// Notes the path `line` reports as denied, if any.
    pub fn note_line(&self, line: &str) {
        let Some(path) = denied_path(line) else {
            return;
        };
        if let Ok(mut seen) = self.0.lock()
            && seen.len() < MAX_PATHS
            && !seen.contains(&path)
        {
            seen.push(path);
        }
    }

    /// The paths noted, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// What to tell the person about `path`, which the agent under `plan` was denied: why,
/// and the `[agent]` key that would allow it (or that nothing may, for a protected path).
pub fn advice(path: &Path, plan: &AgentPlan) -> String {
    let shown = fsgate_base::text::EscPath(path);
    if let Some(p) = plan
        .protected
        .iter()
        .find(|p| path.starts_with(&p.path) || p.path.starts_with(path))
    {
        return format!(
            "{shown}: it is (or holds) the {}, which a confined agent can never reach; \
             the agent must go through the gateway's file methods",
            p.label
        );
    }
    if let Some(g) = plan.grants.iter().find(|g| path.starts_with(&g.path)) {
        if let AgentAccess::Scratch { .. } = g.access {
            // Made afresh each run: no key names it.
            return format!(
                "{shown}: the agent's scratch dir, granted {} (from {}); sockets and devices are never made there",
                g.access.as_str(),
                g.source
            );
        }
        // Read-only where a program was denied: execute; read+exec: it wanted to write.
        let key = key_for(match g.access {
            AgentAccess::Read | AgentAccess::ReadWrite | AgentAccess::Scratch { .. } => {
                AgentAccess::ReadExec
            }
            AgentAccess::ReadExec => AgentAccess::ReadWrite,
        });
        return format!(
            "{shown}: granted only {} (from {}); to allow more, add it to [agent] {key}",
            g.access.as_str(),
            g.source
        );
    }
    let dir = suggestion(path);
    format!(
        "{shown}: no rule grants it; to allow it, add [agent] execute = [\"{}\"] \
         (programs and their libraries) or read = [...] (data)",
        fsgate_base::text::EscPath(&dir)
    )
}

/// The policy key for `access`.
fn key_for(access: AgentAccess) -> &'static str {
    match access {
        AgentAccess::Read => "read",
        AgentAccess::ReadExec => "execute",
        AgentAccess::ReadWrite | AgentAccess::Scratch { .. } => "read_write",
    }
}

/// The directory to suggest granting for a denied `path`: its parent (a file) or itself.
fn suggestion(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent().unwrap_or(path).to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_path_in_what_real_runtimes_print() {
        let cases = [
            (
                "Error: EACCES: permission denied, open '/some/dir/agent.mjs'",
                "/some/dir/agent.mjs",
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/home/u/.venv/lib/x.py'",
                "/home/u/.venv/lib/x.py",
            ),
            (
                "/usr/bin/python3: can't open file '/home/u/agent.py': [Errno 13] Permission denied",
                "/home/u/agent.py",
            ),
            (
                "/bin/sh: 1: /opt/agent/run: Permission denied",
                "/opt/agent/run",
            ),
            (
                "bash: /home/u/bin/agent: Permission denied",
                "/home/u/bin/agent",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(denied_path(line), Some(PathBuf::from(want)), "{line}");
        }
        for quiet in [
            "Permission denied (os error 13)",
            "open 'relative/path': Permission denied",
            "all good: '/etc/hosts'",
        ] {
            assert_eq!(denied_path(quiet), None, "{quiet}");
        }
    }

    #[test]
    fn keeps_a_bounded_set_of_distinct_paths() {
        let d = Denials::default();
        for i in 0..100 {
            d.note_line(&format!("EACCES: permission denied, open '/p/{}'", i % 40));
            d.note_line("EACCES: permission denied, open '/p/0'");
        }
        let paths = d.paths();
        assert_eq!(paths.len(), MAX_PATHS);
        assert_eq!(paths[0], PathBuf::from("/p/0"));
    }

    #[test]
    fn advice_names_the_key_or_says_never() {
        let mut plan = AgentPlan::default();
        plan.protected.push(super::super::plan::Protected {
            path: "/ws".into(),
            label: "workspace".into(),
        });
        plan.grant("/data", AgentAccess::Read, "[agent] read");
        let ws = advice(Path::new("/ws/a.txt"), &plan);
        assert!(ws.contains("workspace") && ws.contains("never"), "{ws}");
        let data = advice(Path::new("/data/tool"), &plan);
        assert!(
            data.contains("[agent] execute") && data.contains("from [agent] read"),
            "{data}"
        );
        let other = advice(Path::new("/nowhere/agent.mjs"), &plan);
        assert!(other.contains("execute = [\"/nowhere\"]"), "{other}");
        // The scratch dir is made afresh each run: no key is suggested for it.
        plan.grant("/tmp/s", AgentAccess::Scratch { links: false }, "scratch");
        let scratch = advice(Path::new("/tmp/s/sock"), &plan);
        assert!(
            scratch.contains("scratch dir, granted read-write+exec") && !scratch.contains("add it"),
            "{scratch}"
        );
    }
}
