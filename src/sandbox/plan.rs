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
pub struct Grant<'a> {
    /// What it is ("audit dir", "policy file"), for errors and the status detail.
    pub label: &'a str,
    /// The open handle; the Landlock rule is bound to it, not to a path, so nothing can
    /// swap the directory between opening and restricting.
    pub handle: BorrowedHandle<'a>,
}

/// What the gateway process may still reach after [`super::restrict_self`].
///
/// Everything not listed is refused by the kernel: other files and directories, every
/// TCP bind and connect except the listen port, abstract Unix sockets and signals to
/// processes outside the sandbox (where the kernel's ABI can express it).
#[derive(Debug, Clone)]
pub struct SandboxPlan<'a> {
    /// The workspace root handle (the same descriptor the workspace `Dir` uses).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) workspace: BorrowedHandle<'a>,
    /// Whether the policy can ever change the workspace (any allow rule for write or
    /// delete). False: no write, remove, make or truncate right in the kernel either.
    pub(crate) workspace_write: bool,
    /// Directories fsgate writes (audit dir, backup dir): read, write, create, remove,
    /// same-directory and cross-directory rename.
    pub(crate) read_write: Vec<Grant<'a>>,
    /// Files or directories fsgate only reads later (policy file, signing key).
    pub(crate) read_only: Vec<Grant<'a>>,
    /// Paths to allow read-only if they exist, opened when the plan is applied; missing
    /// ones are listed in the status detail.
    pub(crate) read_only_paths: Vec<PathBuf>,
    /// TCP port the WebSocket transport listens on; None refuses every TCP bind/connect.
    pub(crate) listen_port: Option<u16>,
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
            read_write: Vec::new(),
            read_only: Vec::new(),
            read_only_paths: Vec::new(),
            listen_port: None,
            scope_signals: true,
        }
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

/// Device files and directories a confined agent may read and write by default.
pub const DEFAULT_AGENT_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// The Landlock ruleset for an agent process that `fsgate acp --confine-agent` hosts.
///
/// The agent keeps its network (it talks to its model service) but gets no file access
/// except system paths (read + execute), device files, and its own scratch directory;
/// the workspace is reachable only through the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPlan {
    /// Read + execute; missing paths are skipped.
    pub read_exec: Vec<PathBuf>,
    /// Read + write + create + remove (scratch/home directories, device files); missing
    /// paths are skipped.
    pub read_write: Vec<PathBuf>,
    /// Directories the agent must not reach (workspace, audit dir, backup dir): a plan
    /// path inside one of them, or containing one, is an error.
    pub protected: Vec<PathBuf>,
    /// Set as `TMPDIR` for the agent, so temp files land in its scratch directory.
    pub tmpdir: Option<PathBuf>,
}

impl AgentPlan {
    /// The default plan: `system_paths` (or [`DEFAULT_AGENT_SYSTEM_PATHS`]) read + execute,
    /// [`DEFAULT_AGENT_DEVICES`] and `scratch` read-write, `TMPDIR=scratch`.
    pub fn new(scratch: &Path, system_paths: Option<&[PathBuf]>, protected: Vec<PathBuf>) -> Self {
        let read_exec = match system_paths {
            Some(p) => p.to_vec(),
            None => DEFAULT_AGENT_SYSTEM_PATHS
                .iter()
                .map(PathBuf::from)
                .collect(),
        };
        let mut read_write: Vec<PathBuf> =
            DEFAULT_AGENT_DEVICES.iter().map(PathBuf::from).collect();
        read_write.push(scratch.to_path_buf());
        AgentPlan {
            read_exec,
            read_write,
            protected,
            tmpdir: Some(scratch.to_path_buf()),
        }
    }

    /// Refuses a plan that would let the agent reach a protected directory.
    pub(crate) fn check_overlap(&self) -> Result<(), super::SandboxError> {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        for protected in &self.protected {
            let prot = canon(protected);
            for allowed in self.read_exec.iter().chain(&self.read_write) {
                if !allowed.exists() {
                    continue;
                }
                let a = canon(allowed);
                if prot.starts_with(&a) || a.starts_with(&prot) {
                    return Err(super::SandboxError::Overlap {
                        allowed: allowed.display().to_string(),
                        protected: protected.display().to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_plan_refuses_paths_around_the_workspace() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(&scratch).expect("mkdir");
        let ok = AgentPlan::new(&scratch, None, vec![ws.clone()]);
        assert!(ok.check_overlap().is_ok());
        assert_eq!(ok.tmpdir.as_deref(), Some(scratch.as_path()));
        // A system path that contains the workspace would hand it to the agent.
        let parent = [tmp.path().to_path_buf()];
        let bad = AgentPlan::new(&scratch, Some(&parent), vec![ws.clone()]);
        assert!(matches!(
            bad.check_overlap(),
            Err(crate::sandbox::SandboxError::Overlap { .. })
        ));
        // So would a scratch dir inside it.
        let inside = AgentPlan::new(&ws.join("tmp"), None, vec![ws.clone()]);
        std::fs::create_dir_all(ws.join("tmp")).expect("mkdir");
        assert!(inside.check_overlap().is_err());
    }
}
