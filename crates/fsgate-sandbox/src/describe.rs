//! The words for an agent's confinement: the status detail of
//! [`super::confine_agent_command`] and the ruleset printed by
//! [`super::describe_agent_plan`] (`fsgate acp --confine-agent --check-sandbox`).

use std::fmt::Write as _;

use fsgate_base::text::{Esc, EscPath};

use super::plan::{AgentGrant, AgentNetwork, AgentPlan};
use super::status::Enforcement;

/// What this kernel enforces of an agent plan, as the platform code works it out.
#[derive(Debug, Clone)]
pub(crate) struct AgentView {
    /// The Landlock ABI used, None without Landlock.
    pub abi: Option<u8>,
    /// Fully only when every planned restriction holds.
    pub enforcement: Enforcement,
    /// Planned restrictions this kernel does not enforce.
    pub missing: Vec<String>,
    /// The TCP line, the Unix sockets line, the process lines.
    pub lines: Vec<String>,
}

/// `PATH ACCESS (source)`, with `missing: skipped` when the path does not exist.
pub(crate) fn grant_line(g: &AgentGrant, exists: bool) -> String {
    let mut line = format!(
        "{} {} ({})",
        EscPath(&g.path),
        g.access.as_str(),
        Esc(&g.source)
    );
    if !exists {
        line.push_str(" missing: skipped");
    }
    line
}

/// "TCP: all", "TCP: none", "TCP: connect to ports 443, 11434 only".
pub(crate) fn network_line(net: &AgentNetwork) -> String {
    match net {
        AgentNetwork::All => "TCP: all".to_owned(),
        AgentNetwork::None => "TCP: none".to_owned(),
        AgentNetwork::Ports(p) if p.is_empty() => "TCP: none".to_owned(),
        AgentNetwork::Ports(p) => {
            let list: Vec<String> = p.iter().map(u16::to_string).collect();
            format!("TCP: connect to ports {} only", list.join(", "))
        }
    }
}

/// The environment variable names (never the values).
pub(crate) fn env_line(plan: &AgentPlan) -> String {
    let names: Vec<String> = plan
        .env
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        "environment: empty".to_owned()
    } else {
        format!("environment: {}", names.join(", "))
    }
}

/// The whole ruleset, one item a line, and what the kernel enforces.
pub(crate) fn describe(plan: &AgentPlan, view: &AgentView) -> String {
    let mut out = String::new();
    if let Some(exe) = &plan.executable {
        let _ = writeln!(out, "program: {}", EscPath(exe));
    }
    let _ = writeln!(out, "agent ruleset:");
    for g in &plan.grants {
        let _ = writeln!(out, "  {}", grant_line(g, g.path.exists()));
    }
    let _ = writeln!(out, "never reachable:");
    for p in &plan.protected {
        let _ = writeln!(out, "  {} ({})", EscPath(&p.path), p.label);
    }
    for p in &plan.not_whole {
        let _ = writeln!(
            out,
            "  {} ({}: parts may be granted, never the whole)",
            EscPath(&p.path),
            p.label
        );
    }
    let _ = writeln!(out, "{}", env_line(plan));
    for line in &view.lines {
        let _ = writeln!(out, "{line}");
    }
    match view.abi {
        Some(abi) => {
            let _ = writeln!(
                out,
                "kernel: Landlock ABI {abi}, {} enforced",
                view.enforcement
            );
        }
        None => {
            let _ = writeln!(out, "kernel: no Landlock, {} enforced", view.enforcement);
        }
    }
    for m in &view.missing {
        let _ = writeln!(out, "  missing: {m}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{AgentAccess, Protected};

    #[test]
    fn describe_names_everything_but_env_values() {
        let mut plan = AgentPlan {
            protected: vec![Protected {
                path: "/srv/ws".into(),
                label: "workspace".into(),
            }],
            env: vec![("API_KEY".into(), "sk-very-secret".into())],
            network: AgentNetwork::Ports(vec![443, 11434]),
            ..Default::default()
        };
        plan.grant("/usr", AgentAccess::ReadExec, "built-in system paths");
        plan.grant("/no/such/dir", AgentAccess::Read, "[agent] read");
        let view = AgentView {
            abi: Some(7),
            enforcement: Enforcement::Partially,
            missing: vec!["something".into()],
            lines: vec![network_line(&plan.network)],
        };
        let text = describe(&plan, &view);
        for want in [
            "/usr read+exec (built-in system paths)\n",
            "/no/such/dir read ([agent] read) missing: skipped",
            "/srv/ws (workspace)",
            "environment: API_KEY\n",
            "TCP: connect to ports 443, 11434 only",
            "Landlock ABI 7, partially enforced",
            "missing: something",
        ] {
            assert!(text.contains(want), "{want:?} not in:\n{text}");
        }
        assert!(!text.contains("sk-very-secret"), "{text}");
        assert_eq!(network_line(&AgentNetwork::All), "TCP: all");
        assert_eq!(network_line(&AgentNetwork::None), "TCP: none");
    }
}
