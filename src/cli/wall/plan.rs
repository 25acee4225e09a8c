//! The wall's ruleset: what the policy's `[agent]` section grants, and what a confined
//! agent (or `fsgate run`'s walled command) may never reach.

use std::path::PathBuf;

use crate::startup;

/// The agent's ruleset from the policy's `[agent]` section: system paths, devices, the
/// section's grants, HOME and TMPDIR (the private scratch dir unless the policy names
/// real ones), the environment it lets through, network and sockets; and what it may
/// never reach. A grant of a protected path is refused, naming the key.
pub(in crate::cli) fn agent_plan(
    opened: &startup::Opened,
    policy_file: Option<&std::path::Path>,
    scratch: &std::path::Path,
) -> Result<fsgate_sandbox::AgentPlan, String> {
    use fsgate_sandbox::{AgentAccess, AgentPlan, agent_config::user_home};
    let pol = opened.gateway.policy();
    let agent = pol.agent();
    let home = user_home();
    let mut plan = AgentPlan {
        protected: protected_paths(opened, policy_file),
        ..Default::default()
    };
    agent
        .check_protected(&plan.protected, home.as_deref())
        .map_err(|e| format!("the policy's {e}"))?;
    if let Some(h) = &home {
        plan.not_whole.push(fsgate_sandbox::Protected {
            path: h.clone(),
            label: "home directory".into(),
        });
    }
    match agent.system_paths(home.as_deref()) {
        Some(paths) => {
            let source = agent.system_paths_source();
            paths
                .iter()
                .for_each(|p| plan.grant(p, AgentAccess::ReadExec, source));
        }
        None => {
            fsgate_sandbox::DEFAULT_AGENT_SYSTEM_PATHS
                .iter()
                .for_each(|p| plan.grant(p, AgentAccess::ReadExec, "built-in system paths"));
            for p in fsgate_sandbox::java_config_paths() {
                plan.grant(
                    p,
                    AgentAccess::Read,
                    "built-in system paths (Java's configuration)",
                );
            }
        }
    }
    for file in fsgate_sandbox::DEFAULT_AGENT_SHELL_FILES {
        plan.grant(file, AgentAccess::Read, "built-in shell start-up files");
    }
    for dev in fsgate_sandbox::DEFAULT_AGENT_DEVICES {
        plan.grant(dev, AgentAccess::ReadWrite, "built-in devices");
    }
    plan.grants.extend(agent.grants(home.as_deref()));
    let agent_home = agent.home(home.as_deref());
    let agent_tmp = agent.tmpdir(home.as_deref());
    if agent_home.is_none() || agent_tmp.is_none() {
        grant_scratch(&mut plan, scratch);
    }
    plan.env = agent.environment(std::env::vars_os());
    plan.env.push((
        "HOME".into(),
        agent_home.unwrap_or_else(|| scratch.into()).into(),
    ));
    plan.env.push((
        "TMPDIR".into(),
        agent_tmp.unwrap_or_else(|| scratch.into()).into(),
    ));
    plan.network = agent.network();
    plan.unix_sockets = agent.unix_sockets(home.as_deref());
    Ok(plan)
}

/// The scratch dir's grant: links and fifos too, unless a directory granted read-write
/// shares its filesystem (where one moved there would keep them past the run).
fn grant_scratch(plan: &mut fsgate_sandbox::AgentPlan, scratch: &std::path::Path) {
    let shared = plan.shares_filesystem_with(scratch).map(|g| g.path.clone());
    let source = match &shared {
        None => "the agent's scratch dir".to_owned(),
        Some(dir) => format!(
            "the agent's scratch dir; no symbolic links or fifos there, as {} is granted read-write on its filesystem",
            fsgate_base::text::EscPath(dir)
        ),
    };
    let access = fsgate_sandbox::AgentAccess::Scratch {
        links: shared.is_none(),
    };
    plan.grant(scratch, access, &source);
}

/// What a confined agent can never reach: the workspace, fsgate's audit and backup
/// directories, the policy file, the signing key and checkpoint sink.
fn protected_paths(
    opened: &startup::Opened,
    policy_file: Option<&std::path::Path>,
) -> Vec<fsgate_sandbox::Protected> {
    let protect = |path: PathBuf, label: &str| fsgate_sandbox::Protected {
        path,
        label: label.to_owned(),
    };
    // Every workspace, when several are served.
    let mut out: Vec<_> = opened
        .gateway
        .members()
        .map(|m| protect(m.workspace().root_path().to_path_buf(), "workspace"))
        .collect();
    let dirs = opened.own_dirs();
    // The audit log's directory, then one backup directory per workspace.
    let labels =
        std::iter::once("audit log directory").chain(std::iter::repeat("backup directory"));
    for (dir, label) in dirs.into_iter().zip(labels) {
        out.push(protect(dir, label));
    }
    if let Some(p) = policy_file {
        out.push(protect(p.to_path_buf(), "policy file"));
    }
    let pol = opened.gateway.policy();
    let audit = &pol.settings().audit;
    if let Some(key) = &audit.signing_key {
        out.push(protect(key.clone(), "audit signing key"));
    }
    if let Some(sink) = audit
        .checkpoint_sink
        .as_deref()
        .filter(|s| s.starts_with('/'))
    {
        out.push(protect(PathBuf::from(sink), "checkpoint sink"));
    }
    out
}
