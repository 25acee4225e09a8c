//! The command line: each command run, in start-up order. Its words (clap) are in
//! `args`, the exit code of a failed start in `exit`.
//!
//! Start-up order matters for Landlock: load the policy, open every handle, confine the
//! process, and only then start threads (the tokio runtime), so that every thread
//! inherits the restriction.

mod acp;
mod acp_view;
pub mod args;
mod asks;
mod connect;
mod docs;
mod exit;
mod gateway_args;
mod log_filter;
mod run;
mod run_confine;
mod runtime;
mod serving_args;
mod view_host;
mod wall;

use crate::peer::stdio_peer;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use crate::startup;
use args::{Cli, Command, ServeArgs, Transport};
use exit::{fail, fail_open};
use fsgate_gateway::Gateway;
use fsgate_policy::Policy;
use runtime::{runtime, stdio_runtime, with_signals};

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    // The commands that serve hold their stop signals before anything else (even
    // parsing), so that none can kill them between their `start` and `stop` records.
    let serving = std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "serve" || a == "acp" || a == "run");
    if serving && let Err(e) = crate::signals::hold() {
        let code = fail(&e);
        return if is_run() {
            ExitCode::from(exit::EXIT_OWN)
        } else {
            code
        };
    }
    // The child `fsgate run` starts to mount its view and run the command, and the
    // command's own start (its signal mask cleared).
    match std::env::args_os().nth(1) {
        Some(a) if a == fsgate_view::child::ARG => return run::child(),
        Some(a) if a == fsgate_view::child::EXEC_ARG => return view_host::exec(),
        _ => {}
    }
    let command = serving_args::parse(std::env::args_os()).unwrap_or_else(parse_or_exit);
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

/// The command line parsed, or the process ended with clap's message: `fsgate run`'s
/// usage errors exit with its own status (125), not to be taken for the command's.
fn parse_or_exit() -> Command {
    match Cli::try_parse() {
        Ok(cli) => cli.command,
        Err(e) if e.use_stderr() && is_run() => {
            let _ = e.print();
            std::process::exit(i32::from(exit::EXIT_OWN))
        }
        Err(e) => e.exit(),
    }
}

/// Whether this is `fsgate run`.
fn is_run() -> bool {
    std::env::args_os().nth(1).is_some_and(|a| a == "run")
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let asked = EnvFilter::try_from_default_env();
    let keep_all = asked.is_ok();
    let filter = asked.unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Every event is escaped whole (fields hold agent-chosen names); so no colours,
        // whose escape sequences would be escaped too.
        .with_writer(fsgate_base::text::EscapingStderr)
        .with_ansi(false)
        .with_target(false)
        .finish()
        .with(log_filter::QuietDroppedReplies { keep_all })
        .try_init();
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(u8::try_from(c).unwrap_or(2))
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
        Err(e) => return exit::fail_after_start(&opened.gateway, &e),
    };
    let port = listener
        .as_ref()
        .and_then(|l| l.socket().local_addr().ok())
        .map(|a| a.port());
    let status = match startup::confine(&opened, port, transport_name(args.transport)) {
        Ok(s) => s,
        Err(e) => return exit::fail_after_start(&opened.gateway, &e),
    };
    opened.announce_locations();
    if args.check_sandbox {
        print_sandbox(&opened, &status);
        startup::shutdown(&opened.gateway, serde_json::Map::new());
        return ExitCode::SUCCESS;
    }
    let gateway = Arc::new(opened.gateway);
    gateway.prune_backups_in_background();
    let runtime = match args.transport {
        Transport::Mcp | Transport::Acp => stdio_runtime(),
        Transport::Ws | Transport::Http => runtime(),
    };
    let started = runtime.and_then(|rt| with_signals(rt, &gateway, args.common.policy.clone()));
    let (runtime, mut stop) = match started {
        Ok(r) => r,
        Err(e) => return exit::fail_after_start(&gateway, &e),
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
    let listener = fsgate_doors::ws::bind(addr)
        .map_err(|e| format!("cannot listen on {}: {e}", fsgate_base::text::Esc(addr)))?;
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
