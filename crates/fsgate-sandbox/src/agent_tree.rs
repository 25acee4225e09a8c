//! The agent's whole process tree ends with its session: the agent is started in a
//! cgroup v2 of its own (a child of fsgate's), and when the session ends everything
//! still in it is killed at once (`cgroup.kill`) before fsgate writes its `stop` record.
//! A process the agent started cannot escape by forking, `setsid` or double-forking:
//! the cgroup follows every descendant. Where no cgroup v2 can be made (not mounted,
//! not writable, a kernel before 5.14 without `cgroup.kill`) fsgate says so at start and
//! in the `agent-start` record, and falls back to ending the agent alone.
//!
//! # Ambient Authority
//!
//! [`AgentTree::prepare`] reads `/proc/self/mountinfo` and `/proc/self/cgroup` and makes
//! the cgroup by path; it runs before Landlock. Afterwards only the descriptors opened
//! then are used (writes to open files are not checked by Landlock). Finding, making and
//! ending the cgroup is in `cgroup`.

mod cgroup;

use std::os::fd::AsRawFd;

use serde_json::{Value, json};

use cgroup::{Group, make_group};

/// Where the agent's processes are kept together.
pub enum AgentTree {
    /// A cgroup v2 of its own.
    Cgroup(Group),
    /// None could be made: why.
    Unavailable(String),
}

impl AgentTree {
    /// Makes the agent's cgroup under fsgate's own (cleaning up ones a crashed fsgate
    /// left behind); never fails: the reason is kept instead.
    pub fn prepare() -> AgentTree {
        match make_group() {
            Ok(g) => AgentTree::Cgroup(g),
            Err(why) => AgentTree::Unavailable(why),
        }
    }

    /// What the start record and stderr say.
    pub fn describe(&self) -> Value {
        match self {
            AgentTree::Cgroup(g) => {
                json!({"method": "cgroup", "cgroup": g.dir.display().to_string()})
            }
            AgentTree::Unavailable(why) => json!({"method": "none", "reason": why}),
        }
    }

    /// One line for stderr.
    pub fn summary(&self) -> String {
        match self {
            AgentTree::Cgroup(g) => format!(
                "the agent's process tree is kept in cgroup {} and ends with the session",
                g.dir.display()
            ),
            AgentTree::Unavailable(why) => format!(
                "no cgroup for the agent ({why}): processes it starts in a session of their own may outlive it"
            ),
        }
    }

    /// Makes `command`'s process join the cgroup before it runs the agent.
    pub fn enter_on_exec(&self, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let AgentTree::Cgroup(g) = self else { return };
        let fd = g.procs.as_raw_fd();
        // SAFETY: only write(2) on an inherited descriptor, which is async-signal-safe.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                if n == 1 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }

    /// Kills whatever is left of the agent's tree and waits until it is gone. Returns
    /// how many processes were still there, or why it could not be done.
    pub fn end(&mut self) -> Result<usize, String> {
        match self {
            AgentTree::Cgroup(g) => g.end(),
            AgentTree::Unavailable(_) => Ok(0),
        }
    }
}
