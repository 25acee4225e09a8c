//! What a sandbox allows: [`SandboxPlan`] for the gateway, [`AgentPlan`] for an agent.

use std::path::{Path, PathBuf};

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

/// Read-and-execute paths a confined agent gets by default: the usual system
/// directories, so interpreters and their libraries load. `/etc` is included because
/// TLS certificates, DNS and locale settings live there.
pub const DEFAULT_AGENT_SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    // Only what of /etc a program needs to start and resolve names: not /etc/shadow,
    // not the host's service configuration.
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys/devices/system/cpu",
    "/run/systemd/resolve",
];

/// Device files a confined agent may read and write by default. No terminal: the agent
/// runs in a session of its own, and `/dev/tty`, `/dev/pts` and `/dev/ptmx` would let it
/// reach the operator's terminal (TIOCSTI). No `/dev/shm`: it is shared by every process
/// of the user (other sessions' files included); `[agent] read_write` can grant it.
pub const DEFAULT_AGENT_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What a confined agent may do beneath one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentAccess {
    /// Read files, list directories.
    Read,
    /// Read, list and execute.
    ReadExec,
    /// Read, list, write, create, remove, truncate (no execute, no device ioctl).
    ReadWrite,
}

impl AgentAccess {
    /// The word used in `--check-sandbox` and the status detail.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentAccess::Read => "read",
            AgentAccess::ReadExec => "read+exec",
            AgentAccess::ReadWrite => "read-write",
        }
    }
}

/// One path an agent's ruleset grants, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AgentGrant {
    /// The path (a missing path is skipped when the ruleset is built).
    pub path: PathBuf,
    /// What the agent may do beneath it.
    pub access: AgentAccess,
    /// Where the grant comes from, for people: "built-in system paths",
    /// "agent executable", "[agent] read", ...
    pub source: String,
}

/// The agent's TCP network (Landlock ABI 4+).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentNetwork {
    /// Every TCP connect and bind (the default: agents talk to their model service).
    #[default]
    All,
    /// No TCP at all.
    None,
    /// TCP connect to these ports only; no bind.
    Ports(Vec<u16>),
}

/// A path the agent must never reach, with its name for messages.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Protected {
    /// The path.
    pub path: PathBuf,
    /// What it is ("workspace", "audit log directory", "policy file", ...).
    pub label: String,
}

/// The confinement of an agent process that `fsgate acp --confine-agent` hosts.
///
/// The agent gets no file access except its grants, only the environment in `env`, the
/// TCP `network`, and of pathname Unix sockets only `unix_sockets`. It runs in a session
/// of its own with no terminal. The workspace is reachable only through the gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentPlan {
    /// The agent's program as resolved (on PATH), for messages; None if not worked out.
    pub executable: Option<PathBuf>,
    /// File system grants, in order of source.
    pub grants: Vec<AgentGrant>,
    /// What no grant may reach: inside one, or containing one, is an error.
    pub protected: Vec<Protected>,
    /// Directories a grant may lie inside but must not contain or equal (the operator's
    /// home directory: the agent gets parts of it, never the whole).
    pub not_whole: Vec<Protected>,
    /// The agent's whole environment (the command's environment is cleared first).
    #[serde(skip)]
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// TCP network.
    pub network: AgentNetwork,
    /// Pathname Unix sockets the agent may connect to; empty: none.
    pub unix_sockets: Vec<PathBuf>,
}

impl AgentPlan {
    /// Adds a grant.
    pub fn grant(&mut self, path: impl Into<PathBuf>, access: AgentAccess, source: &str) {
        self.grants.push(AgentGrant {
            path: path.into(),
            access,
            source: source.to_owned(),
        });
    }

    /// The first grant that would let the agent reach a protected path, as an error
    /// naming both and where the grant came from.
    pub(crate) fn check_overlap(&self) -> Result<(), super::SandboxError> {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        for g in &self.grants {
            if !g.path.exists() {
                continue;
            }
            let a = canon(&g.path);
            for prot in &self.protected {
                let p = canon(&prot.path);
                if p.starts_with(&a) || a.starts_with(&p) {
                    return Err(overlap(g, prot));
                }
            }
            for whole in &self.not_whole {
                if canon(&whole.path).starts_with(&a) {
                    return Err(overlap(g, whole));
                }
            }
        }
        Ok(())
    }
}

fn overlap(g: &AgentGrant, prot: &Protected) -> super::SandboxError {
    super::SandboxError::Overlap {
        allowed: format!("{} (from {})", g.path.display(), g.source),
        protected: format!("{} {}", prot.label, prot.path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_with(grant: &Path, ws: &Path, home: &Path) -> AgentPlan {
        let mut plan = AgentPlan {
            protected: vec![Protected {
                path: ws.to_path_buf(),
                label: "workspace".into(),
            }],
            not_whole: vec![Protected {
                path: home.to_path_buf(),
                label: "home directory".into(),
            }],
            ..Default::default()
        };
        plan.grant(grant, AgentAccess::ReadExec, "test");
        plan
    }

    #[test]
    fn agent_plan_refuses_paths_around_the_workspace_and_the_whole_home() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let ws = home.join("ws");
        let venv = home.join("venv");
        for d in [&ws, &venv] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        assert!(plan_with(&venv, &ws, &home).check_overlap().is_ok());
        // Containing the workspace, inside it, the whole home, or above it: refused.
        for bad in [tmp.path(), home.as_path(), ws.as_path()] {
            let err = plan_with(bad, &ws, &home).check_overlap();
            assert!(
                matches!(err, Err(crate::SandboxError::Overlap { .. })),
                "{bad:?}"
            );
        }
        let inside = ws.join("tmp");
        std::fs::create_dir_all(&inside).expect("mkdir");
        let msg = plan_with(&inside, &ws, &home)
            .check_overlap()
            .expect_err("inside the workspace")
            .to_string();
        assert!(
            msg.contains("from test") && msg.contains("workspace"),
            "{msg}"
        );
    }
}
