//! What a confined agent may reach: [`AgentPlan`], its grants and default system paths,
//! and the paths no grant may reach.

use std::path::{Path, PathBuf};

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
    // Which system this is. pip (through `distro`) reads `debian_version` on every
    // install and stops on any error but "not found"; the `*-release` files it reads
    // forgivingly, granted so that other tools find what they name. No secret is in them.
    "/etc/debian_version",
    "/etc/lsb-release",
    "/etc/system-release",
    "/etc/redhat-release",
    "/etc/fedora-release",
    "/etc/centos-release",
    "/etc/alpine-release",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/opt",
    "/nix/store",
    "/proc",
    "/sys/devices/system/cpu",
    "/run/systemd/resolve",
];

/// The Java runtimes' configuration under `/etc`, read-only for a confined agent beside
/// the system paths: Debian's JDKs link their `conf` files there (`java.security`), and
/// without them `javac` and any program past `java -version` stop.
pub fn java_config_paths() -> Vec<PathBuf> {
    java_config_under(Path::new("/etc"))
}

/// The regular files beneath each `java`, `java-*` or `java<digit>*` directory of `etc`
/// (Debian's `/etc/java-17-openjdk`, Fedora's `/etc/java/java-17-openjdk/.../conf`), four
/// levels deep at most, never under a `management` directory (where a JMX password file
/// would lie) and never through a link (a granted link would grant where it leads); at
/// most 256, sorted.
pub(crate) fn java_config_under(etc: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_file() => out.push(e.path()),
                Ok(t) if t.is_dir() && depth < 4 && e.file_name() != "management" => {
                    walk(&e.path(), depth + 1, out)
                }
                _ => {}
            }
        }
    }
    let java = |name: &str| {
        name.strip_prefix("java").is_some_and(|rest| {
            rest.is_empty()
                || rest.starts_with('-')
                || rest.starts_with(|c: char| c.is_ascii_digit())
        })
    };
    let mut out = Vec::new();
    let roots = std::fs::read_dir(etc).map_or(Vec::new(), |d| d.flatten().collect());
    for e in roots {
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && e.file_name().to_str().is_some_and(java) {
            walk(&e.path(), 1, &mut out);
        }
    }
    out.sort();
    out.truncate(256);
    out
}

/// The system's shell start-up files, read-only for a confined agent: a shell it starts
/// reads them (bash, sh, zsh), and denied they put an error before every command's
/// output. Granted beside the system paths, whatever `[agent] system_paths` says.
pub const DEFAULT_AGENT_SHELL_FILES: &[&str] = &[
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/bash_completion",
    "/etc/bash_completion.d",
    "/etc/inputrc",
    "/etc/environment",
    "/etc/shells",
    "/etc/zshenv",
    "/etc/zprofile",
    "/etc/zshrc",
    "/etc/zsh",
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
    /// As [`AgentAccess::ReadWrite`], and execute, and with `links` make symbolic links
    /// and fifos: the agent's private scratch directory (its HOME and TMPDIR), emptied
    /// when it exits, where `npx` links and runs a package's program, `go test` runs the
    /// test binary it built, and a test makes links and fifos in its temporary tree.
    /// Executing there gives the agent nothing it lacks: it runs any code through the
    /// interpreters it is granted. Never a grant of the policy's: a link left in a
    /// directory of the host outlives the run, and the host's own tools could follow it
    /// out; so `links` only where no directory granted read-write shares the scratch
    /// dir's filesystem (see [`AgentPlan::shares_filesystem_with`]).
    Scratch {
        /// Symbolic links and fifos may be made there.
        links: bool,
    },
}

impl AgentAccess {
    /// The word used in `--check-sandbox` and the status detail.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentAccess::Read => "read",
            AgentAccess::ReadExec => "read+exec",
            AgentAccess::ReadWrite => "read-write",
            AgentAccess::Scratch { links: true } => "read-write+exec+links",
            AgentAccess::Scratch { links: false } => "read-write+exec",
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
    /// "agent executable", `"[agent] read"`, ...
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
    /// The first directory granted read-write on the filesystem of `scratch`, if any: a
    /// directory moved there from the scratch dir (Landlock checks what a moved
    /// directory may do where it lands, not what it holds) would keep the links and
    /// fifos made in it past the run. A directory on another filesystem cannot be moved
    /// to (EXDEV), and a copy makes no link where none may be made.
    pub fn shares_filesystem_with(&self, scratch: &Path) -> Option<&AgentGrant> {
        use std::os::unix::fs::MetadataExt;
        // Unknown (the scratch dir cannot be looked at): every such directory counts.
        let dev = std::fs::metadata(scratch).ok().map(|m| m.dev());
        self.grants.iter().find(|g| {
            g.access == AgentAccess::ReadWrite
                && std::fs::metadata(&g.path)
                    .is_ok_and(|m| m.is_dir() && dev.is_none_or(|d| d == m.dev()))
        })
    }

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
    pub(crate) fn check_overlap(&self) -> Result<(), crate::error::SandboxError> {
        for g in &self.grants {
            if let Some(prot) = self.overlapped_by(g) {
                return Err(overlap(g, prot));
            }
        }
        Ok(())
    }

    /// The protected path `g` would let the agent reach (it is, holds or lies in it; or
    /// holds a path never granted whole), if any.
    pub fn overlapped_by(&self, g: &AgentGrant) -> Option<&Protected> {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        if !g.path.exists() {
            return None;
        }
        let a = canon(&g.path);
        let inside = |prot: &&Protected| {
            let p = canon(&prot.path);
            p.starts_with(&a) || a.starts_with(&p)
        };
        (self.protected.iter().find(inside))
            .or_else(|| (self.not_whole.iter()).find(|w| canon(&w.path).starts_with(&a)))
    }
}

fn overlap(g: &AgentGrant, prot: &Protected) -> crate::error::SandboxError {
    crate::error::SandboxError::Overlap {
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
                matches!(err, Err(crate::error::SandboxError::Overlap { .. })),
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
