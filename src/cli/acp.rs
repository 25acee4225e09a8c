//! `fsgate acp`: host an ACP agent, optionally confined (`--confine-agent`).

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use super::acp_view;
use super::args::AcpArgs;
use super::exit::{fail, fail_open};
use super::runtime::runtime_with_signals;
use crate::peer::stdio_peer;
use crate::startup;
use fsgate_doors::proxy::AgentEnd;

/// An agent's confinement: the plan it was built from and what the kernel will enforce.
struct Confined {
    /// Emptied and removed when the confinement ends, however it ends.
    _scratch: Scratch,
    plan: fsgate_sandbox::AgentPlan,
    /// Set once the plan is applied to the command.
    status: Option<fsgate_sandbox::SandboxStatus>,
}

pub(super) fn acp(args: AcpArgs) -> ExitCode {
    let config = match args.common.config() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let opened = match startup::open(&config) {
        Ok(o) => o,
        Err(e) => return fail_open(&e, args.common.policy.as_deref()),
    };
    let Some((program, agent_args)) = args.agent.split_first() else {
        return fail("no agent command given: fsgate acp --workspace DIR -- AGENT_CMD [ARGS...]");
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
        Err(e) => return spawn_failed(program, &e, confined.as_ref()),
    };
    let pid = child.id();
    tracing::info!(pid, agent = %program, "agent started");
    let in_view = pending.is_some();
    if let Err(code) = confine_gateway(&opened, &child, (confined.is_some(), in_view)) {
        return code;
    }
    opened.announce_locations();
    // Started after confinement, so the copying thread is confined too.
    let denials = fsgate_sandbox::denied::Denials::default();
    let agent_stderr = copy_agent_stderr(&mut child, denials.clone());
    let gateway = Arc::new(opened.gateway);
    let view_record = pending.as_ref().map(acp_view::Pending::record);
    let view_sessions = pending.as_ref().map(acp_view::Pending::sessions);
    // Where an ask rule hit by a process of the agent's view is asked: the editor.
    let questions = in_view.then(fsgate_doors::view_ask::ViewQuestions::new);
    let served = pending.zip(questions.as_ref());
    let served = match served
        .map(|(p, q)| p.serve(&mut child, &gateway, q))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return fail(&format!("--confine-agent: {e}; the agent was not run"));
        }
    };
    let hosted = fsgate_doors::hosted::Hosted::new(Arc::clone(&gateway), hosted_port, exe);
    let mut details = described.start_details(pid, &args.agent, &tree, &hosted);
    details.insert("view".into(), view_record.into());
    gateway.record("agent-start", details);
    let session_meta = profile.as_ref().and_then(|p| p.plan.session_meta.clone());
    let relay = Relay {
        gateway: &gateway,
        policy: args.common.policy.clone(),
        child,
        hosted: (hosted_listener, hosted),
        session_meta,
        questions,
        view_sessions,
    };
    let (result, stopped_by) = match relay.run(pid) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let mut details = end_tree(&mut tree, agent_stderr);
    if let Some(served) = &served {
        served.finish();
    }
    let failed = |end: &AgentEnd| report_own_failure(end, confined.as_ref(), &denials, &stopped_by);
    let exit = agent_exit(result, &stopped_by, &mut details, failed);
    gateway.record("agent-exit", details);
    drop(confined);
    drop(profile);
    let mut stop_details = serde_json::Map::new();
    if let Some(sig) = stopped_by.get() {
        stop_details.insert("reason".into(), (*sig).into());
    }
    startup::shutdown(&gateway, stop_details);
    exit
}

/// What is worked out before the agent starts: the opened gateway, the agent's command
/// with its confinement and profile applied, the hosted MCP server's listener and port,
/// and this binary (the stdio entry's command).
struct Launch {
    opened: startup::Opened,
    command: acp_view::AgentCommand,
    confined: Option<Confined>,
    profile: Option<Profile>,
    hosted: (std::net::TcpListener, u16),
    exe: Option<PathBuf>,
}

impl Launch {
    /// The port is bound and the binary found before confinement (while /proc is
    /// reachable); each failure is reported and becomes the exit code.
    fn prepare(
        mut opened: startup::Opened,
        policy_file: Option<&std::path::Path>,
        confine: bool,
        program: &str,
        agent_args: &[String],
    ) -> Result<Launch, ExitCode> {
        let (hosted_listener, hosted_port) = bind_hosted().map_err(|e| fail(&e))?;
        let exe = std::env::current_exe().ok();
        let mut confined = match confine {
            true => Some(
                plan_confinement(
                    &mut opened,
                    policy_file,
                    (program, agent_args),
                    (hosted_port, exe.as_deref()),
                )
                .map_err(|e| fail(&format!("--confine-agent: {e}")))?,
            ),
            false => None,
        };
        let profile = prepare_profile(&mut opened, program, agent_args, confined.as_mut())
            .map_err(|e| fail(&format!("agent profile: {e}")))?;
        let require_landlock = opened.gateway.policy().settings().sandbox.require_landlock;
        let profile_args = profile.as_ref().map_or(&[][..], |p| &p.plan.args[..]);
        if let Some(c) = confined.take() {
            let (command, confined) = c
                .in_view(
                    &mut opened,
                    policy_file,
                    (program, agent_args, profile_args),
                    require_landlock,
                )
                .map_err(|e| fail(&format!("--confine-agent: {e}")))?;
            return Ok(Launch {
                opened,
                command,
                confined: Some(confined),
                profile,
                hosted: (hosted_listener, hosted_port),
                exe,
            });
        }
        let mut command = agent_command(program, agent_args, confined.as_ref());
        if let Some(p) = &profile {
            command.args(&p.plan.args);
            if confined.is_none() {
                command.envs(p.plan.env.iter().map(|(k, v)| (k, v)));
            }
        }
        let confined = confined
            .map(|c| c.apply(&mut command, require_landlock))
            .transpose()
            .map_err(|e| fail(&format!("--confine-agent: {e}")))?;
        let command = acp_view::AgentCommand::Direct(command);
        Ok(Launch {
            opened,
            command,
            confined,
            profile,
            hosted: (hosted_listener, hosted_port),
            exe,
        })
    }
}

/// The agent's sandbox, ruleset and profile as the `agent-start` record shows them.
struct Described {
    sandbox: serde_json::Value,
    plan: serde_json::Value,
    profile: serde_json::Value,
}

impl Described {
    /// Also says on stderr what confines the agent, before it starts.
    fn announce(confined: Option<&Confined>, profile: Option<&Profile>) -> Described {
        let mut sandbox = serde_json::Value::Null;
        let mut plan = serde_json::Value::Null;
        if let Some(c) = confined {
            if let Some(status) = &c.status {
                fsgate_base::text::eprint_line(&format!("fsgate: agent confined: {status}"));
                sandbox = serde_json::to_value(status).unwrap_or_default();
            }
            plan = plan_record(&c.plan);
        }
        Described {
            sandbox,
            plan,
            profile: profile_record(profile),
        }
    }

    /// The `agent-start` record's details, in their recorded order.
    fn start_details(
        self,
        pid: u32,
        command: &[String],
        tree: &fsgate_sandbox::agent_tree::AgentTree,
        hosted: &fsgate_doors::hosted::Hosted,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut details = serde_json::Map::new();
        details.insert("pid".into(), pid.into());
        details.insert("command".into(), serde_json::Value::from(command.to_vec()));
        details.insert("agentSandbox".into(), self.sandbox);
        details.insert("agentPlan".into(), self.plan);
        details.insert("processTree".into(), tree.describe());
        details.insert("agentProfile".into(), self.profile);
        details.insert("mcpServer".into(), hosted_record(hosted));
        details
    }
}

/// Confines the gateway itself once the agent runs (hardened first when the agent is
/// confined); if that fails the agent is killed: it must not run beside an open gateway.
fn confine_gateway(
    opened: &startup::Opened,
    child: &std::process::Child,
    (agent_confined, in_view): (bool, bool),
) -> Result<(), ExitCode> {
    if agent_confined && let Err(e) = fsgate_sandbox::harden_gateway() {
        // Inside the view the agent's tree shares the gateway's user: it must not be
        // able to ptrace it (as under `fsgate run`).
        if in_view {
            kill_agent(child);
            return Err(fail(&e.to_string()));
        }
        tracing::warn!("{e}");
    }
    if let Err(e) = startup::confine(opened, None, "acp-proxy") {
        kill_agent(child);
        return Err(fail(&e));
    }
    Ok(())
}

fn kill_agent(child: &std::process::Child) {
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_child(child),
        rustix::process::Signal::KILL,
    );
}

/// Relays the agent's stderr to ours, escaped and marked, noting the paths it says
/// were denied.
fn copy_agent_stderr(
    child: &mut std::process::Child,
    noted: fsgate_sandbox::denied::Denials,
) -> Option<std::thread::JoinHandle<()>> {
    child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            fsgate_base::text::copy_escaped_noting(e, std::io::stderr(), "agent: ", |line| {
                noted.note_line(line)
            })
        })
    })
}

/// The relay between the editor (our stdio) and the running agent, with the MCP server
/// hosted for it.
struct Relay<'g> {
    gateway: &'g Arc<fsgate_gateway::Gateway>,
    policy: Option<PathBuf>,
    child: std::process::Child,
    hosted: (std::net::TcpListener, Arc<fsgate_doors::hosted::Hosted>),
    session_meta: Option<serde_json::Value>,
    /// Where the questions of the agent's view go (under `--confine-agent`).
    questions: Option<Arc<fsgate_doors::view_ask::ViewQuestions>>,
    /// The confined agent's sessions, for the view's records (None: no view).
    view_sessions: Option<Arc<fsgate_gateway::agent_sessions::AgentSessions>>,
}

impl Relay<'_> {
    /// Runs until the agent ends: its end, and the signal that stopped it, if one did.
    fn run(self, pid: u32) -> Result<(std::io::Result<AgentEnd>, StoppedBy), String> {
        let gateway = self.gateway;
        let allow_terminal = gateway.policy().settings().acp.allow_terminal;
        let (runtime, stop) = runtime_with_signals(gateway, self.policy)?;
        let stopped_by = StoppedBy::default();
        runtime.spawn(end_agent_on_signal(stop, Arc::clone(&stopped_by), pid));
        let (listener, hosted) = self.hosted;
        let serving = runtime.spawn(Arc::clone(&hosted).serve(listener));
        fsgate_doors::stdio::enlarge_pipe(std::io::stdin().as_fd());
        fsgate_doors::stdio::enlarge_pipe(std::io::stdout().as_fd());
        let result = runtime.block_on(fsgate_doors::proxy::run(
            Arc::clone(gateway),
            stdio_peer(),
            tokio::io::stdin(),
            tokio::io::stdout(),
            self.child,
            (
                allow_terminal,
                Some(hosted),
                self.session_meta,
                self.view_sessions,
            ),
            self.questions,
        ));
        serving.abort();
        // A blocking read of the editor's stdin may still be parked in the runtime's
        // blocking pool (the editor keeps its end open): do not wait for it.
        runtime.shutdown_background();
        Ok((result, stopped_by))
    }
}

/// The signal that made fsgate end the agent, set when it arrives.
type StoppedBy = Arc<std::sync::OnceLock<&'static str>>;

/// SIGTERM / SIGINT end the agent (gracefully, then forcefully); the relay then ends,
/// the log gets its stop record, and fsgate exits 0 (it stopped as asked).
async fn end_agent_on_signal(mut stop: crate::signals::Stop, stopped: StoppedBy, pid: u32) {
    let sig = stop.termination().await;
    let _ = stopped.set(sig);
    tracing::warn!("{sig}: ending the agent (pid {pid})");
    let Some(agent) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process(agent, rustix::process::Signal::TERM);
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let _ = rustix::process::kill_process(agent, rustix::process::Signal::KILL);
}

/// Ends what the agent started (nothing may run or write after the stop record) and
/// lets the copy of its stderr finish: the first details of the `agent-exit` record.
fn end_tree(
    tree: &mut fsgate_sandbox::agent_tree::AgentTree,
    agent_stderr: Option<std::thread::JoinHandle<()>>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut details = serde_json::Map::new();
    match tree.end() {
        Ok(left) => details.insert("treeKilled".into(), left.into()),
        Err(e) => details.insert("treeError".into(), e.into()),
    };
    finish_copy(agent_stderr);
    details
}

/// A confined agent that failed of its own accord (an exit code, not fsgate ending it):
/// what its sandbox denied it.
fn report_own_failure(
    end: &AgentEnd,
    confined: Option<&Confined>,
    denials: &fsgate_sandbox::denied::Denials,
    stopped_by: &StoppedBy,
) {
    if let Some(c) = confined
        && end.status.code().is_some_and(|code| code != 0)
        && stopped_by.get().is_none()
    {
        report_denials(denials, &c.plan);
    }
}

/// How the agent ended, in the `agent-exit` record's details, and fsgate's exit code.
/// `failed` is told the agent's end before the exit code is chosen.
fn agent_exit(
    result: std::io::Result<AgentEnd>,
    stopped_by: &StoppedBy,
    details: &mut serde_json::Map<String, serde_json::Value>,
    failed: impl FnOnce(&AgentEnd),
) -> ExitCode {
    let end = match result {
        Ok(end) => end,
        Err(e) => {
            fsgate_base::text::eprint_line(&format!("fsgate: relay failed: {e}"));
            details.insert("error".into(), e.to_string().into());
            return ExitCode::FAILURE;
        }
    };
    let status = end.status;
    tracing::info!(%status, "agent exited");
    details.insert("status".into(), status.to_string().into());
    details.insert("code".into(), status.code().into());
    failed(&end);
    match stopped_by.get() {
        Some(sig) => {
            details.insert("stoppedBy".into(), (*sig).into());
            ExitCode::SUCCESS
        }
        None if end.killed_after_eof => {
            details.insert("stoppedBy".into(), "end-of-input".into());
            killed_after_eof_exit()
        }
        None => exit_code_of(status),
    }
}

/// Binds the loopback port of the MCP server hosted for the agent.
fn bind_hosted() -> Result<(std::net::TcpListener, u16), String> {
    let listener = fsgate_doors::hosted::Hosted::bind()
        .map_err(|e| format!("cannot bind the MCP server for the agent on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot bind the MCP server for the agent: {e}"))?
        .port();
    Ok((listener, port))
}

/// The hosted MCP server in the `agent-start` record: where it listens (never a secret).
fn hosted_record(hosted: &fsgate_doors::hosted::Hosted) -> serde_json::Value {
    serde_json::json!({
        "name": fsgate_doors::hosted::SERVER_NAME,
        "url": hosted.url(),
        "port": hosted.port(),
    })
}

/// The agent's confinement, worked out before its command is built: a private scratch
/// directory (its HOME and TMPDIR), its own installation as discovered, the system
/// paths, the port of the MCP server hosted for it (and this binary, its stdio
/// bridge), and nothing of the workspace, fsgate's own files or the rest of the home.
fn plan_confinement(
    opened: &mut startup::Opened,
    policy_file: Option<&std::path::Path>,
    (program, args): (&str, &[String]),
    (port, exe): (u16, Option<&std::path::Path>),
) -> Result<Confined, String> {
    let tmp = std::env::temp_dir();
    sweep_stale_scratch(&tmp);
    let scratch = create_scratch(&tmp)?;
    opened.keep_scratch(&scratch.path);
    let mut plan = agent_plan(opened, policy_file, &scratch.path)?;
    if opened.gateway.policy().agent().discover() {
        let installation = discover_agent(program, args)?;
        for note in &installation.notes {
            fsgate_base::text::eprint_line(&format!(
                "fsgate: note: {}",
                fsgate_base::text::Esc(note)
            ));
        }
        installation.merge_into(&mut plan);
        plan.executable = Some(installation.executable);
    }
    reach_hosted(&mut plan, port, exe);
    Ok(Confined {
        _scratch: scratch,
        plan,
        status: None,
    })
}

/// An agent profile in force, and the private directory its files are in when the
/// agent has no scratch dir of its own (emptied when the profile is dropped).
struct Profile {
    plan: fsgate_sandbox::profile::ProfilePlan,
    _dir: Option<Scratch>,
}

/// The profile `[agent] profile` names or detects from the command: its files written
/// (in the confined agent's scratch dir, granted read, or a private one), its
/// variables added to a confined agent's environment, and one line on stderr saying
/// what it turns off and what stays on. None when no profile applies.
fn prepare_profile(
    opened: &mut startup::Opened,
    program: &str,
    args: &[String],
    confined: Option<&mut Confined>,
) -> Result<Option<Profile>, String> {
    use fsgate_sandbox::profile::{ProfilePlan, ProfileSetting};
    let setting = opened.gateway.policy().agent().profile();
    let Some(kind) = setting.resolve(program, args) else {
        if setting == ProfileSetting::Auto {
            fsgate_base::text::eprint_line(&format!(
                "fsgate: no agent profile for {}: its built-in file tools, if any, stay on",
                fsgate_base::text::Esc(program)
            ));
        }
        return Ok(None);
    };
    let (dir, own) = match &confined {
        Some(c) => (c._scratch.path.join(".fsgate-profile"), None),
        None => {
            let s = create_scratch(&std::env::temp_dir())?;
            opened.keep_scratch(&s.path);
            (s.path.clone(), Some(s))
        }
    };
    let plan = ProfilePlan::new(
        kind,
        setting == ProfileSetting::Auto,
        &dir,
        confined.is_some(),
    );
    if !plan.files.is_empty() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for (name, text) in &plan.files {
            let file = dir.join(name);
            std::fs::write(&file, text)
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        }
    }
    if let Some(c) = confined {
        if !plan.files.is_empty() {
            let source = "the agent profile's files";
            c.plan
                .grant(&dir, fsgate_sandbox::AgentAccess::Read, source);
        }
        c.plan
            .env
            .extend(plan.env.iter().map(|(k, v)| (k.into(), v.into())));
    }
    fsgate_base::text::eprint_line(&format!(
        "fsgate: {}",
        fsgate_base::text::Esc(&plan.summary())
    ));
    Ok(Some(Profile { plan, _dir: own }))
}

/// The profile for the `agent-start` record (null when none applies).
fn profile_record(profile: Option<&Profile>) -> serde_json::Value {
    profile
        .and_then(|p| serde_json::to_value(&p.plan).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The agent's own installation: its resolved program, interpreter and scripts.
fn discover_agent(
    program: &str,
    args: &[String],
) -> Result<fsgate_sandbox::discover::Installation, String> {
    use fsgate_sandbox::discover::{DiscoverInput, discover};
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let path_var = std::env::var_os("PATH");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    discover(&DiscoverInput {
        program: program.as_ref(),
        args: &args,
        cwd: &cwd,
        path_var: path_var.as_deref(),
        home: home.as_deref(),
    })
    .map_err(|e| e.to_string())
}

impl Confined {
    /// The agent inside the view (src/cli/acp_view.rs): its command line is the
    /// program discovery resolved, its arguments and the profile's.
    fn in_view(
        self,
        opened: &mut startup::Opened,
        policy_file: Option<&std::path::Path>,
        (program, args, profile_args): (&str, &[String], &[String]),
        require_landlock: bool,
    ) -> Result<(acp_view::AgentCommand, Confined), String> {
        let exe = self
            .plan
            .executable
            .clone()
            .unwrap_or_else(|| program.into());
        let mut argv: Vec<std::ffi::OsString> = vec![exe.into()];
        argv.extend(args.iter().chain(profile_args).map(Into::into));
        let (command, status) = acp_view::command(opened, policy_file, &self.plan, argv)?;
        required(&status, require_landlock)?;
        Ok((
            command,
            Confined {
                status: Some(status),
                ..self
            },
        ))
    }

    /// Applies the plan to the agent's command: what the kernel will enforce.
    /// Under `[sandbox] require_landlock = true` an agent wall the kernel does not fully
    /// enforce is refused before the agent starts.
    fn apply(
        self,
        command: &mut std::process::Command,
        require_landlock: bool,
    ) -> Result<Confined, String> {
        let status = fsgate_sandbox::confine_agent_command(command, &self.plan)
            .map_err(|e| e.to_string())?;
        required(&status, require_landlock)?;
        Ok(Confined {
            status: Some(status),
            ..self
        })
    }
}

/// Under `[sandbox] require_landlock = true`, an agent wall the kernel does not fully
/// enforce is refused before the agent starts.
fn required(status: &fsgate_sandbox::SandboxStatus, require_landlock: bool) -> Result<(), String> {
    if require_landlock && status.enforcement != fsgate_sandbox::Enforcement::Fully {
        return Err(format!(
            "[sandbox] require_landlock = true, but the agent's sandbox is {status}; \
             refusing to start the agent"
        ));
    }
    Ok(())
}

/// The agent's ruleset from the policy's `[agent]` section: system paths, devices, the
/// section's grants, HOME and TMPDIR (the private scratch dir unless the policy names
/// real ones), the environment it lets through, network and sockets; and what it may
/// never reach. A grant of a protected path is refused, naming the key.
fn agent_plan(
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
        None => fsgate_sandbox::DEFAULT_AGENT_SYSTEM_PATHS
            .iter()
            .for_each(|p| plan.grant(p, AgentAccess::ReadExec, "built-in system paths")),
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
        plan.grant(scratch, AgentAccess::ReadWrite, "the agent's scratch dir");
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

/// Lets the confined agent (and what it starts) reach the MCP server hosted for it:
/// TCP connect to its port when the policy limits the agent's network, and this binary
/// (its stdio bridge, `fsgate mcp-connect`) to run, unless it lies in a protected path.
fn reach_hosted(plan: &mut fsgate_sandbox::AgentPlan, port: u16, exe: Option<&std::path::Path>) {
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
            fsgate_base::text::EscPath(&p.path)
        ));
        return;
    }
    plan.grant(
        real,
        AgentAccess::ReadExec,
        "fsgate mcp-connect: the agent's bridge to fsgate's MCP server",
    );
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

/// The agent's ruleset for the `agent-start` record: every grant with its source, the
/// network, the sockets, and the names (never the values) of its environment.
fn plan_record(plan: &fsgate_sandbox::AgentPlan) -> serde_json::Value {
    let mut value = serde_json::to_value(plan).unwrap_or_default();
    let names: Vec<String> = plan
        .env
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("envNames".into(), names.into());
    }
    value
}

/// The agent's command: stdio piped (stderr is relayed escaped, line by line, each line
/// marked as the agent's), signals unblocked. It is started before the gateway confines
/// itself, so it does not inherit the gateway's ruleset. Under confinement the program
/// is the one discovery resolved (the environment is replaced, so a PATH lookup could
/// find another), still called by the name typed.
fn agent_command(
    program: &str,
    args: &[String],
    confined: Option<&Confined>,
) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let resolved = confined.and_then(|c| c.plan.executable.as_deref());
    let mut command = std::process::Command::new(resolved.unwrap_or(program.as_ref()));
    command
        .arg0(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    crate::signals::unblock_in_child(&mut command);
    command
}

/// `fsgate acp --check-sandbox`: the agent's whole ruleset and what this kernel enforces,
/// on stdout; nothing is started and nothing is recorded.
fn check_sandbox(opened: startup::Opened, confined: Option<&Confined>, port: u16) -> ExitCode {
    match confined {
        Some(c) => println!("{}", fsgate_sandbox::describe_agent_plan(&c.plan)),
        // clap requires --confine-agent with --check-sandbox; said anyway.
        None => println!("the agent is not confined: add --confine-agent to see its ruleset"),
    }
    println!(
        "fsgate's MCP server for the agent: 127.0.0.1:{port} (a port drawn at each start), \
         the one part of the gateway the agent can reach; each session gets its own secret"
    );
    // The log was opened (its start record written): close it as `serve --check-sandbox`.
    let mut details = serde_json::Map::new();
    details.insert("reason".into(), "check-sandbox".into());
    startup::shutdown(&opened.gateway, details);
    ExitCode::SUCCESS
}

/// The agent could not be started: why, and under `--confine-agent` what would allow it.
fn spawn_failed(program: &str, err: &std::io::Error, confined: Option<&Confined>) -> ExitCode {
    let shown = fsgate_base::text::Esc(program);
    let Some(c) = confined else {
        return fail(&format!("cannot start the agent \"{shown}\": {err}"));
    };
    let resolved = c.plan.executable.as_deref();
    let mut msg = format!("cannot start the agent \"{shown}\" under --confine-agent: {err}");
    if err.kind() == std::io::ErrorKind::PermissionDenied
        && let Some(exe) = resolved
    {
        msg.push_str(&format!(
            "\nthe sandbox denied executing {}",
            fsgate_sandbox::denied::advice(exe, &c.plan)
        ));
    }
    msg.push_str(
        "\nsee the whole ruleset with: fsgate acp --confine-agent --check-sandbox -- AGENT...",
    );
    fail(&msg)
}

/// After a confined agent failed: the paths it reported as denied, each with what would
/// allow it, or where to look when it named none.
fn report_denials(denials: &fsgate_sandbox::denied::Denials, plan: &fsgate_sandbox::AgentPlan) {
    let paths = denials.paths();
    if paths.is_empty() {
        fsgate_base::text::eprint_line(
            "fsgate: the confined agent failed; if its sandbox stopped it, see its ruleset \
             with: fsgate acp --confine-agent --check-sandbox -- AGENT...",
        );
        return;
    }
    fsgate_base::text::eprint_line("fsgate: the confined agent failed after being denied:");
    for path in paths {
        fsgate_base::text::eprint_line(&format!(
            "fsgate:   {}",
            fsgate_sandbox::denied::advice(&path, plan)
        ));
    }
}

const SCRATCH_PREFIX: &str = "fsgate-agent-";

/// A new private (0700) scratch directory `fsgate-agent-PID-RANDOM` in `tmp`, locked
/// (flock) for as long as this gateway runs. The random part keeps a directory left by an
/// earlier gateway with the same pid (its own sandbox may keep it from removing the
/// directory itself) from blocking this one; the lock keeps another gateway's sweep from
/// taking it, whatever PID namespace that gateway sees.
fn create_scratch(tmp: &std::path::Path) -> Result<Scratch, String> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for _ in 0..8 {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| format!("cannot draw a random name: {e}"))?;
        let dir = tmp.join(format!(
            "{SCRATCH_PREFIX}{}-{}",
            std::process::id(),
            hex::encode(bytes)
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => match lock_own(&dir) {
                Some(lock) => {
                    return Ok(Scratch {
                        path: dir,
                        _lock: lock,
                    });
                }
                // Swept between its creation and its lock: draw another name.
                None => last = Some(dir),
            },
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(dir),
            Err(e) => {
                return Err(format!(
                    "cannot create the agent's scratch dir {}: {e}",
                    dir.display()
                ));
            }
        }
    }
    Err(format!(
        "cannot create the agent's scratch dir: every name tried exists (last {})",
        last.map(|d| d.display().to_string()).unwrap_or_default()
    ))
}

/// Opens and locks the scratch dir just made at `dir`; None if the lock is taken or the
/// name no longer holds the directory opened.
fn lock_own(dir: &std::path::Path) -> Option<std::fs::File> {
    use std::os::unix::fs::MetadataExt;
    let file = try_lock(dir)?;
    let held = file.metadata().ok()?;
    let named = std::fs::symlink_metadata(dir).ok()?;
    (held.dev() == named.dev() && held.ino() == named.ino()).then_some(file)
}

/// The directory at `dir`, opened and exclusively locked, if no one holds its lock.
fn try_lock(dir: &std::path::Path) -> Option<std::fs::File> {
    use rustix::fs::{FlockOperation, flock};
    let file = std::fs::File::open(dir).ok()?;
    flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

/// Removes the empty scratch directories earlier gateways left in `tmp` (a confined
/// gateway can empty its scratch dir but not remove it): only empty ones, only unlocked
/// ones (a running gateway holds its own's lock), and only those whose gateway (the pid
/// in the name) this process cannot see alive. Best effort.
fn sweep_stale_scratch(tmp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if alive || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // The lock is held while removing, so its owner cannot be starting up now.
        if let Some(_lock) = try_lock(&entry.path()) {
            // remove_dir refuses a directory that is not empty: only husks go.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The agent's private scratch directory, locked while this gateway runs, cleaned when
/// dropped.
struct Scratch {
    path: PathBuf,
    _lock: std::fs::File,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        clean_scratch(&self.path);
    }
}

/// Empties the agent's scratch directory. The directory itself stays (empty) when the
/// gateway's own sandbox gives it no right to remove entries of the temp dir.
fn clean_scratch(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let removed = match entry.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            if let Err(e) = removed {
                tracing::warn!("cannot clean {}: {e}", path.display());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!("scratch dir {} left empty: {e}", dir.display());
    }
}

/// Lets the copy of the agent's stderr write what the agent left (a process the agent
/// started may hold the pipe open: then give up after a moment).
fn finish_copy(copy: Option<std::thread::JoinHandle<()>>) {
    let Some(copy) = copy else { return };
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while !copy.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `fsgate acp`'s status when it had to kill an agent that outlived the end of its
/// input (as `timeout(1)` exits when it had to end its command).
pub const EXIT_AGENT_KILLED_AFTER_EOF: u8 = 124;

/// Says that the agent ignored the end of its input and was killed; the exit code.
fn killed_after_eof_exit() -> ExitCode {
    fsgate_base::text::eprint_line(&format!(
        "fsgate: the agent was still running {} s after its input ended; fsgate killed it (exit {EXIT_AGENT_KILLED_AFTER_EOF})",
        fsgate_doors::proxy::GRACE.as_secs()
    ));
    ExitCode::from(EXIT_AGENT_KILLED_AFTER_EOF)
}

/// The agent's exit status as ours: its code, or 128 + signal number.
fn exit_code_of(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(255)),
        _ => ExitCode::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn scratch_dirs_are_private_fresh_and_never_blocked_by_an_old_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // What an earlier gateway with this pid left under the old fixed name.
        let old = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        std::fs::create_dir(&old).expect("mkdir");
        let a = create_scratch(tmp.path()).expect("scratch");
        let b = create_scratch(tmp.path()).expect("scratch");
        assert_ne!(a.path, b.path);
        let mode = std::fs::metadata(&a.path)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn only_empty_scratch_dirs_of_gone_gateways_are_swept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // pid_max is at most 2^22: this pid is never alive.
        let gone = tmp.path().join(format!("{SCRATCH_PREFIX}99999999-ab"));
        let full = tmp.path().join(format!("{SCRATCH_PREFIX}99999998-cd"));
        let live = tmp
            .path()
            .join(format!("{SCRATCH_PREFIX}{}-ef", std::process::id()));
        let other = tmp.path().join("not-fsgate-99999999");
        for d in [&gone, &full, &live, &other] {
            std::fs::create_dir(d).expect("mkdir");
        }
        std::fs::write(full.join("kept"), "x").expect("write");
        sweep_stale_scratch(tmp.path());
        assert!(!gone.exists());
        assert!(full.exists() && live.exists() && other.exists());
    }

    #[test]
    fn a_scratch_dir_in_use_is_kept_even_when_its_pid_is_not_seen() {
        // A gateway in another PID namespace sharing /tmp: its pid means nothing here,
        // but it holds its scratch dir's lock, and its agent may not have written yet.
        let tmp = tempfile::tempdir().expect("tempdir");
        let other_ns = create_scratch(tmp.path()).expect("scratch");
        let foreign = tmp.path().join(format!("{SCRATCH_PREFIX}99999997-01"));
        std::fs::rename(&other_ns.path, &foreign).expect("rename");
        sweep_stale_scratch(tmp.path());
        assert!(foreign.exists(), "a locked scratch dir was swept");
        drop(other_ns);
        sweep_stale_scratch(tmp.path());
        assert!(!foreign.exists(), "an unlocked husk was kept");
    }
}
