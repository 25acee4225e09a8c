//! The child that shows the view: a process of its own (fsgate started again, before the
//! gateway confines itself) that enters a private mount namespace, mounts the gateway's
//! FUSE connection over the workspace's own path there, gives up every capability over
//! that namespace, and runs the command; when the command ends, so does every process
//! it left behind (this process is their subreaper). The gateway's namespace never sees
//! the mount (no recursion, nothing left behind when the command's namespace ends).
//!
//! As root: a new mount namespace; otherwise a new user namespace with it (where the
//! kernel lets one mount FUSE). Then, in both cases, a user namespace of the command's
//! own, nested in the one that owns the mount namespace: it holds no capability there,
//! so it can neither unmount the view nor mount anything over it, and the mounts it
//! sees are locked together (an unmount in a namespace it makes does not uncover the
//! directory beneath). `PR_SET_NO_NEW_PRIVS` keeps an exec from gaining any.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Uid};

/// The word that starts the child: `fsgate __view-child FD AT CWD CONFINE HIDE... --
/// COMMAND...`.
pub const ARG: &str = "__view-child";

/// The word that starts the command itself: `fsgate __view-exec CONFINE [AT] COMMAND...`
/// applies the confinement, if any (fsgate's, not this crate's), clears the
/// signal mask (the child holds SIGINT, SIGTERM and SIGHUP for its signalfd, and a
/// spawned program inherits that) and becomes COMMAND.
pub const EXEC_ARG: &str = "__view-exec";

/// `fsgate __view-exec COMMAND...`: becomes COMMAND with no signal blocked; returns
/// only if it could not, saying why, with the status a shell gives then: 127 when the
/// program is not found, 126 when it is there but cannot be run.
pub fn exec(mut command: impl Iterator<Item = OsString>) -> (String, u8) {
    use std::os::unix::process::CommandExt;
    let Some(program) = command.next() else {
        return ("no command".into(), 127);
    };
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    let err = std::process::Command::new(&program).args(command).exec();
    let status = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    let why = format!(
        "cannot run {}: {err}",
        fsgate_base::text::EscPath(std::path::Path::new(&program))
    );
    (why, status)
}

/// What the child is told.
#[derive(Debug)]
pub struct Spec {
    /// The FUSE connections (inherited), one per view, mounted by the child; with
    /// `handoff`, the child's end of a socket pair instead (one), over which it sends
    /// each device it opens, in the order of `at`.
    pub fuse_fds: Vec<RawFd>,
    /// The child opens `/dev/fuse` itself (in its user namespace) and hands it over.
    pub handoff: bool,
    /// Each workspace's own path, where its view is mounted (several workspaces: one
    /// view each, all mounted before the command starts).
    pub at: Vec<PathBuf>,
    /// The directory the command starts in (looked up again once the view is there).
    pub cwd: PathBuf,
    /// fsgate's own files and directories outside the workspace (audit log, backups,
    /// policy): covered in the command's namespace by an empty, read-only one.
    pub hide: Vec<PathBuf>,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// The confinement the command's start applies to itself once the view is there
    /// (an `fsgate acp --confine-agent` agent's, opaque here), if any.
    pub confine: Option<OsString>,
}

impl Spec {
    /// The child's arguments after [`ARG`]: `KIND:FD[,FD...]`, the number of views and
    /// each one's path, the directory, the confinement, the paths to hide, `--`, the
    /// command.
    pub fn to_args(&self) -> Vec<OsString> {
        let kind = if self.handoff { "handoff" } else { "device" };
        let fds: Vec<String> = self.fuse_fds.iter().map(ToString::to_string).collect();
        let mut args: Vec<OsString> = vec![format!("{kind}:{}", fds.join(",")).into()];
        args.push(self.at.len().to_string().into());
        args.extend(self.at.iter().map(|p| p.clone().into_os_string()));
        args.push(self.cwd.clone().into());
        args.push(self.confine.clone().unwrap_or_else(|| NO_CONFINE.into()));
        args.extend(self.hide.iter().map(|p| p.clone().into_os_string()));
        args.push("--".into());
        args.extend(self.command.iter().cloned());
        args
    }

    /// Reads what [`to_args`](Self::to_args) wrote.
    pub fn from_args(mut args: impl Iterator<Item = OsString>) -> Option<Spec> {
        let first = args.next()?;
        let (kind, fds) = first.to_str()?.split_once(':')?;
        let handoff = match kind {
            "handoff" => true,
            "device" => false,
            _ => return None,
        };
        let fuse_fds = fds
            .split(',')
            .map(|fd| fd.parse().ok())
            .collect::<Option<Vec<RawFd>>>()?;
        let at = read_paths(&mut args)?;
        let cwd = PathBuf::from(args.next()?);
        let confine = Some(args.next()?).filter(|c| c != NO_CONFINE);
        let mut hide = Vec::new();
        loop {
            let next = args.next()?;
            if next == "--" {
                break;
            }
            hide.push(PathBuf::from(next));
        }
        let command: Vec<OsString> = args.collect();
        let fds_fit = if handoff {
            fuse_fds.len() == 1
        } else {
            fuse_fds.len() == at.len()
        };
        (!command.is_empty() && !at.is_empty() && fds_fit).then_some(Spec {
            fuse_fds,
            handoff,
            at,
            cwd,
            hide,
            command,
            confine,
        })
    }

    /// `__view-exec`'s arguments: the confinement and the views' roots (or
    /// [`NO_CONFINE`]), then the command.
    fn exec_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = match &self.confine {
            Some(word) => vec![word.clone(), self.at.len().to_string().into()],
            None => vec![NO_CONFINE.into()],
        };
        if self.confine.is_some() {
            args.extend(self.at.iter().map(|p| p.clone().into_os_string()));
        }
        args.extend(self.command.iter().cloned());
        args
    }
}

/// A count, then that many paths (at most 4096).
fn read_paths(args: &mut impl Iterator<Item = OsString>) -> Option<Vec<PathBuf>> {
    let n: usize = args.next()?.to_str()?.parse().ok()?;
    (n <= 4096).then_some(())?;
    (0..n).map(|_| args.next().map(PathBuf::from)).collect()
}

/// No confinement, in the child's and the command's arguments.
const NO_CONFINE: &str = "-";

/// A confinement for the command's start, with the views' roots.
pub type Confine = (OsString, Vec<PathBuf>);

/// What `__view-exec` was given: the confinement to apply with the views' roots, if
/// any, and the command; None if the arguments are not the child's.
pub fn split_exec_args(
    mut args: impl Iterator<Item = OsString>,
) -> Option<(Option<Confine>, Vec<OsString>)> {
    let first = args.next()?;
    let confine = match first == NO_CONFINE {
        true => None,
        false => Some((first, read_paths(&mut args)?)),
    };
    Some((confine, args.collect()))
}

/// Enters the namespaces, mounts the view, runs the command there (passing SIGINT,
/// SIGTERM and SIGHUP on) and, once it ended, ends every process it left behind (this
/// process is their subreaper: orphans of the tree come back to it). Ok: the command's
/// exit status; Err: what failed, and the command was not run.
pub fn run(spec: &Spec) -> Result<i32, String> {
    enter(spec)?;
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| {
        format!("cannot keep the command's processes (PR_SET_CHILD_SUBREAPER): {e}")
    })?;
    // The command starts with no signal blocked: fsgate once more, which clears the
    // mask it inherits and becomes the command (same pid).
    let me = std::env::current_exe().map_err(|e| format!("cannot find fsgate itself: {e}"))?;
    let mut command = std::process::Command::new(me)
        .arg(EXEC_ARG)
        .args(spec.exec_args())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run {}: {e}",
                fsgate_base::text::EscPath(std::path::Path::new(&spec.command[0]))
            )
        })?;
    let code = wait_passing_signals(&mut command, Some(ORPHANED));
    end_tree();
    Ok(code)
}

/// Ends every process left of the command's tree: each is this process's child by now
/// (a subreaper's), killed and reaped, and its own children come back in turn.
pub fn end_tree() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    for _ in 0..1000 {
        let left = children();
        if left.is_empty() {
            return;
        }
        for pid in left {
            let pid = Pid::from_raw(pid);
            let _ = kill(pid, Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
    }
}

/// The pids whose parent is this process, read from `/proc`.
fn children() -> Vec<i32> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .and_then(|at| stat[at + 1..].split_whitespace().nth(1))
                    == Some(me.as_str())
            })
        })
        .collect()
}

/// The signal this process gets when the gateway ends (`PR_SET_PDEATHSIG`): it then
/// ends the command and its whole tree.
const ORPHANED: nix::sys::signal::Signal = nix::sys::signal::Signal::SIGUSR2;

fn enter(spec: &Spec) -> Result<(), String> {
    let gateway = nix::unistd::getppid();
    // Held from the start, read from a signalfd while the command runs.
    let mut held = nix::sys::signal::SigSet::empty();
    for sig in [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGHUP,
        ORPHANED,
    ] {
        held.add(sig);
    }
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&held),
        None,
    );
    // The command does not outlive the gateway that serves its view.
    nix::sys::prctl::set_pdeathsig(ORPHANED)
        .map_err(|e| format!("cannot tie the command to fsgate (PR_SET_PDEATHSIG): {e}"))?;
    if nix::unistd::getppid() != gateway {
        return Err("fsgate ended before the command started".into());
    }
    let (uid, gid) = (Uid::current(), Gid::current());
    if uid.is_root() {
        unshare(CloneFlags::CLONE_NEWNS)
            .map_err(|e| format!("cannot make a private mount namespace (unshare): {e}"))?;
    } else {
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS).map_err(|e| {
            format!(
                "cannot make a user and mount namespace (unshare: {e}): {}",
                no_user_namespace(e)
            )
        })?;
        map_ids(Uid::from_raw(0), Gid::from_raw(0), (uid, gid))?;
    }
    // Before any mount: none of this namespace's mounts reaches the host's.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot keep the view's mounts from the host (MS_SLAVE): {e}"))?;
    hide_own_files(spec)?;
    if spec.confine.is_some() {
        crate::terminals::own_instance()?;
    }
    mount_views(spec)?;
    // The command starts once every view answers. Before, a command that needs no view
    // (its directory elsewhere, `true`) could end before the gateway met the mount,
    // which then took the ended child for a view that could not be mounted.
    for root in &spec.at {
        rustix::fs::statfs(root.as_path()).map_err(|e| {
            format!(
                "the view at {} did not answer ({e})",
                fsgate_base::text::EscPath(root)
            )
        })?;
    }
    // The command's own user namespace: no capability over the view's namespace.
    let (inner_uid, inner_gid) = (Uid::current(), Gid::current());
    unshare(CloneFlags::CLONE_NEWUSER).map_err(|e| {
        format!("cannot drop the capabilities over the view (a nested user namespace): {e}")
    })?;
    map_ids(uid, gid, (inner_uid, inner_gid))?;
    // This process shares the command's user namespace: not dumpable, the command can
    // neither ptrace it nor open its /proc entries (its namespaces, its descriptors).
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|e| format!("cannot make fsgate's own process not dumpable: {e}"))?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("cannot set no_new_privs: {e}"))?;
    std::env::set_current_dir(&spec.cwd).map_err(|e| {
        format!(
            "cannot enter {} in the view: {e}",
            fsgate_base::text::EscPath(&spec.cwd)
        )
    })
}

/// What is missing when a user who is not root cannot make a user namespace.
fn no_user_namespace(e: nix::errno::Errno) -> &'static str {
    use nix::errno::Errno;
    match e {
        Errno::ENOSPC => {
            "no user namespace is left to this user (the sysctl user.max_user_namespaces is 0 or its limit is reached); fsgate run needs one when not run as root"
        }
        Errno::EPERM | Errno::EACCES => {
            "unprivileged user namespaces are not allowed here (kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns or a seccomp filter); fsgate run needs one when not run as root"
        }
        Errno::EINVAL | Errno::ENOSYS => {
            "this kernel has no user namespaces (CONFIG_USER_NS); fsgate run needs one when not run as root"
        }
        _ => "fsgate run needs a user namespace when not run as root",
    }
}

/// `/dev/fuse`, opened in this user namespace.
fn open_device() -> Result<std::os::fd::OwnedFd, String> {
    use rustix::fs::{Mode, OFlags, open};
    open("/dev/fuse", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("cannot open /dev/fuse ({e}): fsgate run needs FUSE"))
}

/// Mounts every view, each over its workspace, in this namespace only; the mounts hold
/// the connections, and the command gets no descriptor of them.
fn mount_views(spec: &Spec) -> Result<(), String> {
    if spec.handoff {
        let socket = spec
            .fuse_fds
            .first()
            .copied()
            .ok_or("no socket for /dev/fuse")?;
        for at in &spec.at {
            let device = open_device()?;
            mount_view(at, device.as_raw_fd())?;
            crate::handoff::send(socket, device.as_raw_fd())
                .map_err(|e| format!("cannot hand /dev/fuse to fsgate: {e}"))?;
        }
    } else {
        for (at, fd) in spec.at.iter().zip(&spec.fuse_fds) {
            mount_view(at, *fd)?;
        }
    }
    for fd in &spec.fuse_fds {
        let _ = nix::unistd::close(*fd);
    }
    Ok(())
}

/// Mounts the FUSE connection `device` over the workspace at `at`.
fn mount_view(at: &std::path::Path, device: RawFd) -> Result<(), String> {
    let data = format!(
        "fd={},rootmode=40000,user_id={},group_id={},allow_other",
        device,
        Uid::current(),
        Gid::current()
    );
    mount(
        Some("fsgate"),
        at,
        Some("fuse.fsgate"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(data.as_str()),
    )
    .map_err(|e| {
        format!(
            "cannot mount the view at {}: {e}",
            fsgate_base::text::EscPath(at)
        )
    })?;
    Ok(())
}

/// Covers each of fsgate's own paths outside the workspace: a directory with an empty,
/// read-only tmpfs, a file with `/dev/null` read-only. (Those inside the workspace are
/// the view's to hide: the policy's fixed floor makes them unreachable there. A
/// directory holding the workspace is not covered: its files of fsgate's are, one by
/// one.)
fn hide_own_files(spec: &Spec) -> Result<(), String> {
    let outside = |p: &&PathBuf| {
        spec.at
            .iter()
            .all(|at| !p.starts_with(at) && !at.starts_with(p))
    };
    for path in spec.hide.iter().filter(outside) {
        let shown = fsgate_base::text::EscPath(path);
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let covered = if meta.is_dir() {
            let flags =
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount(
                Some("fsgate-hidden"),
                path,
                Some("tmpfs"),
                flags,
                Some("size=4k,mode=0"),
            )
        } else {
            mount(
                Some("/dev/null"),
                path,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .and_then(|()| {
                let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
                mount(None::<&str>, path, None::<&str>, ro, None::<&str>)
            })
        };
        covered.map_err(|e| format!("cannot hide {shown} from the command: {e}"))?;
    }
    Ok(())
}

/// Maps `inside` (uid, gid) of the new user namespace to `outside` of its parent.
fn map_ids(inside_uid: Uid, inside_gid: Gid, outside: (Uid, Gid)) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("cannot write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{inside_uid} {} 1\n", outside.0))?;
    write("gid_map", format!("{inside_gid} {} 1\n", outside.1))
}

/// Waits for the command, passing SIGINT, SIGTERM and SIGHUP on (and killing it on
/// `orphaned`, if given); its exit status (128 + N if signal N ended it).
pub fn wait_passing_signals(
    child: &mut std::process::Child,
    orphaned: Option<nix::sys::signal::Signal>,
) -> i32 {
    use nix::sys::signal::{SigSet, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    use rustix::event::{PollFd, PollFlags, poll};
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    if let Some(s) = orphaned {
        set.add(s);
    }
    let signals = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok();
    let pid = rustix::process::Pid::from_child(child);
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return exit_code(status);
        }
        let mut fds = Vec::with_capacity(2);
        if let Some(p) = &pidfd {
            fds.push(PollFd::new(p, PollFlags::IN));
        }
        if let Some(s) = &signals {
            fds.push(PollFd::from_borrowed_fd(s.as_fd(), PollFlags::IN));
        }
        let tick = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let _ = poll(&mut fds, Some(&tick));
        while let Some(Ok(Some(info))) = signals.as_ref().map(SignalFd::read_signal) {
            // One the kernel sent (a terminal's ^C to the whole process group) reached
            // the command too: only what a process sent is passed on.
            if info.ssi_code == libc::SI_KERNEL {
                continue;
            }
            let raw = i32::try_from(info.ssi_signo).ok();
            let sig = match orphaned {
                Some(o) if raw == Some(o as i32) => Some(rustix::process::Signal::KILL),
                _ => raw.and_then(rustix::process::Signal::from_named_raw),
            };
            if let Some(sig) = sig {
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_of_several_views_reads_back_as_written() {
        let spec = Spec {
            fuse_fds: vec![5, 6],
            handoff: false,
            at: vec!["/w/app".into(), "/w/lib dir".into()],
            cwd: "/w/app".into(),
            hide: vec!["/s/audit".into()],
            command: vec!["sh".into(), "-c".into(), "--".into()],
            confine: Some("word".into()),
        };
        let back = Spec::from_args(spec.to_args().into_iter()).expect("parsed");
        assert_eq!(format!("{back:?}"), format!("{spec:?}"));
        let (confine, command) = split_exec_args(spec.exec_args().into_iter()).expect("exec");
        assert_eq!(confine, Some(("word".into(), spec.at.clone())));
        assert_eq!(command, spec.command);
        // A device per view, or one socket for all.
        let short = Spec {
            fuse_fds: vec![5],
            ..spec
        };
        assert!(Spec::from_args(short.to_args().into_iter()).is_none());
    }
}
