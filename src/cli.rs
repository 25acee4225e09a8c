//! The command line: parsing (clap), start-up order, and exit codes, in one place.
//!
//! Start-up order matters for Landlock: load the policy, open every handle, confine the
//! process, and only then start threads (the tokio runtime), so that every thread
//! inherits the restriction.

mod acp;
mod acp_view;
mod asks;
mod connect;
mod docs;
mod run;
mod serving_args;
mod view_host;

use crate::peer::stdio_peer;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::startup;
use fsgate_gateway::Gateway;
use fsgate_policy::Policy;

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
    /// Serve a workspace to one agent over stdio (ACP or MCP), MCP over HTTP, or WebSocket.
    ///
    /// Example: fsgate serve --workspace ~/project
    /// then send newline-delimited JSON-RPC on stdin, e.g.
    /// {"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/home/me/project/README.md"}}
    Serve(ServeArgs),
    /// Run a command with the workspace as a filesystem fsgate serves to it.
    ///
    /// COMMAND, and every process it starts, sees each workspace at its own path
    /// through fsgate's view (FUSE, in a private mount namespace): a secret the policy
    /// hides does not exist there, every read and change is decided by the policy and
    /// recorded, a change is backed up first, and a write the policy refuses fails with
    /// EACCES (at open for its path, at close for its content). fsgate's audit log,
    /// backups and policy are hidden from COMMAND. Needs /dev/fuse and mount namespaces;
    /// without them fsgate says what is missing and exits 125 without running COMMAND.
    /// See docs/run.md.
    ///
    /// Exit status: COMMAND's own (128 + N if signal N ended it).
    ///
    /// Example: fsgate run --workspace ~/project -- sh -c 'make test'
    ///
    /// Several: fsgate run --workspace ~/project --workspace lib=~/src/lib -- make
    Run(run::RunArgs),
    /// List and answer the questions `ask` rules put under a running `fsgate run`.
    ///
    /// The command owns its terminal; from another one, `fsgate asks` lists what each
    /// running `fsgate run` of the workspace waits for, and `--allow ID`, `--allow-run
    /// ID` or `--reject ID` answers. A question nobody answers within `[ask]
    /// timeout_secs` is refused (EACCES). Only the user running fsgate can answer; the
    /// answer is recorded naming who gave it. See docs/run.md.
    ///
    /// Example: fsgate asks --workspace ~/project --allow run-3f2a9c01b7de:1
    Asks(asks::AsksArgs),
    /// Host an ACP agent: relay the editor <-> agent and answer the agent's file access.
    ///
    /// Besides the agent's `fs/*` requests, fsgate adds an MCP server of its own, named
    /// `fsgate`, to every session the agent opens (over the ACP connection itself where
    /// the agent advertises the draft MCP-over-ACP transport, else over HTTP on 127.0.0.1
    /// with a secret per session, or through `fsgate mcp-connect`), under the same policy
    /// and audit log.
    ///
    /// The agent's profile (`[agent] profile` in the policy; by default detected from
    /// AGENT_CMD: claude-agent-acp, gemini-cli, fast-agent, opencode, codex-acp) turns its
    /// built-in file tools off through its documented settings; fsgate says at start what
    /// stays on. See docs/agents.md.
    ///
    /// Exit status: the agent's own when it exits by itself (128 + N if signal N ended
    /// it); 0 when SIGTERM or SIGINT stopped fsgate (it ends the agent first); 124 when
    /// the editor closed fsgate's input and the agent was still running 5 s after its
    /// own input was closed (once it answered the editor's requests and had fsgate's
    /// answers to its own, at most 5 s on): fsgate killed it, and says so on stderr; 2 when fsgate could not start (policy,
    /// workspace, audit log, agent command); 1 when the relay itself failed.
    Acp(AcpArgs),
    /// Policy tools: check (lint), explain a decision, run [[test]] cases, diff two policies, print the schema.
    #[command(subcommand)]
    Policy(fsgate_policy::cli::PolicyCommand),
    /// Audit log tools: verify the chain, show and report records, prove one record, ship to syslog, prune.
    #[command(subcommand)]
    Audit(fsgate_audit::cli::AuditCommand),
    /// Backup tools: list and restore previous versions of files.
    #[command(subcommand)]
    Backup(fsgate_backup::cli::BackupCommand),
    /// Put back everything a session (or a time range) changed, as it was before.
    ///
    /// Reads the audit log for the changes, the backups for what was there, and undoes
    /// the changes newest first through the gateway (its fixed floor, a backup of what it
    /// replaces, write-ahead records naming the session undone in `args.undo`). A file
    /// changed since by someone else is left as it is and listed, unless --force.
    /// Run it with the gateway stopped: it refuses while one holds the log.
    ///
    /// Exit status: 0 everything undone (or nothing to undo); 1 some changes left as
    /// they are (listed: changed since, or no backup); 2 nothing done (bad arguments,
    /// unknown session, a log that does not verify); 3 nothing done: a running gateway
    /// holds the audit log.
    ///
    /// Example: fsgate undo --workspace ~/project --session 3f2a... --dry-run
    Undo(crate::undo::UndoArgs),
    /// Relay stdio to the MCP server `fsgate acp` hosts for its agent (started by the agent).
    ///
    /// `fsgate acp` gives this command to agents that start their MCP servers as
    /// commands; it needs FSGATE_MCP_TOKEN, the session's secret, which fsgate puts in
    /// the command's environment. It holds no state: the gateway decides and records.
    McpConnect {
        /// The port of the hosted server on 127.0.0.1.
        #[arg(long)]
        port: u16,
    },
    /// Print a shell completion script for fsgate.
    ///
    /// bash: fsgate completions bash > ~/.local/share/bash-completion/completions/fsgate
    ///
    /// zsh: fsgate completions zsh > DIR/_fsgate, DIR a directory on $fpath
    ///
    /// fish: fsgate completions fish > ~/.config/fish/completions/fsgate.fish
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page fsgate(1) (roff), or write one page per command with --dir.
    ///
    /// Example: fsgate man --dir ~/.local/share/man/man1 && man fsgate-serve
    Man {
        /// Write fsgate.1, fsgate-serve.1, fsgate-audit-verify.1, ... into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
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
    /// MCP over Streamable HTTP at http://ADDR/mcp (needs --listen).
    Http,
}

// These doc comments are `--help` text: `[audit]` names a policy section and `<name>` a
// placeholder, not a link or an HTML tag.
#[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
/// Options shared by `serve` and `acp`.
#[derive(Debug, Args)]
pub(super) struct GatewayArgs {
    /// The workspace directory the agent may reach. Nothing outside it is reachable.
    ///
    /// Repeat it to serve several (`--workspace docs=/srv/docs`; default name: the
    /// directory's base name): each is reached only through its own handle, nothing
    /// between or above them. One missing or not a directory among several is skipped
    /// with a warning; if none is usable, fsgate exits with status 1. See
    /// docs/workspaces.md.
    #[arg(long, value_name = "[NAME=]DIR", required = true)]
    workspace: Vec<crate::startup::WorkspaceArg>,
    /// Policy file (TOML). Default: the built-in policy (policies/default.toml): read and
    /// write the workspace, secrets and .git denied, 10 MiB limits, binary reads only of
    /// images and audio (base64), every other binary file refused.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The active audit log file (rotated files and checkpoints sit beside it). Default:
    /// the policy's [audit] path, else a per-workspace directory under your state dir.
    /// Keep it outside the workspace: one inside is accepted with a warning, hidden from
    /// listings, and no request can read, change, move or remove it, its sidecars, or a
    /// directory holding it (rule floor:audit-log).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Where previous versions of changed files are kept. Default: the policy's [backup]
    /// dir, else under your state dir. Keep it outside the workspace: one inside is
    /// accepted with a warning, hidden from listings, and no request can read, change,
    /// move or remove it, anything in it, or a directory holding it (rule
    /// floor:backup-dir). With several workspaces, DIR/<name> holds each one's backups.
    #[arg(long, value_name = "DIR")]
    backup_dir: Option<PathBuf>,
    /// Start even if the existing audit log does not verify: the damaged part is set
    /// aside and a `break` record, chained to the last good record, says what was wrong.
    #[arg(long)]
    accept_broken_chain: bool,
}

impl GatewayArgs {
    /// The gateway to build. Several workspaces are looked up first: the unusable ones
    /// are skipped with a warning, and none usable fails with exit 1.
    fn config(&self) -> Result<crate::startup::GatewayConfig, ExitCode> {
        use crate::startup::several::{SeveralError, keep_usable};
        let several = match self.workspace.as_slice() {
            [] | [_] => Vec::new(),
            given => match keep_usable(given) {
                Ok(kept) => kept,
                Err(e @ SeveralError::NoneUsable(_)) => {
                    fsgate_base::text::eprint_line(&format!("fsgate: {e}"));
                    return Err(ExitCode::FAILURE);
                }
                Err(e) => return Err(fail(&e.to_string())),
            },
        };
        let workspace = match several.first() {
            Some(first) => first.dir.clone(),
            None => self
                .workspace
                .first()
                .map(|w| w.dir.clone())
                .unwrap_or_default(),
        };
        Ok(crate::startup::GatewayConfig {
            workspace,
            several,
            policy: self.policy.clone(),
            audit_log: self.audit_log.clone(),
            backup_dir: self.backup_dir.clone(),
            accept_broken_chain: self.accept_broken_chain,
        })
    }
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// Wire protocol: acp (default), mcp, ws, or http.
    #[arg(long, value_enum, default_value_t = Transport::Acp)]
    transport: Transport,
    /// Address for --transport ws or http: HOST:PORT, or just PORT for 127.0.0.1:PORT.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Print what the Landlock sandbox enforces on this kernel and exit.
    #[arg(long)]
    check_sandbox: bool,
}

#[derive(Debug, Args)]
pub(super) struct AcpArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// Run the agent under its own Landlock ruleset with no access to the workspace.
    #[arg(long)]
    confine_agent: bool,
    /// With --confine-agent: print the agent's whole ruleset and what this kernel
    /// enforces, then exit without starting the agent.
    #[arg(long, requires = "confine_agent")]
    check_sandbox: bool,
    /// The agent command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "AGENT_CMD")]
    agent: Vec<String>,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    // The commands that serve hold their stop signals before anything else (even
    // parsing), so that none can kill them between their `start` and `stop` records.
    let serving = std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "serve" || a == "acp" || a == "run");
    if serving && let Err(e) = crate::signals::hold() {
        return fail(&e);
    }
    // The child `fsgate run` starts to mount its view and run the command, and the
    // command's own start (its signal mask cleared).
    match std::env::args_os().nth(1) {
        Some(a) if a == fsgate_view::child::ARG => return run::child(),
        Some(a) if a == fsgate_view::child::EXEC_ARG => return view_host::exec(),
        _ => {}
    }
    let command = serving_args::parse(std::env::args_os()).unwrap_or_else(|| Cli::parse().command);
    init_tracing();
    match command {
        Command::Serve(args) => serve(args),
        Command::Run(args) => run::run(args),
        Command::Asks(args) => asks::asks(args),
        Command::Acp(args) => acp::acp(args),
        Command::Policy(cmd) => code(fsgate_policy::cli::run(cmd)),
        Command::Audit(cmd) => code(fsgate_audit::cli::run(cmd)),
        Command::Backup(cmd) => backup(cmd),
        Command::Undo(args) => code(crate::undo::run(&args)),
        Command::McpConnect { port } => connect::mcp_connect(port),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man { dir } => docs::man(dir.as_deref()),
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Every event is escaped whole (fields hold agent-chosen names); so no colours,
        // whose escape sequences would be escaped too.
        .with_writer(fsgate_base::text::EscapingStderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(u8::try_from(c).unwrap_or(2))
}

/// The runtime, SIGHUP reloading the policy from `policy`, and the stop signals
/// (SIGTERM, SIGINT) to wait on.
pub(super) fn runtime_with_signals(
    gateway: &Arc<Gateway>,
    policy: Option<PathBuf>,
) -> Result<(tokio::runtime::Runtime, crate::signals::Stop), String> {
    with_signals(runtime()?, gateway, policy)
}

/// [`runtime_with_signals`] on `runtime`.
fn with_signals(
    runtime: tokio::runtime::Runtime,
    gateway: &Arc<Gateway>,
    policy: Option<PathBuf>,
) -> Result<(tokio::runtime::Runtime, crate::signals::Stop), String> {
    let (stop, reloads) = crate::signals::listen(runtime.handle())?;
    spawn_reload_on_sighup(&runtime, gateway, policy, reloads);
    Ok((runtime, stop))
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fsgate")
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// The runtime of a stdio door: the main thread alone runs its tasks (the door reads
/// stdin and answers on threads of its own, and runs slow work on the blocking pool), so
/// an idle gateway has no runtime worker waiting besides it.
fn stdio_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("fsgate")
        .thread_keep_alive(fsgate_doors::batch::KEEP_ALIVE)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn serve(args: ServeArgs) -> ExitCode {
    // Argument mistakes first, before anything is opened or written.
    if let Err(code) = check_listen(args.transport, args.listen.is_some()) {
        return code;
    }
    let config = match args.common.config() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let opened = match startup::open(&config) {
        Ok(o) => o,
        Err(e) => return fail_open(&e, args.common.policy.as_deref()),
    };
    // A listener is bound, and its token read (or generated), before confinement:
    // Landlock then allows only it, and the token file is not reachable afterwards.
    let listener = match listen(&opened, args.transport, args.listen.as_deref()) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let port = listener
        .as_ref()
        .and_then(|l| l.socket().local_addr().ok())
        .map(|a| a.port());
    let status = match startup::confine(&opened, port, transport_name(args.transport)) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    opened.announce_locations();
    if args.check_sandbox {
        print_sandbox(&opened, &status);
        startup::shutdown(&opened.gateway, serde_json::Map::new());
        return ExitCode::SUCCESS;
    }
    let gateway = Arc::new(opened.gateway);
    let runtime = match args.transport {
        Transport::Mcp | Transport::Acp => stdio_runtime(),
        Transport::Ws | Transport::Http => runtime(),
    };
    let started = runtime.and_then(|rt| with_signals(rt, &gateway, args.common.policy.clone()));
    let (runtime, mut stop) = match started {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let serving = serving(args.transport, listener, &gateway);
    // SIGTERM / SIGINT stop serving; the log still gets its `stop` record and final
    // checkpoint (for the WebSocket transport a signal is the usual way to stop).
    let (result, reason) = runtime.block_on(async {
        tokio::select! {
            r = serving => (r, "end of input"),
            s = stop.termination() => (Ok(()), s),
        }
    });
    // In-flight requests get a moment to finish; on a signal, a blocked stdin read must
    // not hold up the exit for long.
    let grace = if reason == "end of input" { 5 } else { 1 };
    runtime.shutdown_timeout(std::time::Duration::from_secs(grace));
    let mut details = serde_json::Map::new();
    details.insert("reason".into(), reason.into());
    startup::shutdown(&gateway, details);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fsgate_base::text::eprint_line(&format!("fsgate: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// `--listen` is given exactly for the transports that listen.
fn check_listen(transport: Transport, listen: bool) -> Result<(), ExitCode> {
    match (transport, listen) {
        (Transport::Ws | Transport::Http, false) => Err(fail(
            "--transport ws and http need --listen ADDR (HOST:PORT, or PORT for 127.0.0.1:PORT)",
        )),
        (Transport::Acp | Transport::Mcp, true) => Err(fail(
            "--listen is only for --transport ws and http (the acp and mcp transports speak on stdin/stdout)",
        )),
        _ => Ok(()),
    }
}

/// The transport's name in the `start` record.
fn transport_name(transport: Transport) -> &'static str {
    match transport {
        Transport::Acp => "acp",
        Transport::Mcp => "mcp",
        Transport::Ws => "ws",
        Transport::Http => "http",
    }
}

/// `serve --check-sandbox`: what the kernel enforces, and the git dirs this gateway
/// alone may write.
fn print_sandbox(opened: &startup::Opened, status: &fsgate_sandbox::SandboxStatus) {
    println!("{status}");
    for d in opened.vcs_write_dirs() {
        println!(
            "git dir {}: read-write for this gateway only ([vcs] stage)",
            fsgate_base::text::EscPath(&d)
        );
    }
}

type Serving = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>>>>;

/// The transport's server: on its listener (ws, http), or on stdin/stdout (mcp, acp).
fn serving(transport: Transport, listener: Option<Listening>, gateway: &Arc<Gateway>) -> Serving {
    match (transport, listener) {
        (_, Some(Listening::Ws(l, token, settings))) => Box::pin(
            fsgate_doors::ws::serve_with_token(Arc::clone(gateway), l, settings, token),
        ),
        (_, Some(Listening::Http(l, token, settings))) => Box::pin(
            fsgate_doors::http::serve_with_token(Arc::clone(gateway), l, settings, token),
        ),
        (Transport::Ws | Transport::Http, None) => {
            Box::pin(async { Err(std::io::Error::other("no listener")) })
        }
        (Transport::Mcp, None) => Box::pin(fsgate_doors::mcp::serve_stdio(
            Arc::clone(gateway),
            stdio_peer(),
        )),
        (Transport::Acp, None) => Box::pin(fsgate_doors::acp::serve_stdio(
            Arc::clone(gateway),
            stdio_peer(),
        )),
    }
}

/// A bound listener with its token and settings.
enum Listening {
    Ws(
        std::net::TcpListener,
        fsgate_doors::ws::Token,
        fsgate_doors::ws::WsSettings,
    ),
    Http(
        std::net::TcpListener,
        fsgate_doors::ws::Token,
        fsgate_doors::http::HttpSettings,
    ),
}

impl Listening {
    fn socket(&self) -> &std::net::TcpListener {
        match self {
            Listening::Ws(l, ..) | Listening::Http(l, ..) => l,
        }
    }
}

/// Binds the listener of a network transport and gets its token (read from the
/// section's `token_file`, or generated and printed).
///
/// # Ambient Authority
/// Binds a socket and reads the token file: start-up, before confinement.
fn listen(
    opened: &startup::Opened,
    transport: Transport,
    addr: Option<&str>,
) -> Result<Option<Listening>, String> {
    let (Some(addr), Transport::Ws | Transport::Http) = (addr, transport) else {
        return Ok(None);
    };
    let policy = opened.gateway.policy();
    let settings = policy.settings();
    let listener = fsgate_doors::ws::bind(addr).map_err(|e| format!("cannot listen: {e}"))?;
    Ok(Some(match transport {
        Transport::Http => {
            let settings = settings.http.clone();
            let token = fsgate_doors::http::token_for(&settings)?;
            Listening::Http(listener, token, settings)
        }
        _ => {
            let settings = settings.ws.clone();
            let token =
                fsgate_doors::ws::Token::for_settings(&settings).map_err(|e| e.to_string())?;
            Listening::Ws(listener, token, settings)
        }
    }))
}

/// `fsgate backup ...`; a restore is recorded in the workspace's audit log.
fn backup(cmd: fsgate_backup::cli::BackupCommand) -> ExitCode {
    use fsgate_backup::cli::BackupCommand;
    let mut cmd = cmd;
    let BackupCommand::Restore {
        workspace,
        audit_log,
        policy,
        backup_dir,
        workspace_name,
        ..
    } = &mut cmd
    else {
        return code(fsgate_backup::cli::run(cmd));
    };
    // The same log, settings and store the gateway uses, so the restore's record extends
    // its chain (signed like the rest) rather than starting another.
    let loaded = match policy.as_deref().map(Policy::load).transpose() {
        Ok(p) => p,
        Err(e) => return fail(&format!("backup restore refused: {e}")),
    };
    // Relative paths in the policy's [audit] section are relative to the policy file.
    let settings = loaded
        .as_ref()
        .map(|p| p.settings().audit.clone())
        .unwrap_or_default();
    if backup_dir.is_none() {
        *backup_dir = loaded
            .as_ref()
            .and_then(|p| p.settings().backup.dir.clone());
    }
    let log_path = match (audit_log.clone(), settings.path.clone()) {
        (Some(p), _) | (None, Some(p)) => Ok(p),
        (None, None) => fsgate_backup::workspace_state_dir(workspace)
            .map(|d| d.join("audit").join("audit.jsonl"))
            .map_err(|e| e.to_string()),
    };
    if settings.signing_key.is_none()
        && let Ok(p) = &log_path
        && p.exists()
        && fsgate_audit::checkpoints_are_signed(p)
    {
        return fail(
            "backup restore refused: the audit log's checkpoints are signed; pass --policy (the gateway's policy, whose [audit] signing_key signs the restore's records too)",
        );
    }
    let policy_sha = loaded
        .as_ref()
        .map(|p| p.sha256().to_string())
        .unwrap_or_default();
    let log = log_path.and_then(|p| {
        fsgate_audit::AuditLog::open(
            &p,
            &settings,
            &policy_sha,
            fsgate_audit::OpenOptions::default(),
        )
        .map_err(|e| {
            format!(
                "{e} (a restore must be audited: stop the gateway serving this workspace first)"
            )
        })
    });
    let named = workspace_name.clone();
    match log {
        Ok(log) => code(fsgate_backup::cli::run_with_audit(
            cmd,
            &mut fsgate_backup::audit::Recorder::new(log, stdio_peer()).in_workspace(named),
        )),
        Err(e) => fail(&format!("backup restore refused: {e}")),
    }
}

/// SIGHUP reloads the policy file: the new policy is validated first, and an invalid
/// one is rejected with the old one kept in force.
pub(super) fn spawn_reload_on_sighup(
    runtime: &tokio::runtime::Runtime,
    gateway: &Arc<Gateway>,
    path: Option<PathBuf>,
    mut hup: crate::signals::Reloads,
) {
    let gw = Arc::clone(gateway);
    runtime.spawn(async move {
        while hup.recv().await.is_some() {
            let Some(path) = path.as_ref() else {
                tracing::warn!("SIGHUP: running on the built-in policy; nothing to reload");
                continue;
            };
            let loaded = Policy::load(path).map_err(|e| {
                let msg = e.to_string();
                if msg.contains("Permission denied") {
                    format!(
                        "{msg}: the kernel sandbox admits only the policy file opened at start; \
                         an editor that saves by replacing the file makes a new one. Write the \
                         new text into the same file (e.g. `cat new.toml > policy.toml`) or restart fsgate"
                    )
                } else {
                    msg
                }
            });
            match loaded.and_then(|p| gw.reload(p)) {
                Ok((old, new)) => {
                    tracing::warn!(old_sha256 = %old, new_sha256 = %new, "policy reloaded");
                    note_reload(&gw, &path.display().to_string(), Ok((old, new)));
                }
                Err(e) => {
                    tracing::error!("policy reload rejected, the old policy stays in force: {e}");
                    note_reload(&gw, &path.display().to_string(), Err(e));
                }
            }
        }
    });
}

/// Records the result of a policy reload: a `reload` audit record with both hashes,
/// or a `reload-rejected` record saying why the old policy stays in force.
fn note_reload(gw: &Gateway, origin: &str, result: Result<(String, String), String>) {
    let mut details = serde_json::Map::new();
    details.insert("policy".into(), origin.into());
    match result {
        Ok((old, new)) => {
            details.insert("old_sha256".into(), old.clone().into());
            details.insert("new_sha256".into(), new.clone().into());
            gw.record("reload", details);
            gw.set_meta("policyReloadedFrom", (old + " -> " + &new).into());
        }
        Err(e) => {
            details.insert("error".into(), e.clone().into());
            details.insert("in_force_sha256".into(), gw.policy().sha256().into());
            gw.record("reload-rejected", details);
            gw.set_meta("lastReloadError", e.into());
        }
    }
}

/// A start-up failure. When the policy file does not load, every error in it is
/// reported, located and with its hint, as `fsgate policy check` reports them.
pub(super) fn fail_open(msg: &str, policy: Option<&std::path::Path>) -> ExitCode {
    use std::io::Write;
    if let Some(p) = policy
        && Policy::load(p).is_err()
    {
        let mut err = std::io::stderr().lock();
        if let Ok(n @ 1..) = fsgate_policy::cli::write_load_errors(p, &mut err) {
            let p = fsgate_base::text::EscPath(p);
            let _ = writeln!(
                err,
                "fsgate: invalid policy {p}: {n} error(s), nothing started \
                 (`fsgate policy check {p}` lists the warnings too)"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    fail(msg)
}

pub(super) fn fail(msg: &str) -> ExitCode {
    fsgate_base::text::eprint_line(&format!("fsgate: {msg}"));
    ExitCode::from(EXIT_CONFIG)
}
