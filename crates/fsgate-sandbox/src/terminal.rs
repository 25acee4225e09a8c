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
//! The command is compared as the 32-bit value the kernel reads (`unsigned int`), so
//! high bits set in the 64-bit argument do not slip past.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;
use super::child::{filter_err, with_x32};

/// The terminal devices a confined agent in the view may open, with device ioctls (ABI
/// 5), when the filter below exists.
pub const AGENT_TERMINAL_DEVICES: &[&str] = &["/dev/ptmx", "/dev/pts"];

/// The ioctl commands refused on every descriptor.
#[allow(clippy::unnecessary_cast)]
const REFUSED: [u64; 2] = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// The seccomp program refusing `ioctl(_, TIOCSTI | TIOCLINUX, _)` with EPERM; None on
/// an architecture seccompiler does not know.
pub(crate) fn ioctl_filter() -> Result<Option<BpfProgram>, SandboxError> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
        return Ok(None);
    };
    let mut per_cmd = Vec::new();
    for cmd in REFUSED {
        let cond = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, cmd)
            .map_err(filter_err)?;
        per_cmd.push(SeccompRule::new(vec![cond]).map_err(filter_err)?);
    }
    let rules: BTreeMap<i64, Vec<SeccompRule>> = with_x32(arch, libc::SYS_ioctl)
        .into_iter()
        .map(|nr| (nr, per_cmd.clone()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(filter_err)?;
    Ok(Some(BpfProgram::try_from(filter).map_err(filter_err)?))
}
