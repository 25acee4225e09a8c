//! What a sandbox allows: [`SandboxPlan`] for the gateway, [`AgentPlan`] for an agent
//! (in `agent`).

mod agent;

use std::path::PathBuf;

#[cfg(test)]
pub(crate) use agent::java_config_under;
pub use agent::{
    AgentAccess, AgentGrant, AgentNetwork, AgentPlan, DEFAULT_AGENT_DEVICES,
    DEFAULT_AGENT_SHELL_FILES, DEFAULT_AGENT_SYSTEM_PATHS, Protected, java_config_paths,
};

#[cfg(unix)]
pub(crate) use std::os::fd::{AsFd as AsHandle, BorrowedFd as BorrowedHandle};
#[cfg(windows)]
pub(crate) use std::os::windows::io::{AsHandle, BorrowedHandle};

/// Borrows the OS handle of `h` (an fd on Unix).
fn borrow<T: AsHandle + ?Sized>(h: &T) -> BorrowedHandle<'_> {
    #[cfg(unix)]
    return h.as_fd();
    #[cfg(windows)]
    return h.as_handle();
}

/// One already-open file or directory the plan grants, with a name for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grant<'a> {
    /// What it is ("audit dir", "policy file"), for errors and the status detail.
    pub label: &'a str,
    /// The open handle; the Landlock rule is bound to it, not to a path, so nothing can
    /// swap the directory between opening and restricting.
    pub handle: BorrowedHandle<'a>,
}

/// What the gateway process may still reach after [`super::restrict_self`].
///
/// Everything not listed is refused by the kernel: other files and directories, every
/// TCP bind and connect except the listen port and the audit collectors' ports, abstract
/// Unix sockets and signals to processes outside the sandbox (where the kernel's ABI can
/// express it).
#[derive(Debug, Clone)]
pub struct SandboxPlan<'a> {
    /// The workspace root handle (the same descriptor the workspace `Dir` uses).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) workspace: BorrowedHandle<'a>,
    /// Whether the policy can ever change the workspace (any allow rule for write or
    /// delete). False: no write, remove, make or truncate right in the kernel either.
    pub(crate) workspace_write: bool,
    /// More workspaces (several `--workspace`), each with whether it is writable.
    pub(crate) more_workspaces: Vec<(BorrowedHandle<'a>, bool)>,
    /// Directories fsgate writes (audit dir, backup dir): read, write, create, remove,
    /// same-directory and cross-directory rename.
    pub(crate) read_write: Vec<Grant<'a>>,
    /// Files or directories fsgate only reads later (policy file, signing key).
    pub(crate) read_only: Vec<Grant<'a>>,
    /// Paths to allow read-only if they exist, opened when the plan is applied; missing
    /// ones are listed in the status detail.
    pub(crate) read_only_paths: Vec<PathBuf>,
    /// TCP port the WebSocket transport listens on; None refuses every TCP bind.
    pub(crate) listen_port: Option<u16>,
    /// TCP ports the gateway connects to (`[audit] ship` collectors); others refused.
    pub(crate) connect_ports: Vec<u16>,
    /// Directories holding Unix sockets the gateway connects to (a local syslog
    /// socket), so a kernel that restricts connecting to them (Landlock ABI 9) allows it.
    pub(crate) unix_socket_dirs: Vec<PathBuf>,
    /// Whether to stop the process from signalling processes outside its sandbox.
    pub(crate) scope_signals: bool,
}

impl<'a> SandboxPlan<'a> {
    /// A plan for `workspace` (the open workspace directory, e.g. its `cap_std::fs::Dir`),
    /// writable in the kernel only if `workspace_write` is true.
    pub fn new<W: AsHandle + ?Sized>(workspace: &'a W, workspace_write: bool) -> Self {
        SandboxPlan {
            workspace: borrow(workspace),
            workspace_write,
            more_workspaces: Vec::new(),
            read_write: Vec::new(),
            read_only: Vec::new(),
            read_only_paths: Vec::new(),
            listen_port: None,
            connect_ports: Vec::new(),
            unix_socket_dirs: Vec::new(),
            scope_signals: true,
        }
    }

    /// Adds another workspace (several `--workspace`), writable in the kernel only if
    /// `write` is true.
    pub fn workspace<W: AsHandle + ?Sized>(mut self, dir: &'a W, write: bool) -> Self {
        self.more_workspaces.push((borrow(dir), write));
        self
    }

    /// Adds a directory fsgate writes (audit dir, backup dir) by its open handle.
    pub fn read_write_dir<D: AsHandle + ?Sized>(mut self, label: &'a str, dir: &'a D) -> Self {
        self.read_write.push(Grant {
            label,
            handle: borrow(dir),
        });
        self
    }

    /// Adds a file or directory fsgate reads later, by its open handle.
    pub fn read_only<F: AsHandle + ?Sized>(mut self, label: &'a str, file: &'a F) -> Self {
        self.read_only.push(Grant {
            label,
            handle: borrow(file),
        });
        self
    }

    /// Adds an optional path to read later (opened when the plan is applied).
    pub fn read_only_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only_paths.push(path.into());
        self
    }

    /// Allows binding this TCP port (the WebSocket listener); all other TCP is refused.
    pub fn listen_port(mut self, port: u16) -> Self {
        self.listen_port = Some(port);
        self
    }

    /// Allows connecting to this TCP port (an audit collector's).
    pub fn connect_port(mut self, port: u16) -> Self {
        self.connect_ports.push(port);
        self
    }

    /// Allows connecting to the Unix sockets in `dir` (the local syslog socket's
    /// directory: the socket itself is replaced when the daemon restarts).
    pub fn unix_sockets_in(mut self, dir: impl Into<PathBuf>) -> Self {
        self.unix_socket_dirs.push(dir.into());
        self
    }

    /// Whether signals to processes outside the sandbox are refused (default true).
    /// `fsgate acp` must pass false: the agent it spawned before confining itself lives
    /// outside the gateway's sandbox, and the gateway must be able to stop it.
    pub fn scope_signals(mut self, on: bool) -> Self {
        self.scope_signals = on;
        self
    }
}
