//! `fsgate acp`: host an ACP agent, optionally confined (`--confine-agent`). This file
//! runs the steps in order; each step's parts are in `acp/`.

mod advice;
mod confine;
mod end;
mod launch;
mod profile;
mod record;
mod relay;
mod ruleset;

use std::process::ExitCode;
use std::sync::Arc;

use super::acp_view;
use super::args::AcpArgs;
use super::exit::{fail, fail_after_start, fail_open};
use super::view_host::undo_line;
use crate::startup;
use advice::{check_sandbox, report_own_failure, spawn_failed};
use end::{agent_exit, copy_agent_stderr, end_tree};
use fsgate_doors::proxy::AgentEnd;
use launch::Launch;
use record::Described;
use relay::Relay;

pub(super) fn acp(args: AcpArgs) -> ExitCode {
    let Some((program, agent_args)) = args.agent.split_first() else {
        return fail("no agent command given: fsgate acp --workspace DIR -- AGENT_CMD [ARGS...]");
    };
    // From here the log is open: each failure before the relay closes it with a
    // `stop` that says why (`startup::stop_early`).
    let (config, opened) = match open_config(&args) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let policy_file = args.common.policy.as_deref();
    let launch = match Launch::prepare(opened, policy_file, args.confine_agent, program, agent_args)
    {
        Ok(l) => l,
        Err(code) => return code,
    };
    let Launch {
        opened,
        mut command,
        confined,
        profile,
        hosted: (hosted_listener, hosted_port),
        exe,
    } = launch;
    if args.check_sandbox {
        return check_sandbox(opened, confined.as_ref(), hosted_port);
    }
    let mut tree = fsgate_sandbox::agent_tree::AgentTree::prepare();
    tree.enter_on_exec(command.command_mut());
    fsgate_base::text::eprint_line(&format!("fsgate: {}", tree.summary()));
    let described = Described::announce(confined.as_ref(), profile.as_ref());
    let (mut child, pending) = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            let code = spawn_failed(program, &e, confined.as_ref());
            startup::stop_early(&opened.gateway, &format!("cannot start the agent: {e}"));
            return code;
        }
    };
    let pid = child.id();
    tracing::info!(pid, agent = %program, "agent started");
    let in_view = pending.is_some();
    if let Err(e) = confine_gateway(&opened, &child, (confined.is_some(), in_view)) {
        return fail_after_start(&opened.gateway, &e);
    }
    opened.announce_locations();
    let undo = undo_line(&opened.gateway, opened.audit_log_path(), &config);
    let ending = pending.as_ref().map(|p| p.ending(undo));
    // Started after confinement, so the copying thread is confined too.
    let denials = fsgate_sandbox::denied::Denials::default();
    let agent_stderr = copy_agent_stderr(&mut child, denials.clone());
    let gateway = Arc::new(opened.gateway);
    gateway.prune_backups_in_background();
    let view = match acp_view::AgentView::serve(pending, &mut child, &gateway) {
        Ok(v) => v,
        Err(e) => return fail_after_start(&gateway, &e),
    };
    let hosted = fsgate_doors::hosted::Hosted::new(Arc::clone(&gateway), hosted_port, exe);
    let mut details = described.start_details(pid, &args.agent, &tree, &hosted);
    details.insert("view".into(), view.record.into());
    gateway.record("agent-start", details);
    let session_meta = profile.as_ref().and_then(|p| p.plan.session_meta.clone());
    let relay = Relay {
        gateway: &gateway,
        policy: args.common.policy.clone(),
        child,
        hosted: (hosted_listener, hosted),
        session_meta,
        questions: view.questions,
        view_sessions: view.sessions,
    };
    let (result, stopped_by) = match relay.run(pid) {
        Ok(r) => r,
        Err(e) => return fail_after_start(&gateway, &e),
    };
    let mut details = end_tree(&mut tree, agent_stderr);
    acp_view::end(&gateway, view.served.as_ref(), ending);
    let failed = |end: &AgentEnd| report_own_failure(end, confined.as_ref(), &denials, &stopped_by);
    let exit = agent_exit(result, &stopped_by, &mut details, failed);
    gateway.record("agent-exit", details);
    drop(confined);
    drop(profile);
    shut_down(&gateway, &stopped_by);
    exit
}

/// The gateway's stop, recorded with the signal that ended the agent, if one did.
fn shut_down(gateway: &fsgate_gateway::Gateway, stopped_by: &relay::StoppedBy) {
    let mut details = serde_json::Map::new();
    if let Some(sig) = stopped_by.get() {
        details.insert("reason".into(), (*sig).into());
    }
    startup::shutdown(gateway, details);
}

/// The configuration and what it opens (policy, workspaces, log, backups); a failure
/// is said and is the exit code.
fn open_config(
    args: &AcpArgs,
) -> Result<(startup::config::GatewayConfig, startup::Opened), ExitCode> {
    let config = args.common.config()?;
    match startup::open(&config) {
        Ok(o) => Ok((config, o)),
        Err(e) => Err(fail_open(&e, args.common.policy.as_deref())),
    }
}

/// Confines the gateway itself once the agent runs (hardened first when the agent is
/// confined); if that fails the agent is killed: it must not run beside an open gateway.
fn confine_gateway(
    opened: &startup::Opened,
    child: &std::process::Child,
    (agent_confined, in_view): (bool, bool),
) -> Result<(), String> {
    if agent_confined && let Err(e) = fsgate_sandbox::harden_gateway() {
        // Inside the view the agent's tree shares the gateway's user: it must not be
        // able to ptrace it (as under `fsgate run`).
        if in_view {
            kill_agent(child);
            return Err(e.to_string());
        }
        tracing::warn!("{e}");
    }
    if let Err(e) = startup::confine(opened, None, "acp-proxy") {
        kill_agent(child);
        return Err(e);
    }
    Ok(())
}

fn kill_agent(child: &std::process::Child) {
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(child),
        rustix::process::Signal::KILL,
    );
}
