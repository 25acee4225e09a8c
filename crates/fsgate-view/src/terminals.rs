//! The pseudo-terminals of a confined agent's namespace: a devpts instance of its own
//! over `/dev/pts`, its `ptmx` over `/dev/ptmx`. The agent's Landlock ruleset grants
//! these two paths (with device ioctls), and in this namespace they hold only the
//! terminals the agent's processes open: the user's other terminals (the host's
//! instance: a shell where a password is typed, the terminal `fsgate asks` prompts on)
//! are not there to open, read or write.

use nix::mount::{MsFlags, mount};

/// Where the terminals are.
const PTS: &str = "/dev/pts";
const PTMX: &str = "/dev/ptmx";

/// Mounts a new devpts instance over `/dev/pts` and binds its `ptmx` over `/dev/ptmx`,
/// in this (private) mount namespace. A `/dev/ptmx` that is a symbolic link (to
/// `pts/ptmx`, in containers) already leads to the new instance.
pub(crate) fn own_instance() -> Result<(), String> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC;
    mount(
        Some("devpts"),
        PTS,
        Some("devpts"),
        flags,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| format!("cannot give the agent a terminal instance of its own (devpts): {e}"))?;
    let is_link = std::fs::symlink_metadata(PTMX).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        mount(
            Some("/dev/pts/ptmx"),
            PTMX,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("cannot bind the agent's own /dev/ptmx: {e}"))?;
    }
    Ok(())
}
