//! Linux: a confined agent's pseudo-terminals. Its shell tool may need one (Gemini CLI's
//! `run_shell_command` uses `forkpty`), so inside fsgate's view `/dev/ptmx` and
//! `/dev/pts` are granted with device ioctls: there they are a devpts instance of the
//! agent's own (the view's child mounts it), never the host's, which holds every other
//! terminal of the user. Without the view (several workspaces) no terminal is granted.
//! What a terminal ioctl could do beyond the agent's own terminal is
//! refused by seccomp for every descriptor instead: `TIOCSTI` (push input into a
//! terminal, typed as if by its user) and `TIOCLINUX` (the Linux console's selection
//! and more), both EPERM.
//!
//! The filter is `no_tiocsti.rs`'s, the one `fsgate run` gives its command: one program
//! for both, which refuses the two commands for 32-bit (compat and x32) callers too,
//! rather than killing them.

use seccompiler::BpfProgram;

use crate::error::SandboxError;

/// The terminal devices a confined agent in the view may open, with device ioctls (ABI
/// 5), when the filter below exists.
pub const AGENT_TERMINAL_DEVICES: &[&str] = &["/dev/ptmx", "/dev/pts"];

/// The seccomp program refusing `ioctl(_, TIOCSTI | TIOCLINUX, _)` with EPERM; None on
/// an architecture it is not written for.
pub(crate) fn ioctl_filter() -> Result<Option<BpfProgram>, SandboxError> {
    Ok(super::no_tiocsti::program_here())
}
