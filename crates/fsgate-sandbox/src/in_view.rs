//! Linux: a confined agent that sees the workspace through the view (`fsgate acp
//! --confine-agent`). Its Landlock ruleset is built here, in the gateway, before the
//! view exists, for everything outside the workspace; the workspace's rule can only be
//! added once the view is mounted (a rule names an inode, and the view's root is
//! another inode than the directory beneath it), and Landlock forbids a confined
//! process to mount. So the view's child inherits the ruleset's descriptor, mounts the
//! view, and the agent's start ([`confine_self`], the last step before its exec) adds
//! the view's root, restricts itself, then installs seccomp and drops capabilities.
//! Between the gateway and that step, only the agent's own session and the check that
//! it holds no terminal are applied (by [`ViewConfinement::install`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use ::landlock::{AccessFs, BitFlags};

use super::child::ChildSetup;
use super::landlock::abi::{Rights, probe, usable_abi};
use super::landlock::agent::prepare_agent;
use super::plan::AgentPlan;
use super::status::SandboxStatus;
use crate::error::SandboxError;

/// An agent's confinement, prepared for the view (see the module docs).
pub struct ViewConfinement {
    status: SandboxStatus,
    /// The ruleset, duplicated without close-on-exec for the view's child.
    ruleset: Option<OwnedFd>,
    block_unix: bool,
    restrict_tcp: bool,
    setup: Option<ChildSetup>,
}

/// Builds `plan`'s confinement for an agent inside the view.
pub(crate) fn prepare(plan: &AgentPlan) -> Result<ViewConfinement, SandboxError> {
    let prepared = prepare_agent(plan)?;
    let ruleset = match prepared.ruleset {
        Some(r) => {
            let fd: Option<OwnedFd> = r.into();
            let fd = fd.ok_or_else(|| io_err("the agent's ruleset has no descriptor", None))?;
            Some(
                rustix::io::dup(&fd)
                    .map_err(|e| io_err("duplicate the ruleset", Some(e.into())))?,
            )
        }
        None => None,
    };
    Ok(ViewConfinement {
        status: prepared.status,
        ruleset,
        block_unix: prepared.block_unix,
        restrict_tcp: prepared.restrict_tcp,
        setup: Some(prepared.setup),
    })
}

impl ViewConfinement {
    /// What the agent will get.
    pub fn status(&self) -> &SandboxStatus {
        &self.status
    }

    /// Closes this process's duplicate of the ruleset (once the view's child has it).
    pub fn close_inherited(&mut self) {
        self.ruleset = None;
    }

    /// The word the agent's start reads (`confine_self`): the ruleset's descriptor
    /// (inherited) and the seccomp choices.
    pub fn word(&self) -> String {
        let fd = self
            .ruleset
            .as_ref()
            .map_or_else(|| "-".to_owned(), |f| f.as_raw_fd().to_string());
        format!(
            "landlock={fd},unix={},tcp={}",
            u8::from(self.block_unix),
            u8::from(self.restrict_tcp)
        )
    }

    /// Sets the environment of `plan` on `cmd` (the view's child), and between fork
    /// and exec its own session, tied to the gateway, with no terminal.
    #[allow(unsafe_code)]
    pub fn install(&mut self, cmd: &mut Command, plan: &AgentPlan) {
        use std::os::unix::process::CommandExt;
        cmd.env_clear().envs(plan.env.iter().map(|(k, v)| (k, v)));
        if let Some(setup) = self.setup.take() {
            // SAFETY: as in `install_pre_exec`: plain system calls on values prepared
            // before the fork (setsid, prctl, getppid, ioctl(TCGETS), write(2)).
            unsafe {
                cmd.pre_exec(move || setup.own_session());
            }
        }
    }
}

impl ViewConfinement {
    /// Sets only the environment of `plan` on `cmd` (the view's child): for a command
    /// that keeps the session and terminal it was given (`fsgate run`'s wall; the
    /// view's child ties it to the gateway, and its seccomp filter refuses TIOCSTI).
    pub fn install_env(&mut self, cmd: &mut Command, plan: &AgentPlan) {
        self.setup = None;
        cmd.env_clear().envs(plan.env.iter().map(|(k, v)| (k, v)));
    }
}

/// Parsed [`ViewConfinement::word`].
struct Word {
    ruleset: Option<RawFd>,
    block_unix: bool,
    restrict_tcp: bool,
}

fn parse(word: &str) -> Option<Word> {
    let mut parts = word.split(',');
    let fd = parts.next()?.strip_prefix("landlock=")?;
    let flag = |part: Option<&str>, key: &str| match part?.strip_prefix(key)? {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    };
    let block_unix = flag(parts.next(), "unix=")?;
    let restrict_tcp = flag(parts.next(), "tcp=")?;
    let ruleset = match fd {
        "-" => None,
        n => Some(n.parse().ok()?),
    };
    Some(Word {
        ruleset,
        block_unix,
        restrict_tcp,
    })
}

/// The agent's start inside the view: its descriptors closed on exec, its ruleset with
/// the view at `workspace` (read, write, execute; the gateway decides each request)
/// restricting this process, then no_new_privs, seccomp and no capabilities. Any
/// failure is returned and the agent must not be run.
pub(crate) fn confine_self(word: &str, workspaces: &[PathBuf]) -> Result<(), SandboxError> {
    let w = parse(word).ok_or_else(|| io_err("read the agent's confinement", None))?;
    let (setup, _) = ChildSetup::prepare(w.block_unix, w.restrict_tcp)?;
    let setup = setup.without_gateway();
    // Ends with the view's child, which ends the whole tree.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| io_err("set the parent death signal", Some(e.into())))?;
    setup
        .close_inherited()
        .map_err(|e| io_err("close inherited descriptors", Some(e)))?;
    rustix::thread::set_no_new_privs(true)
        .map_err(|e| io_err("set no_new_privs", Some(e.into())))?;
    if let Some(fd) = w.ruleset {
        // SAFETY of ownership: the descriptor was inherited for this use alone.
        #[allow(unsafe_code)]
        let ruleset = unsafe { OwnedFd::from_raw_fd(fd) };
        restrict_with_view(&ruleset, workspaces)?;
    }
    setup
        .after_landlock()
        .map_err(|e| io_err("apply seccomp and drop capabilities", Some(e)))
}

/// What the agent may do in the view: everything but devices (the gateway decides).
fn view_access(rights: &Rights) -> BitFlags<AccessFs> {
    rights.handled_fs & !(AccessFs::IoctlDev | AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Adds each view's root and the agent's own terminals to `ruleset` and restricts
/// this process with it.
#[allow(unsafe_code)]
fn restrict_with_view(ruleset: &OwnedFd, workspaces: &[PathBuf]) -> Result<(), SandboxError> {
    let abi = usable_abi(probe()).ok_or_else(|| io_err("Landlock is gone", None))?;
    let rights = Rights::for_abi(abi);
    for workspace in workspaces {
        add_rule(ruleset, workspace, view_access(&rights))
            .map_err(|e| io_err("add the view's rule", Some(e)))?;
    }
    if super::child::seccomp_supported() {
        // The view's child mounted a devpts instance of the agent's own over /dev/pts
        // (and its ptmx over /dev/ptmx): only the agent's terminals are there. Device
        // ioctls on them: TIOCSTI and TIOCLINUX are refused by seccomp.
        let terminal = rights.read | rights.write | (rights.handled_fs & AccessFs::IoctlDev);
        let file = AccessFs::from_file(abi);
        for dev in super::terminal::AGENT_TERMINAL_DEVICES {
            let access = if dev.ends_with("ptmx") {
                terminal & file
            } else {
                terminal
            };
            add_rule(ruleset, Path::new(dev), access)
                .map_err(|e| io_err(&format!("add the rule for {dev}"), Some(e)))?;
        }
    }
    // SAFETY: landlock_restrict_self changes only this thread's credentials.
    let restricted =
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if restricted != 0 {
        return Err(io_err(
            "restrict the agent",
            Some(io::Error::last_os_error()),
        ));
    }
    Ok(())
}

/// Adds a rule for `path` beneath which `access` is allowed.
#[allow(unsafe_code)]
fn add_rule(ruleset: &OwnedFd, path: &Path, access: BitFlags<AccessFs>) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneath {
        allowed_access: access.bits(),
        parent_fd: fd.as_fd().as_raw_fd(),
    };
    // SAFETY: landlock_add_rule reads `attr` (alive for the call) and changes only the
    // ruleset.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        )
    };
    match added {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

fn io_err(what: &str, e: Option<io::Error>) -> SandboxError {
    SandboxError::Io {
        what: what.to_owned(),
        source: e.unwrap_or_else(|| io::Error::other(what.to_owned())),
    }
}
