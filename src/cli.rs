//! The command line: parsing (clap), start-up order, and exit codes, in one place.
//!
//! Start-up order matters for Landlock: load the policy, open every handle, confine the
//! process, and only then start threads (the tokio runtime), so that every thread
//! inherits the restriction.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::gateway::Gateway;
use crate::policy::Policy;
use crate::workspace::Workspace;

/// Exit code for invalid configuration or unreadable input.
pub const EXIT_CONFIG: u8 = 2;

/// fsgate: the filesystem gateway between untrusted AI agents and your files.
///
/// fsgate is the agent's only door to a workspace: every read, write and delete is
/// checked against a TOML policy (deny wins), executed through a capability handle on
/// the workspace root, and recorded.
#[derive(Debug, Parser)]
#[command(name = "fsgate", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a workspace to one agent over stdio (ACP or MCP) or WebSocket.
    ///
    /// Example: fsgate serve --workspace ~/project
    /// then send newline-delimited JSON-RPC on stdin, e.g.
    /// {"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/home/me/project/README.md"}}
    Serve(ServeArgs),
    /// Host an ACP agent: relay the editor <-> agent and answer the agent's file access.
    Acp(AcpArgs),
    /// Policy tools: check (lint), explain a decision, run a policy's [[test]] cases.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Audit log tools: verify the hash chain, show records.
    Audit {
        /// Arguments (not yet available in this build).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Backup tools: list and restore previous versions of files.
    Backup {
        /// Arguments (not yet available in this build).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Wire protocol for `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    /// Agent Client Protocol file-system methods, JSON-RPC 2.0 lines on stdio.
    Acp,
    /// Model Context Protocol server on stdio.
    Mcp,
    /// WebSocket files channel (needs --listen).
    Ws,
}

/// Options shared by `serve` and `acp`.
#[derive(Debug, Args)]
struct GatewayArgs {
    /// The workspace directory the agent may reach. Nothing outside it is reachable.
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// Policy file (TOML). Default: the built-in policy (policies/default.toml): read and
    /// write the workspace, secrets and .git denied, 10 MiB limits, binary reads denied.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The active audit log file (rotated files and checkpoints sit beside it). Must lie
    /// outside the workspace. Default: the policy's [audit] path, else a per-workspace
    /// directory under your state dir.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Where previous versions of changed files are kept. Must lie outside the
    /// workspace. Default: the policy's [backup] dir, else under your state dir.
    #[arg(long, value_name = "DIR")]
    backup_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// Wire protocol: acp (default), mcp, or ws.
    #[arg(long, value_enum, default_value_t = Transport::Acp)]
    transport: Transport,
    /// Address for --transport ws: HOST:PORT, or just PORT for 127.0.0.1:PORT.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Print what the Landlock sandbox enforces on this kernel and exit.
    #[arg(long)]
    check_sandbox: bool,
}

#[derive(Debug, Args)]
struct AcpArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// Run the agent under its own Landlock ruleset with no access to the workspace.
    #[arg(long)]
    confine_agent: bool,
    /// The agent command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "AGENT_CMD")]
    agent: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Lint policy files: exit 0 clean, 1 findings, 2 unreadable or invalid.
    Check {
        /// Policy files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show which rule decides an operation on a path, and why.
    Explain {
        /// Policy file.
        file: PathBuf,
        /// Operation class: read, write, delete or list.
        #[arg(long)]
        op: String,
        /// Workspace-relative path.
        path: String,
    },
    /// Run the [[test]] cases in policy files.
    Test {
        /// Policy files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Acp(args) => acp(args),
        Command::Policy(_) => not_yet("policy", 7),
        Command::Audit { .. } => not_yet("audit", 3),
        Command::Backup { .. } => not_yet("backup", 3),
    }
}

fn not_yet(cmd: &str, issue: u32) -> ExitCode {
    eprintln!("fsgate {cmd}: not yet available in this build (tracked as issue {issue}).");
    ExitCode::from(EXIT_CONFIG)
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// Loads the policy named on the command line, or the built-in default.
fn load_policy(path: Option<&PathBuf>) -> Result<Policy, String> {
    match path {
        Some(p) => Policy::load(p).map_err(|e| format!("invalid policy: {e}")),
        None => Policy::builtin_default().map_err(|e| format!("built-in policy: {e}")),
    }
}

/// Loads the policy and opens the workspace: everything a gateway needs.
fn open_gateway(common: &GatewayArgs) -> Result<Gateway, String> {
    let policy = load_policy(common.policy.as_ref())?;
    let workspace = Workspace::open(&common.workspace)
        .map_err(|e| format!("cannot open workspace {}: {e}", common.workspace.display()))?;
    tracing::info!(
        workspace = %workspace.root_path().display(),
        policy = policy.origin(),
        sha256 = policy.sha256(),
        "gateway ready"
    );
    Ok(Gateway::new(policy, workspace))
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fsgate")
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn serve(args: ServeArgs) -> ExitCode {
    let gateway = match open_gateway(&args.common) {
        Ok(g) => Arc::new(g),
        Err(e) => return fail(&e),
    };
    if args.check_sandbox {
        return fail("--check-sandbox: the Landlock layer is not yet available in this build");
    }
    if args.transport != Transport::Acp {
        return fail(&format!(
            "--transport {:?}: not yet available in this build (acp is)",
            args.transport
        ));
    }
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    spawn_reload_on_sighup(&runtime, &gateway, args.common.policy.clone());
    let result = runtime.block_on(crate::transport::acp::serve(
        gateway,
        stdio_peer(),
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fsgate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn acp(args: AcpArgs) -> ExitCode {
    let gateway = match open_gateway(&args.common) {
        Ok(g) => Arc::new(g),
        Err(e) => return fail(&e),
    };
    let Some((program, agent_args)) = args.agent.split_first() else {
        return fail("no agent command given: fsgate acp --workspace DIR -- AGENT_CMD [ARGS...]");
    };
    if args.confine_agent {
        return fail("--confine-agent: not yet available in this build");
    }
    // The agent is started before the gateway confines itself, so it does not inherit
    // the gateway's ruleset (which would not let it execute anything).
    let child = match std::process::Command::new(program)
        .args(agent_args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot start the agent {program:?}: {e}")),
    };
    tracing::info!(pid = child.id(), agent = %program, "agent started");
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    spawn_reload_on_sighup(&runtime, &gateway, args.common.policy.clone());
    let result = runtime.block_on(crate::transport::proxy::run(
        gateway,
        stdio_peer(),
        tokio::io::stdin(),
        tokio::io::stdout(),
        child,
        false,
    ));
    match result {
        Ok(status) => {
            tracing::info!(%status, "agent exited");
            exit_code_of(status)
        }
        Err(e) => {
            eprintln!("fsgate: relay failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGHUP reloads the policy file: the new policy is validated first, and an invalid
/// one is rejected with the old one kept in force.
fn spawn_reload_on_sighup(
    runtime: &tokio::runtime::Runtime,
    gateway: &Arc<Gateway>,
    path: Option<PathBuf>,
) {
    let gw = Arc::clone(gateway);
    runtime.spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; policy reload is unavailable");
            return;
        };
        while hup.recv().await.is_some() {
            let Some(path) = path.as_ref() else {
                tracing::warn!("SIGHUP: running on the built-in policy; nothing to reload");
                continue;
            };
            let loaded = Policy::load(path).map_err(|e| e.to_string());
            match loaded.and_then(|p| gw.reload(p)) {
                Ok((old, new)) => {
                    tracing::warn!(old_sha256 = %old, new_sha256 = %new, "policy reloaded");
                    gw.note_reload(Ok((old, new)));
                }
                Err(e) => {
                    tracing::error!("policy reload rejected, the old policy stays in force: {e}");
                    gw.note_reload(Err(e));
                }
            }
        }
    });
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

/// The stdio peer: our parent process and our uid.
fn stdio_peer() -> String {
    let ppid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    format!("pid={ppid} uid={}", rustix::process::getuid().as_raw())
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("fsgate: {msg}");
    ExitCode::from(EXIT_CONFIG)
}
