//! What `fsgate run` and `fsgate acp --confine-agent` share to show a command the
//! workspace through the view (crates/fsgate-view): the FUSE device, the child that
//! mounts the view and runs the command, the wait for its mount, and the view served
//! until the command's tree has ended. See docs/run.md.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;

use crate::startup;
use fsgate_gateway::agent_sessions::AgentSessions;

/// fsgate's own paths the command must not see: its state directories, the audit log
/// and the policy file.
pub(super) fn hidden(opened: &startup::Opened, policy: Option<&Path>) -> Vec<PathBuf> {
    let mut hide = opened.own_dirs();
    hide.push(opened.audit_log_path().to_path_buf());
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    hide.extend(policy.map(absolute));
    // The files the policy `extends`: a command that rewrote one would loosen the next
    // run's policy.
    let composed = opened.gateway.policy();
    let bases = composed
        .bases()
        .iter()
        .map(Path::new)
        .filter(|b| b.is_file());
    hide.extend(bases.map(absolute));
    hide
}

/// The root of every workspace the gateway serves, where each one's view is mounted
/// (in [`members`](fsgate_gateway::Gateway::members)' order, as [`serve`] serves them).
pub(super) fn roots(gateway: &fsgate_gateway::Gateway) -> Vec<PathBuf> {
    gateway
        .members()
        .root_paths()
        .map(Path::to_path_buf)
        .collect()
}

/// Where the FUSE devices come from (one per view): as root, this process opens them
/// (the child mounts them in a mount namespace of the same user namespace); otherwise
/// the child opens each in the user namespace it makes (the kernel mounts only a device
/// opened there) and hands them over a socket pair, in the order of the views.
pub(super) enum Fuse {
    /// The devices, opened here.
    Device(Vec<OwnedFd>),
    /// This process's end of the pair, the child's (closed here once it started), and
    /// how many devices come over it.
    Handoff(OwnedFd, Option<OwnedFd>, usize),
}

impl Fuse {
    /// The devices of `views` views.
    pub(super) fn new(views: usize) -> Result<Fuse, String> {
        use rustix::fs::{Mode, OFlags, open};
        if !rustix::process::geteuid().is_root() {
            let (ours, theirs) = fsgate_view::handoff::pair()
                .map_err(|e| format!("cannot make a socket pair for /dev/fuse: {e}"))?;
            return Ok(Fuse::Handoff(ours, Some(theirs), views));
        }
        (0..views)
            .map(|_| open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()))
            .collect::<Result<Vec<_>, _>>()
            .map(Fuse::Device)
            .map_err(|e| format!("cannot open /dev/fuse ({e}): the view needs FUSE"))
    }

    /// What the child gets: duplicates without close-on-exec of the devices or of its
    /// end of the pair.
    fn for_child(&self) -> Result<(Vec<OwnedFd>, bool), String> {
        let (fds, handoff): (Vec<&OwnedFd>, bool) = match self {
            Fuse::Device(fds) => (fds.iter().collect(), false),
            Fuse::Handoff(_, Some(theirs), _) => (vec![theirs], true),
            Fuse::Handoff(_, None, _) => return Err("the socket pair was handed on".into()),
        };
        let dups = fds
            .into_iter()
            .map(rustix::io::dup)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot pass /dev/fuse on: {e}"))?;
        Ok((dups, handoff))
    }

    /// The mounted devices, in the order of the views, once the child mounted them all
    /// (or why it could not).
    pub(super) fn connect(self, child: &mut Child) -> Result<Vec<OwnedFd>, String> {
        let devices = match self {
            Fuse::Device(fds) => fds,
            Fuse::Handoff(ours, theirs, views) => {
                // Without the child's end here, the pair ends when the child does.
                drop(theirs);
                (0..views)
                    .map(|_| fsgate_view::handoff::receive(&ours))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("the view could not be mounted ({e})"))?
            }
        };
        for device in &devices {
            wait_mounted(device, child)?;
        }
        Ok(devices)
    }
}

/// The command of the child that mounts the views and runs `command`, with the
/// descriptors it inherits (kept open until it is started, then dropped).
pub(super) struct ChildCommand {
    pub(super) command: Command,
    inherited: Vec<OwnedFd>,
}

impl ChildCommand {
    /// fsgate again, as the child: a view at each of `roots`, `hide` covered,
    /// `confine` the confinement the command's start applies to itself.
    pub(super) fn new(
        fuse: &Fuse,
        (roots, hide): (Vec<PathBuf>, Vec<PathBuf>),
        command: Vec<OsString>,
        confine: Option<OsString>,
    ) -> Result<ChildCommand, String> {
        let (inherited, handoff) = fuse.for_child()?;
        let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
        let spec = fsgate_view::child::Spec {
            fuse_fds: inherited.iter().map(AsRawFd::as_raw_fd).collect(),
            handoff,
            at: roots,
            cwd,
            hide,
            command,
            confine,
        };
        let me = std::env::current_exe().map_err(|e| format!("cannot find fsgate itself: {e}"))?;
        let mut command = Command::new(me);
        command.arg(fsgate_view::child::ARG).args(spec.to_args());
        Ok(ChildCommand { command, inherited })
    }

    /// Starts the child; the inherited descriptors are closed here.
    pub(super) fn spawn(mut self) -> std::io::Result<Child> {
        let child = self.command.spawn();
        drop(self.inherited);
        child
    }
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
pub(super) fn end(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A new session id for the view's records: `prefix`, `-` and 12 random hex digits.
pub(super) fn session_id(prefix: &str) -> String {
    let mut bytes = [0u8; 6];
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes.copy_from_slice(&t.to_le_bytes()[..6]);
    }
    format!("{prefix}-{}", hex::encode(bytes))
}

/// The views being served.
pub(super) struct Served {
    /// What every view did, together.
    pub(super) counts: Arc<fsgate_view::Counts>,
    threads: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// Serves a view of each of `gateway`'s workspaces, one on each of `fuses` (in
/// [`members`](fsgate_gateway::Gateway::members)' order): with several, each view's
/// requests name its workspace and the gateway routes them there. Each request is
/// recorded under `session` (or, for a confined ACP agent, the session of `agents` that
/// can be told), `ask` rules' questions go to `asks` (None: they refuse).
pub(super) fn serve(
    gateway: &Arc<fsgate_gateway::Gateway>,
    fuses: Vec<OwnedFd>,
    (session, agents): (&str, Option<&Arc<AgentSessions>>),
    asks: Option<Arc<dyn fsgate_view::asks::Askers>>,
) -> Result<Served, String> {
    let counts = Arc::new(fsgate_view::Counts::default());
    let mut threads = Vec::with_capacity(fuses.len());
    for (member, fuse) in gateway.members().zip(fuses) {
        let root = member.workspace().root_path().to_path_buf();
        let mut view = fsgate_view::View::new(Arc::clone(gateway), session.to_owned(), root)
            .counting(Arc::clone(&counts));
        if let Some(name) = member.name() {
            view = view.of_workspace(name);
        }
        if !rustix::process::geteuid().is_root() {
            view = view.in_user_namespace();
        }
        if let Some(asks) = &asks {
            view = view.asking(Arc::clone(asks));
        }
        // Another door's change (an agent's file tool under `acp`) is taken back
        // from the kernel's caches of this view.
        member.watch_changes(view.outside_changes());
        if let Some(agents) = agents {
            view = view.for_agent_sessions(Arc::clone(agents));
        }
        let thread =
            fsgate_view::serve(view, fuse).map_err(|e| format!("cannot serve the view: {e}"))?;
        threads.push(thread);
    }
    Ok(Served { counts, threads })
}

impl Served {
    /// Once the command's tree has ended, and with its namespace the mounts: each
    /// connection ends when the requests in flight are answered (their records before
    /// the stop record). Waits up to 5 s in all.
    pub(super) fn finish(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let done = || {
            self.threads
                .iter()
                .all(std::thread::JoinHandle::is_finished)
        };
        while !done() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if !done() {
            tracing::warn!("a view's connection was still open 5 s after the command ended");
        }
    }
}

/// `fsgate __view-exec ...`: the command's start in the view; applies the
/// confinement it was given, then becomes the command; returns only if it could not
/// (127 or 126, as a shell says; 125 if the confinement could not be applied).
pub(super) fn exec() -> std::process::ExitCode {
    let Some((confine, command)) = fsgate_view::child::split_exec_args(std::env::args_os().skip(2))
    else {
        let _ = super::exit::fail("this word is fsgate run's own; see fsgate run --help");
        return std::process::ExitCode::from(super::exit::EXIT_OWN);
    };
    if let Some((word, at)) = confine {
        let applied = word
            .to_str()
            .ok_or_else(|| "the confinement is not text".to_owned())
            .and_then(|w| fsgate_sandbox::confine_agent_in_view(w, &at).map_err(|e| e.to_string()));
        if let Err(e) = applied {
            fsgate_base::text::eprint_line(&format!(
                "fsgate: cannot confine the agent in the view ({e}); it was not run"
            ));
            return std::process::ExitCode::from(super::exit::EXIT_OWN);
        }
    }
    let (why, status) = fsgate_view::child::exec(command.into_iter());
    fsgate_base::text::eprint_line(&format!("fsgate: {why}"));
    std::process::ExitCode::from(status)
}

/// The `fsgate undo` command line for these workspaces and log (without `--session`):
/// every workspace by its name when several are served; every path absolute and quoted
/// for the shell, so the line works pasted in any directory. Escaped once, where printed.
pub(super) fn undo_line(
    gateway: &fsgate_gateway::Gateway,
    log: &std::path::Path,
    config: &startup::config::GatewayConfig,
) -> String {
    let mut line = String::from("fsgate undo");
    for member in gateway.members() {
        let root = member.workspace().root_path().to_string_lossy();
        let word = match member.name() {
            Some(name) => format!("{name}={root}"),
            None => root.into_owned(),
        };
        line.push_str(&format!(" --workspace {}", shell_word(&word)));
    }
    let paths = [
        ("--audit-log", config.audit_log.as_ref().map(|_| log)),
        ("--backup-dir", config.backup_dir.as_deref()),
        ("--policy", config.policy.as_deref()),
    ];
    for (flag, path) in paths {
        if let Some(path) = path {
            line.push_str(&format!(" {flag} {}", shell_word(&full_path(path))));
        }
    }
    line
}

/// `path` made absolute: canonical where it exists (no `..` left in it).
fn full_path(path: &std::path::Path) -> String {
    let full = std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf());
    full.to_string_lossy().into_owned()
}

/// `text` as one shell word (quoted where it must be).
pub(super) fn shell_word(text: &str) -> String {
    // A character a person's terminal must not get as it is (a control, a bidi mark, a
    // backslash): `$'...'` with its UTF-8 bytes written `\xNN`, which bash and zsh read
    // back, so the word stays printable and pastes as it was.
    if fsgate_base::text::escape_for_humans(text) != text {
        return ansi_c_quoted(text);
    }
    shlex::try_quote(text).map_or_else(|_| text.to_owned(), |q| q.into_owned())
}

/// `text` as a `$'...'` word: every character [`escape_for_humans`]
/// (fsgate_base::text) would escape, and `'`, written with escapes of its bytes.
fn ansi_c_quoted(text: &str) -> String {
    let mut out = String::from("$'");
    let mut buf = [0u8; 4];
    for c in text.chars() {
        let one = c.encode_utf8(&mut buf);
        if c == '\'' || fsgate_base::text::escape_for_humans(one) != *one {
            one.bytes()
                .for_each(|b| out.push_str(&format!("\\x{b:02x}")));
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Says how many of the `refusals` (the total already said) were past a size limit, which (each
/// with its value, for the `[limits]` one) and what lets them; nothing if none was.
pub(super) fn say_too_large(
    gateway: &fsgate_gateway::Gateway,
    counts: &fsgate_view::Counts,
    refusals: u64,
) {
    let by_limit = counts.too_large();
    if by_limit.is_empty() {
        return;
    }
    let limits = *gateway.policy().limits();
    let size = |b: u64| match b % (1 << 20) {
        0 => format!(" {} MiB", b >> 20),
        _ => format!(" {b} bytes"),
    };
    let met: Vec<String> = by_limit
        .iter()
        .map(|(rule, n)| {
            let value = match rule.as_str() {
                "limits.max_process_file_bytes" => size(limits.max_process_file_bytes),
                _ => String::new(),
            };
            format!("{rule}{value}: {n}")
        })
        .collect();
    let n: u64 = by_limit.values().sum();
    fsgate_base::text::eprint_line(&format!(
        "fsgate: {n} of the {refusals} refusals were past a size limit of the policy ({}), as a build's large outputs can be; a policy of your own with larger values lets them (docs/run.md, \"Size limits\")",
        met.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each word holds nothing a terminal must not get but backslashes, and bash reads
    /// it back as it was.
    #[test]
    fn a_shell_word_is_printable_and_reads_back_as_it_was() {
        let words = [
            "/tmp/plain",
            "/tmp/with space",
            "/tmp/it's",
            "/tmp/w\u{1b}[1mx",
            "/tmp/back\\slash",
            "/tmp/bidi\u{202e}txt.exe",
            "/tmp/new\nline'and quote",
        ];
        for w in words {
            let word = shell_word(w);
            let printable = |c: char| {
                let one = c.to_string();
                c == '\\' || fsgate_base::text::escape_for_humans(&one) == one
            };
            assert!(word.chars().all(printable), "{word}");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("printf %s {word}")])
                .output()
                .expect("bash");
            assert_eq!(String::from_utf8_lossy(&out.stdout), w, "{word}");
        }
    }
}
