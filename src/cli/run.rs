//! `fsgate run`: a command, and every process it starts, sees the workspace as a
//! filesystem the gateway serves (crates/fsgate-view), at the workspace's own path, in
//! a private mount namespace. See docs/run.md.
//!
//! Order: open every handle (as `serve` does) and `/dev/fuse`; start the child (fsgate
//! again, which mounts the view in its own namespace and runs the command) while this
//! process may still start programs; confine this process; serve the view; wait for the
//! command, passing SIGINT and SIGTERM on; say what the run did.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, ExitCode};
use std::sync::Arc;

use clap::Args;

use super::{GatewayArgs, fail, fail_open};
use crate::startup;
use crate::text::EscPath;

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    common: GatewayArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Exit status when the view cannot be given (nothing was run).
const EXIT_NO_VIEW: u8 = 125;

pub(super) fn run(args: RunArgs) -> ExitCode {
    let config = match args.common.config() {
        Ok(c) => c,
        Err(code) => return code,
    };
    if !config.several.is_empty() {
        return fail("fsgate run serves one --workspace for now; the command was not run");
    }
    let mut opened = match startup::open(&config) {
        Ok(o) => o,
        Err(e) => return fail_open(&e, args.common.policy.as_deref()),
    };
    // The gateway serving the view confines itself with Landlock: no run without it.
    if let Some(why) = crate::sandbox::landlock_missing() {
        return no_view(&format!(
            "Landlock is missing ({why}): fsgate run confines the gateway that serves the view with it"
        ));
    }
    let fuse = match Fuse::new() {
        Ok(f) => f,
        Err(e) => return no_view(&e),
    };
    let root = opened.gateway.workspace().root_path().to_path_buf();
    let session = session_id();
    let asks_socket = ask_socket(&root, &session);
    let asks_dir = asks_socket.as_ref().and_then(|(path, _)| path.parent());
    let hide = hidden(&mut opened, &config, asks_dir);
    let mut child = match start_child(&fuse, (&root, hide), args.command.clone()) {
        Ok(c) => c,
        Err(e) => return no_view(&e),
    };
    // Not dumpable: the command (or anything else of its user) gets no ptrace access to
    // the gateway, nor to what its /proc entries lead to.
    if let Err(e) = crate::sandbox::harden_gateway() {
        end(&mut child);
        return fail(&e.to_string());
    }
    opened.keep_readable(std::path::Path::new("/proc"));
    if let Err(e) = startup::confine(&opened, None, "run") {
        end(&mut child);
        return fail(&e);
    }
    let fuse = match fuse.connect(&mut child) {
        Ok(f) => f,
        Err(e) => {
            end(&mut child);
            return no_view(&e);
        }
    };
    opened.announce_locations();
    let undo = undo_line(&root, opened.audit_log_path(), &config);
    let gateway = Arc::new(opened.gateway);
    let asks = asks_socket.and_then(|s| answer_asks(&gateway, &session, s));
    let run = Run {
        child: &mut child,
        command: &args.command,
        root: &root,
        undo: &undo,
        session,
        asks: asks.as_ref().map(|(_, a)| Arc::clone(a)),
    };
    let code = serve_and_wait(&gateway, fuse, run);
    if let Some((path, _)) = asks {
        let _ = std::fs::remove_file(path);
    }
    code
}

/// What the command's namespace covers: fsgate's own directories, the audit log, the
/// policy and the directory of `fsgate asks`'s sockets (kept writable for the gateway,
/// which removes its socket at the end, once confined).
fn hidden(
    opened: &mut startup::Opened,
    config: &startup::GatewayConfig,
    asks_dir: Option<&std::path::Path>,
) -> Vec<std::path::PathBuf> {
    let mut hide = opened.own_dirs();
    if let Some(dir) = asks_dir {
        hide.push(dir.to_path_buf());
        opened.keep_scratch(dir);
    }
    hide.push(opened.audit_log_path().to_path_buf());
    hide.extend(
        config
            .policy
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
    );
    hide
}

/// Answers `fsgate asks` on the run's socket: the socket's path and the run's
/// questions (None: `ask` rules refuse).
fn answer_asks(
    gateway: &Arc<crate::gateway::Gateway>,
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
    root: &'a std::path::Path,
    undo: &'a str,
    session: String,
    /// Where `ask` rules' questions wait for `fsgate asks`.
    asks: Option<Arc<fsgate_view::asks::Asks>>,
}

/// Serves the view until the command ends; its exit status.
fn serve_and_wait(gateway: &Arc<crate::gateway::Gateway>, fuse: OwnedFd, run: Run<'_>) -> ExitCode {
    let session = run.session;
    let mut view =
        fsgate_view::View::new(Arc::clone(gateway), session.clone(), run.root.to_path_buf());
    if !rustix::process::geteuid().is_root() {
        view = view.in_user_namespace();
    }
    if let Some(asks) = run.asks {
        view = view.asking(asks);
    }
    let counts = view.counts();
    record_run(gateway, &session, run.command, run.child.id());
    announce(run.root, &session);
    let serving = match fsgate_view::serve(view, fuse) {
        Ok(s) => s,
        Err(e) => {
            end(run.child);
            return no_view(&format!("cannot serve the view: {e}"));
        }
    };
    let code = fsgate_view::child::wait_passing_signals(run.child, None);
    // The command's tree has ended, and with its namespace the mount: the connection
    // ends once the requests in flight are answered (their records before `stop`).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !serving.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if !serving.is_finished() {
        tracing::warn!("the view's connection was still open 5 s after the command ended");
    }
    let (reads, changes, refusals) = counts.totals();
    crate::text::eprint_line(&format!(
        "fsgate: run {session} ended: {reads} reads, {changes} changes, {refusals} refused; undo its changes with: {} --session {session}",
        run.undo
    ));
    let mut details = serde_json::Map::new();
    details.insert("reason".into(), "command ended".into());
    details.insert("session".into(), session.into());
    details.insert("exitStatus".into(), code.into());
    startup::shutdown(gateway, details);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The `run` record: the session the run's records carry, the command (as the audit
/// log bounds every string) and its pid.
fn record_run(gateway: &crate::gateway::Gateway, session: &str, command: &[OsString], pid: u32) {
    let argv: Vec<serde_json::Value> = command
        .iter()
        .take(64)
        .map(|a| a.to_string_lossy().into_owned().into())
        .collect();
    let mut details = serde_json::Map::new();
    details.insert("session".into(), session.into());
    details.insert("command".into(), argv.into());
    details.insert("pid".into(), pid.into());
    gateway.record("run", details);
}

/// `fsgate run` could not give the view: say what is missing; nothing was run.
fn no_view(what: &str) -> ExitCode {
    crate::text::eprint_line(&format!(
        "fsgate: {what}; the command was not run (fsgate run never runs it without the view)"
    ));
    ExitCode::from(EXIT_NO_VIEW)
}

/// Where the FUSE device comes from: as root, this process opens it (the child mounts
/// it in a mount namespace of the same user namespace); otherwise the child opens it in
/// the user namespace it makes (the kernel mounts only a device opened there) and hands
/// it over a socket pair.
enum Fuse {
    /// The device, opened here.
    Device(OwnedFd),
    /// This process's end of the pair, and the child's (closed here once it started).
    Handoff(OwnedFd, Option<OwnedFd>),
}

impl Fuse {
    fn new() -> Result<Fuse, String> {
        use rustix::fs::{Mode, OFlags, open};
        if !rustix::process::geteuid().is_root() {
            let (ours, theirs) = fsgate_view::handoff::pair()
                .map_err(|e| format!("cannot make a socket pair for /dev/fuse: {e}"))?;
            return Ok(Fuse::Handoff(ours, Some(theirs)));
        }
        open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
            .map(Fuse::Device)
            .map_err(|e| format!("cannot open /dev/fuse ({e}): fsgate run needs FUSE"))
    }

    /// What the child gets: a duplicate without close-on-exec of the device or of its
    /// end of the pair.
    fn for_child(&self) -> Result<(OwnedFd, bool), String> {
        let (fd, handoff) = match self {
            Fuse::Device(fd) => (fd, false),
            Fuse::Handoff(_, Some(theirs)) => (theirs, true),
            Fuse::Handoff(_, None) => return Err("the socket pair was handed on".into()),
        };
        let dup = rustix::io::dup(fd).map_err(|e| format!("cannot pass /dev/fuse on: {e}"))?;
        Ok((dup, handoff))
    }

    /// The mounted device, once the child mounted it (or why it could not).
    fn connect(self, child: &mut Child) -> Result<OwnedFd, String> {
        let device = match self {
            Fuse::Device(fd) => fd,
            Fuse::Handoff(ours, theirs) => {
                // Without the child's end here, the pair ends when the child does.
                drop(theirs);
                fsgate_view::handoff::receive(&ours)
                    .map_err(|e| format!("the view could not be mounted ({e})"))?
            }
        };
        wait_mounted(&device, child)?;
        Ok(device)
    }
}

/// Starts fsgate again as the child that mounts the view and runs the command. It
/// inherits one descriptor of the FUSE device (a duplicate without close-on-exec,
/// closed here once it is started).
fn start_child(
    fuse: &Fuse,
    (root, hide): (&std::path::Path, Vec<std::path::PathBuf>),
    command: Vec<OsString>,
) -> Result<Child, String> {
    let (inherited, handoff) = fuse.for_child()?;
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let spec = fsgate_view::child::Spec {
        fuse_fd: inherited.as_raw_fd(),
        handoff,
        at: root.to_path_buf(),
        cwd,
        hide,
        command,
    };
    let me = std::env::current_exe().map_err(|e| format!("cannot find fsgate itself: {e}"))?;
    let child = std::process::Command::new(me)
        .arg(fsgate_view::child::ARG)
        .args(spec.to_args())
        .spawn()
        .map_err(|e| format!("cannot start the command's process: {e}"));
    drop(inherited);
    child
}

/// Waits until the kernel's first message is on the FUSE device (the child mounted the
/// view) or the child ended (it could not: it said why). Until the mount, the device
/// polls as an error, so this looks every few milliseconds.
fn wait_mounted(fuse: &OwnedFd, child: &mut Child) -> Result<(), String> {
    use rustix::event::{PollFd, PollFlags, poll};
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        let mut fds = [PollFd::new(fuse, PollFlags::IN)];
        match poll(&mut fds, Some(&zero)) {
            Ok(_) if fds[0].revents().contains(PollFlags::IN) => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("cannot wait for the view's mount: {e}")),
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the view could not be mounted ({status})"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Ends the child (start-up failed after it started).
fn end(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A new session id for the run's records: `run-` and 12 random hex digits.
fn session_id() -> String {
    let mut bytes = [0u8; 6];
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes.copy_from_slice(&t.to_le_bytes()[..6]);
    }
    format!("run-{}", hex::encode(bytes))
}

/// The `fsgate undo` command line for this workspace and log (without `--session`).
fn undo_line(
    root: &std::path::Path,
    log: &std::path::Path,
    config: &startup::GatewayConfig,
) -> String {
    let mut line = format!("fsgate undo --workspace {}", EscPath(root));
    if config.audit_log.is_some() {
        line.push_str(&format!(" --audit-log {}", EscPath(log)));
    }
    if let Some(dir) = &config.backup_dir {
        line.push_str(&format!(" --backup-dir {}", EscPath(dir)));
    }
    if let Some(policy) = &config.policy {
        line.push_str(&format!(" --policy {}", EscPath(policy)));
    }
    line
}

/// Says on stderr what the command sees and what is governed.
fn announce(root: &std::path::Path, session: &str) {
    crate::text::eprint_line(&format!(
        "fsgate: run {session}: the command sees {} through fsgate's view: every lookup, read and change there is decided by the policy and recorded; fsgate's audit log, backups and policy are hidden from it; the rest of the system it sees as it is",
        EscPath(root)
    ));
}

/// `fsgate __view-child ...`: the child [`start_child`] started: the command's exit
/// status, or 125 if it could not be run.
pub(super) fn child() -> ExitCode {
    let Some(spec) = fsgate_view::child::Spec::from_args(std::env::args_os().skip(2)) else {
        return fail("this word is fsgate run's own; see fsgate run --help");
    };
    // Before anything else: the command and every process it starts cannot push input
    // into the terminal (TIOCSTI), where the shell that started fsgate would run it.
    if let Err(e) = crate::sandbox::no_tiocsti::refuse_terminal_injection() {
        return no_view(&e.to_string());
    }
    match fsgate_view::child::run(&spec) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => no_view(&e),
    }
}

/// `fsgate __view-exec COMMAND...`: the command's start in the view; returns only if it
/// could not be run (127, as a shell says).
pub(super) fn exec() -> ExitCode {
    let why = fsgate_view::child::exec(std::env::args_os().skip(2));
    crate::text::eprint_line(&format!("fsgate: {why}"));
    ExitCode::from(127)
}
