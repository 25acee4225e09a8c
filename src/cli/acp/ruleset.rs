//! What the confined agent's ruleset adds for `fsgate acp`: the MCP server hosted for it.

/// Lets the confined agent (and what it starts) reach the MCP server hosted for it:
/// TCP connect to its port when the policy limits the agent's network, and this binary
/// (its stdio bridge, `fsgate mcp-connect`) to run, unless it lies in a protected path.
pub(super) fn reach_hosted(
    plan: &mut fsgate_sandbox::AgentPlan,
    port: u16,
    exe: Option<&std::path::Path>,
) {
    use fsgate_sandbox::{AgentAccess, AgentNetwork};
    match &mut plan.network {
        AgentNetwork::All => {}
        AgentNetwork::None => plan.network = AgentNetwork::Ports(vec![port]),
        AgentNetwork::Ports(ports) => {
            ports.push(port);
            ports.sort_unstable();
            ports.dedup();
        }
    }
    let Some(exe) = exe else { return };
    let canon = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let real = canon(exe);
    if let Some(p) = plan
        .protected
        .iter()
        .find(|p| real.starts_with(canon(&p.path)))
    {
        fsgate_base::text::eprint_line(&format!(
            "fsgate: note: this fsgate binary lies in the {} ({}): agents that start MCP servers as commands cannot run its bridge; those that take HTTP servers are not affected",
            p.label,
            p.path.display()
        ));
        return;
    }
    plan.grant(
        real,
        AgentAccess::ReadExec,
        "fsgate mcp-connect: the agent's bridge to fsgate's MCP server",
    );
}
