//! `fsgate run`: a command, and every process it starts, sees the workspace as a
//! filesystem the gateway serves (crates/fsgate-view), at the workspace's own path, in
//! a private mount namespace. See docs/run.md.
//!
//! Order: open every handle (as `serve` does) and `/dev/fuse`; start the child (fsgate
//! again, which mounts the view in its own namespace and runs the command) while this
//! process may still start programs; confine this process; serve the view; wait for the
//! command, passing SIGINT and SIGTERM on; say what the run did.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::process::{Child, ExitCode};
use std::sync::Arc;

use clap::Args;

use super::exit::{EXIT_OWN, fail, fail_open};
use super::gateway_args::GatewayArgs;
use super::run_confine::RunWall;
use super::view_host::{self, ChildCommand, Fuse, end};
use crate::startup;
use fsgate_base::text::EscPath;

/// `--workspace` as `run` reads it (the rest of its help is `serve`'s).
const WORKSPACE_HELP: &str = "A workspace the command sees through fsgate's view, at its own path. \
Repeat it for several (`--workspace lib=~/src/lib`; default name: the directory's base name): \
each is a view of its own, all mounted before the command starts, every request decided \
in the workspace it lies in and recorded with its name; a rename or link from one to \
another fails with EXDEV. One missing or not a directory among several is skipped with \
a warning. See docs/run.md and docs/workspaces.md.";

#[derive(Debug, Args)]
#[command(mut_arg("workspace", |a| a.help(WORKSPACE_HELP).long_help(WORKSPACE_HELP)))]
pub(super) struct RunArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// The default, kept so command lines that name it still work: outside the
    /// workspaces the command is walled in as `fsgate acp --confine-agent` walls its
    /// agent (the policy's `[agent]` section: its Landlock ruleset, environment and
    /// network; a scratch HOME and TMPDIR; no capabilities). See docs/run.md.
    #[arg(long, conflicts_with = "no_confine")]
    confine: bool,
    /// No wall outside the workspaces: the command sees the rest of the system (your
    /// home, its credentials, /tmp) as it is, and its own environment. The workspaces
    /// are still seen only through the view, and fsgate's own files stay hidden.
    #[arg(long)]
    no_confine: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub(super) fn run(args: RunArgs) -> ExitCode {
    let Ok(config) = args.common.config() else {
        return ExitCode::from(EXIT_OWN);
    };
    let mut opened = match startup::open(&config) {
        Ok(o) => o,
        Err(e) => return own(fail_open(&e, args.common.policy.as_deref())),
    };
    // Orphans of the command's tree come back here if the child that runs it is
    // killed (under `--no-confine` the command may signal it): they end with the run.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("cannot keep the command's orphans (PR_SET_CHILD_SUBREAPER): {e}");
    }
    // From here the log is open: a failure closes it with a `stop` that says why.
    let Ready {
        mut child,
        fuse,
        wall,
        roots,
        session,
        asks_socket,
    } = match ready(&args, &config, &mut opened) {
        Ok(r) => r,
        Err(Early { code, error }) => {
            startup::stop_early(&opened.gateway, &error);
            return code;
        }
    };
    opened.announce_locations();
    let undo = view_host::undo_line(&opened.gateway, opened.audit_log_path(), &config);
    let gateway = Arc::new(opened.gateway);
    gateway.prune_backups_in_background();
    let asks = asks_socket.and_then(|s| answer_asks(&gateway, &session, s));
    let run = Run {
        child: &mut child,
        command: &args.command,
        roots: &roots,
        undo: &undo,
        session,
        asks: asks.as_ref().map(|(_, a)| Arc::clone(a)),
        wall: wall.as_ref(),
    };
    let code = serve_and_wait(&gateway, fuse, run);
    if let Some((path, _)) = asks {
        let _ = std::fs::remove_file(path);
    }
    code
}

/// What `run` has once the command's process is started, the gateway confined and
/// the view's devices connected.
struct Ready {
    child: Child,
    fuse: Vec<OwnedFd>,
    wall: Option<RunWall>,
    roots: Vec<std::path::PathBuf>,
    session: String,
    asks_socket: Option<AskSocket>,
}

/// A failure before the view was served: the exit code (the failure already said on
/// stderr) and the error the `stop` record names.
struct Early {
    code: ExitCode,
    error: String,
}

impl Early {
    /// `fsgate run` could not give the view (see [`no_view`]).
    fn no_view(error: String) -> Early {
        Early {
            code: no_view(&error),
            error,
        }
    }

    /// A failure of fsgate's own.
    fn own(error: String) -> Early {
        Early {
            code: own(fail(&error)),
            error,
        }
    }
}

/// Checks the machine, starts the command's process (which mounts the views), then
/// confines the gateway and connects the views; a failure ends the process.
fn ready(
    args: &RunArgs,
    config: &startup::config::GatewayConfig,
    opened: &mut startup::Opened,
) -> Result<Ready, Early> {
    // The gateway serving the view confines itself with Landlock: no run without it.
    if let Some(why) = fsgate_sandbox::landlock_missing() {
        return Err(Early::no_view(format!(
            "Landlock is missing ({why}): fsgate run confines the gateway that serves the view with it"
        )));
    }
    let fuse = Fuse::new(opened.gateway.members().count()).map_err(Early::no_view)?;
    let policy_file = args.common.policy.as_deref();
    let confine = (!args.no_confine).then(|| RunWall::prepare(opened, policy_file, &args.command));
    let mut wall = confine.transpose().map_err(|e| Early {
        code: wall_refused(&e),
        error: e.to_string(),
    })?;
    let roots = view_host::roots(&opened.gateway);
    let session = view_host::session_id("run");
    let (hide, asks_socket) = hidden_and_asks(opened, config.policy.as_deref(), &session);
    let mut child = start(&fuse, (roots.clone(), hide), &args.command, wall.as_mut())
        .map_err(Early::no_view)?;
    let fuse = confine_and_connect(opened, fuse, &mut child).inspect_err(|_| end(&mut child))?;
    Ok(Ready {
        child,
        fuse,
        wall,
        roots,
        session,
        asks_socket,
    })
}

/// Hardens and confines the gateway, then takes the views' devices from `child`.
fn confine_and_connect(
    opened: &mut startup::Opened,
    fuse: Fuse,
    child: &mut Child,
) -> Result<Vec<OwnedFd>, Early> {
    // Not dumpable: the command (or anything else of its user) gets no ptrace access to
    // the gateway, nor to what its /proc entries lead to.
    fsgate_sandbox::harden_gateway().map_err(|e| Early::own(e.to_string()))?;
    opened.keep_readable(std::path::Path::new("/proc"));
    startup::confine(opened, None, "run").map_err(Early::own)?;
    fuse.connect(child).map_err(Early::no_view)
}

/// The socket `fsgate asks` answers a run's questions on, and its path.
type AskSocket = (std::path::PathBuf, std::os::unix::net::UnixListener);

/// What the command must not see (fsgate's own files, every workspace's state), and the
/// socket `fsgate asks` answers on, bound now.
fn hidden_and_asks(
    opened: &mut startup::Opened,
    policy: Option<&std::path::Path>,
    session: &str,
) -> (Vec<std::path::PathBuf>, Option<AskSocket>) {
    let root = opened.gateway.workspace().root_path().to_path_buf();
    let asks_socket = ask_socket(&root, session);
    let mut hide = view_host::hidden(opened, policy);
    // The directory of `fsgate asks`'s sockets: covered, and kept writable for the
    // gateway, which removes its socket at the end, once confined.
    if let Some(dir) = asks_socket.as_ref().and_then(|(path, _)| path.parent()) {
        hide.push(dir.to_path_buf());
        opened.keep_scratch(dir);
    }
    // Every workspace's fsgate state (their audit logs, backups, asks sockets), made if
    // missing so that none appears there while the command runs.
    if let Ok(all) = fsgate_base::state::state_root() {
        let _ = std::fs::create_dir_all(&all);
        hide.push(all);
    }
    (hide, asks_socket)
}

/// Starts the child that mounts the views and runs `command`, inside `wall` if any.
fn start(
    fuse: &Fuse,
    (roots, hide): (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>),
    command: &[OsString],
    mut wall: Option<&mut RunWall>,
) -> Result<Child, String> {
    let word = wall.as_ref().map(|w| w.word());
    let mut child = ChildCommand::new(fuse, (roots, hide), command.to_vec(), word)?;
    if let Some(w) = wall.as_deref_mut() {
        w.announce();
        w.install(&mut child.command);
    }
    let started = child
        .spawn()
        .map_err(|e| format!("cannot start the command's process: {e}"))?;
    if let Some(w) = wall {
        w.started();
    }
    Ok(started)
}

/// Answers `fsgate asks` on the run's socket: the socket's path and the run's
/// questions (None: `ask` rules refuse).
fn answer_asks(
    gateway: &Arc<fsgate_gateway::Gateway>,
    session: &str,
    (path, listener): (std::path::PathBuf, std::os::unix::net::UnixListener),
) -> Option<(std::path::PathBuf, Arc<fsgate_view::asks::Asks>)> {
    let asks = fsgate_view::asks::Asks::new(Arc::clone(gateway), session.to_owned());
    match fsgate_view::asks::serve(Arc::clone(&asks), listener) {
        Ok(()) => Some((path, asks)),
        Err(e) => {
            tracing::warn!("ask rules will refuse: cannot answer fsgate asks: {e}");
            None
        }
    }
}

/// The socket `fsgate asks` answers the run's questions on, bound before the gateway
/// confines itself (None: `ask` rules refuse, as nobody can be asked).
fn ask_socket(
    root: &std::path::Path,
    session: &str,
) -> Option<(std::path::PathBuf, std::os::unix::net::UnixListener)> {
    let Some(dir) = fsgate_view::asks::dir(root) else {
        tracing::warn!("no state directory: ask rules will refuse (nobody can be asked)");
        return None;
    };
    let path = dir.join(format!("{session}.sock"));
    match fsgate_view::asks::bind(&path) {
        Ok(l) => Some((path, l)),
        Err(e) => {
            tracing::warn!("ask rules will refuse: cannot make {}: {e}", EscPath(&path));
            None
        }
    }
}

/// The command being run, as `serve_and_wait` needs it.
struct Run<'a> {
    child: &'a mut Child,
    command: &'a [OsString],
    roots: &'a [std::path::PathBuf],
    undo: &'a str,
    session: String,
    /// Where `ask` rules' questions wait for `fsgate asks`.
    asks: Option<Arc<fsgate_view::asks::Asks>>,
    /// The `[agent]` wall around the command (None under `--no-confine`).
    wall: Option<&'a RunWall>,
}

/// Serves the view until the command ends; its exit status.
fn serve_and_wait(
    gateway: &Arc<fsgate_gateway::Gateway>,
    fuse: Vec<OwnedFd>,
    run: Run<'_>,
) -> ExitCode {
    let session = run.session;
    record_run(gateway, (&session, run.command, run.child.id()), run.wall);
    announce(run.roots, &session, run.wall.is_some());
    let asks = run.asks.map(|a| a as Arc<dyn fsgate_view::asks::Askers>);
    let served = match view_host::serve(gateway, fuse, (&session, None), asks) {
        Ok(s) => s,
        Err(e) => {
            end(run.child);
            let code = no_view(&e);
            startup::stop_early(gateway, &e);
            return code;
        }
    };
    let code = fsgate_view::child::wait_passing_signals(run.child, None);
    // A process of the command's tree whose own parent (the child that ran it) was
    // killed came back to this process: it ends with the run too.
    fsgate_view::child::end_tree();
    served.finish();
    let (reads, changes, refusals) = served.counts.totals();
    // Not escaped again: every word of the undo command is printable as it is (see
    // `shell_word`), and escaping it would change what pastes.
    eprintln!(
        "fsgate: run {session} ended: {reads} reads, {changes} changes, {refusals} refused; undo its changes with: {} --session {session}",
        run.undo
    );
    view_host::say_too_large(gateway, &served.counts, refusals);
    let mut details = serde_json::Map::new();
    details.insert("reason".into(), "command ended".into());
    details.insert("session".into(), session.into());
    details.insert("exitStatus".into(), code.into());
    startup::shutdown(gateway, details);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The `run` record: the session the run's records carry, the command (as the audit
/// log bounds every string) and its pid.
fn record_run(
    gateway: &fsgate_gateway::Gateway,
    (session, command, pid): (&str, &[OsString], u32),
    wall: Option<&RunWall>,
) {
    let argv: Vec<serde_json::Value> = command
        .iter()
        .take(64)
        .map(|a| a.to_string_lossy().into_owned().into())
        .collect();
    let mut details = serde_json::Map::new();
    details.insert("session".into(), session.into());
    details.insert("command".into(), argv.into());
    details.insert("pid".into(), pid.into());
    if let Some(wall) = wall {
        details.insert("confine".into(), wall.record());
    }
    gateway.record("run", details);
}

/// `fsgate run` could not give the view: say what is missing; nothing was run.
fn no_view(what: &str) -> ExitCode {
    fsgate_base::text::eprint_line(&format!(
        "fsgate: {what}; the command was not run (fsgate run never runs it without the view)"
    ));
    ExitCode::from(EXIT_OWN)
}

/// A failure already said on stderr, with `fsgate run`'s own exit status.
fn own(_said: ExitCode) -> ExitCode {
    ExitCode::from(EXIT_OWN)
}

/// The command's wall could not be worked out. A program that is not there, or not
/// runnable, is answered as a shell answers it (127, 126); anything else is fsgate's.
fn wall_refused(e: &super::wall::WallError) -> ExitCode {
    let code = match e {
        super::wall::WallError::Program(p) if not_found(p) => 127,
        super::wall::WallError::Program(_) => 126,
        super::wall::WallError::Other(e) => {
            return no_view(&format!(
                "the command's wall: {e} (--no-confine runs it without)"
            ));
        }
    };
    fsgate_base::text::eprint_line(&format!("fsgate: {e}; the command was not run"));
    ExitCode::from(code)
}

/// Whether the program, or the interpreter its `#!` line names, is not there (as
/// execve's ENOENT, which a shell and env(1) answer with 127).
fn not_found(e: &fsgate_sandbox::discover::DiscoverError) -> bool {
    use fsgate_sandbox::discover::DiscoverError as D;
    match e {
        D::NotOnPath { .. } | D::NoPath { .. } => true,
        D::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        D::Interpreter { source, .. } => not_found(source),
        _ => false,
    }
}

/// Says on stderr what the command sees and what is governed.
fn announce(roots: &[std::path::PathBuf], session: &str, confined: bool) {
    let shown: Vec<String> = roots.iter().map(|r| EscPath(r).to_string()).collect();
    let rest = match confined {
        true => {
            "outside them it reaches only what the policy's [agent] section grants (its Landlock wall, with a scratch HOME and TMPDIR; --no-confine lifts it)"
        }
        false => {
            "the rest of the system (your home too) it sees as it is (--no-confine): without that option it is walled in"
        }
    };
    fsgate_base::text::eprint_line(&format!(
        "fsgate: run {session}: the command sees {} through fsgate's view: every lookup, read and change there is decided by the policy and recorded; fsgate's audit log, backups and policy are hidden from it; {rest}",
        shown.join(" and ")
    ));
}

/// `fsgate __view-child ...`: the child a [`ChildCommand`] started: the command's exit
/// status, or 125 if it could not be run.
pub(super) fn child() -> ExitCode {
    let Some(spec) = fsgate_view::child::Spec::from_args(std::env::args_os().skip(2)) else {
        return own(fail("this word is fsgate run's own; see fsgate run --help"));
    };
    // Before anything else: the command and every process it starts cannot push input
    // into the terminal (TIOCSTI), where the shell that started fsgate would run it.
    if let Err(e) = fsgate_sandbox::no_tiocsti::refuse_terminal_injection() {
        return no_view(&e.to_string());
    }
    match fsgate_view::child::run(&spec) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => no_view(&e),
    }
}
