//! Linux: the parts of an agent's confinement that are not Landlock: its own session and
//! no terminal, no inherited descriptors, no capabilities, and no pathname Unix sockets
//! where Landlock cannot refuse them; plus [`harden_gateway`].
//!
//! Seccomp also refuses what Landlock does not cover: the kernel keyrings (ENOSYS), and
//! a chmod setting the set-uid or set-gid bit (EPERM), and, when the TCP network is
//! restricted, MPTCP sockets (Landlock's TCP rules do not cover them).
//!
//! Everything is prepared in the parent ([`ChildSetup::prepare`]); the child, between
//! fork and exec, only makes plain system calls on those values.
//!
//! # Why seccomp for Unix sockets, and not a network namespace
//!
//! A pathname Unix socket (`/run/user/0/ssh-agent.sock`, `/var/run/docker.sock`) is a
//! file system object: a new network namespace hides abstract sockets and TCP, not
//! them. Landlock can refuse `connect()` to them from ABI 9 on (`ResolveUnix`). Below
//! that, a seccomp filter cannot tell *which* socket `connect()` names (the address is
//! a pointer into memory, which seccomp does not read), but it can read `socket()`'s
//! domain, an integer: so the filter refuses to create any `AF_UNIX` socket (EACCES).
//! `socketpair()` stays allowed: such a pair reaches nothing outside the agent
//! (Python's asyncio needs it). io_uring can create sockets without a `socket()`
//! system call the filter sees, so `io_uring_setup` is refused too (EPERM, the answer
//! of a kernel with io_uring disabled; programs fall back to plain system calls).
//!
//! Architecture: the filter first checks the calling convention's architecture and
//! kills the process on any other one (seccompiler's check), so 32-bit `int 0x80`
//! calls (AUDIT_ARCH_I386, whose `socketcall` could otherwise slip past) never run: a
//! 32-bit program the agent starts is killed at its first system call. x32 calls on
//! x86_64 carry the native architecture with bit 30 set in the number; the filter
//! matches those numbers too. Architectures seccompiler does not know (it knows x86_64,
//! aarch64, riscv64) get no filter, and the status says sockets are not restricted.
//!
//! A command confined here must not also ask for `process_group`: a group leader
//! cannot `setsid()`, and the start would fail.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;
use rustix::thread::{CapabilitySet, CapabilitySets};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::SandboxError;

/// x32 system calls on x86_64: the native number with this bit set.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// What the child does between fork and exec besides Landlock, prepared in the parent.
#[derive(Debug)]
pub(crate) struct ChildSetup {
    /// Capabilities to drop: Some when the agent would otherwise run with any.
    pub caps: Option<CapDrop>,
    /// Highest descriptor number to mark close-on-exec by hand if `close_range` is
    /// missing (kernels before 5.11).
    fd_limit: u32,
    /// Seccomp programs to install after Landlock (empty: none).
    filters: Vec<BpfProgram>,
    /// The gateway's pid: the agent is killed when it dies (it no longer shares the
    /// gateway's session, so no hang-up would reach it).
    gateway: Option<rustix::process::Pid>,
}

/// How to empty the capability sets in the child.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CapDrop {
    /// `/proc/sys/kernel/cap_last_cap`, read before the fork.
    last_cap: u32,
    /// Whether the bounding set can be emptied (CAP_SETPCAP is effective).
    bounding: bool,
}

/// Whether pathname Unix sockets are refused by seccomp, and why not when they are not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnixFilter {
    /// `socket(AF_UNIX)` is refused.
    Refused,
    /// Not asked for (Landlock handles it, or the plan lists sockets).
    NotNeeded,
    /// Asked for, but seccompiler does not know this architecture.
    Unsupported,
}

impl ChildSetup {
    /// Reads what the child needs (capabilities, the last capability number, the
    /// descriptor limit) and builds the seccomp programs, when `block_unix` is set.
    /// With `restrict_tcp` (a network other than "all"), MPTCP sockets are refused too.
    pub(crate) fn prepare(
        block_unix: bool,
        restrict_tcp: bool,
    ) -> Result<(Self, UnixFilter), SandboxError> {
        let mut filters: Vec<BpfProgram> = keyring_filter()?.into_iter().collect();
        filters.extend(setid_chmod_filter()?);
        filters.extend(chown_filter()?);
        filters.extend(super::terminal::ioctl_filter()?);
        if restrict_tcp {
            filters.extend(mptcp_filter()?);
        }
        let unix = if block_unix {
            match unix_socket_filters()? {
                Some(f) => {
                    filters.extend(f);
                    UnixFilter::Refused
                }
                None => UnixFilter::Unsupported,
            }
        } else {
            UnixFilter::NotNeeded
        };
        let fd_limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map_or(1 << 20, |n| n.min(1 << 20)) as u32;
        let setup = ChildSetup {
            caps: cap_drop()?,
            fd_limit,
            filters,
            gateway: Some(rustix::process::getpid()),
        };
        Ok((setup, unix))
    }

    /// In the child, before Landlock: a session of its own (no controlling terminal),
    /// every inherited descriptor above 2 closed on exec, and no terminal on 0, 1 or 2.
    #[allow(unsafe_code)]
    pub(crate) fn before_landlock(&self) -> io::Result<()> {
        self.own_session()?;
        cloexec_from_3(self.fd_limit)
    }

    /// Without the gateway's pid: the process these are applied to is not the
    /// gateway's child (an agent started inside the view, by the view's child).
    pub(crate) fn without_gateway(self) -> Self {
        ChildSetup {
            gateway: None,
            ..self
        }
    }

    /// Every inherited descriptor above 2 closed on exec.
    pub(crate) fn close_inherited(&self) -> io::Result<()> {
        cloexec_from_3(self.fd_limit)
    }

    /// A session of its own (no controlling terminal), killed with the gateway, and no
    /// terminal on 0, 1 or 2; inherited descriptors are left as they are.
    #[allow(unsafe_code)]
    pub(crate) fn own_session(&self) -> io::Result<()> {
        rustix::process::setsid()?;
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        // The gateway may have died before the line above: then no signal would come.
        if self.gateway.is_some() && rustix::process::getppid() != self.gateway {
            return Err(io::Error::from(rustix::io::Errno::SRCH));
        }
        for fd in 0..3 {
            // SAFETY: 0, 1 and 2 stay open for the duration of this call; a closed one
            // makes isatty false.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            if rustix::termios::isatty(fd) {
                return Err(refuse_terminal());
            }
        }
        Ok(())
    }

    /// In the child, after Landlock: no_new_privs (Landlock set it already, if there is
    /// Landlock), the seccomp filters, then the capabilities dropped.
    pub(crate) fn after_landlock(&self) -> io::Result<()> {
        rustix::thread::set_no_new_privs(true)?;
        for f in &self.filters {
            seccompiler::apply_filter(f).map_err(|e| match e {
                seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
                _ => io::Error::from(Errno::INVAL),
            })?;
        }
        if let Some(caps) = self.caps {
            drop_caps(caps)?;
        }
        Ok(())
    }
}

#[allow(unsafe_code)]
/// Says on fd 2 why the agent is not started (the spawn error carries only an errno).
fn refuse_terminal() -> io::Error {
    const MSG: &[u8] = b"fsgate: refusing to start the agent: its stdin, stdout or stderr \
is a terminal (a confined agent must not reach the operator's terminal)\n";
    // SAFETY: fd 2 is only written to; a closed or bad fd makes the write fail harmlessly.
    let _ = rustix::io::write(unsafe { BorrowedFd::borrow_raw(2) }, MSG);
    io::Error::from(Errno::PERM)
}

/// Marks every descriptor from 3 up close-on-exec. Rust's own exec-error pipe is
/// already close-on-exec, so it keeps working.
#[allow(unsafe_code)]
fn cloexec_from_3(limit: u32) -> io::Result<()> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = Errno::from_raw_os_error(io::Error::last_os_error().raw_os_error().unwrap_or(0));
    if err != Errno::NOSYS && err != Errno::INVAL {
        return Err(err.into());
    }
    for fd in 3..limit as i32 {
        // SAFETY: fcntl on a number that may not be open fails with EBADF, skipped.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        if let Ok(flags) = rustix::io::fcntl_getfd(fd) {
            rustix::io::fcntl_setfd(fd, flags | rustix::io::FdFlags::CLOEXEC)?;
        }
    }
    Ok(())
}

/// Whether seccompiler can build a filter for this architecture.
pub(crate) fn seccomp_supported() -> bool {
    TargetArch::try_from(std::env::consts::ARCH).is_ok()
}

/// What the child does with capabilities, for the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CapsView {
    /// The agent would start with none.
    NoneHeld,
    /// Every set emptied, the bounding set too.
    Dropped,
    /// Emptied but for the bounding set (no CAP_SETPCAP to empty it).
    BoundingKept,
}

/// Whether the agent would start with a capability, which the child then drops.
pub(crate) fn caps_view() -> CapsView {
    // An error here fails the start later, when the plan is applied.
    CapDrop::view(cap_drop().ok().flatten())
}

impl CapDrop {
    /// What dropping `caps` leaves, for the status line.
    pub(crate) fn view(caps: Option<CapDrop>) -> CapsView {
        match caps {
            Some(c) if c.bounding => CapsView::Dropped,
            Some(_) => CapsView::BoundingKept,
            None => CapsView::NoneHeld,
        }
    }
}

/// Some when the agent would start with a capability: run as root (whose exec grants
/// the bounding set), or with any permitted or inheritable capability.
fn cap_drop() -> Result<Option<CapDrop>, SandboxError> {
    let io_err = |what: &str| {
        let what = what.to_owned();
        move |e: io::Error| SandboxError::Io { what, source: e }
    };
    let sets = rustix::thread::capabilities(None)
        .map_err(|e| io_err("read the capabilities (capget)")(e.into()))?;
    let root = rustix::process::getuid().is_root() || rustix::process::geteuid().is_root();
    if !root && sets.permitted.is_empty() && sets.inheritable.is_empty() {
        return Ok(None);
    }
    let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .map_err(io_err("read /proc/sys/kernel/cap_last_cap"))?
        .trim()
        .parse::<u32>()
        .map_err(|e| io_err("parse /proc/sys/kernel/cap_last_cap")(io::Error::other(e)))?;
    Ok(Some(CapDrop {
        last_cap: last_cap.min(63),
        bounding: sets.effective.contains(CapabilitySet::SETPCAP),
    }))
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets. Without
/// CAP_SETPCAP the bounding set stays, but no_new_privs (set by then) keeps exec from
/// granting anything beyond the (now empty) permitted set.
fn drop_caps(caps: CapDrop) -> io::Result<()> {
    if caps.bounding {
        for cap in 0..=caps.last_cap {
            let set = CapabilitySet::from_bits_retain(1u64 << cap);
            rustix::thread::remove_capability_from_bounding_set(set)?;
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // EINVAL: a kernel before 4.3 has no ambient set.
        Ok(()) | Err(Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    let empty = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, empty)?;
    Ok(())
}

pub(crate) fn filter_err(e: seccompiler::BackendError) -> SandboxError {
    SandboxError::Io {
        what: "build the agent's seccomp filter".into(),
        source: io::Error::other(e),
    }
}

/// `nr` and, on x86_64, its x32 twin.
pub(crate) fn with_x32(arch: TargetArch, nr: i64) -> Vec<i64> {
    if arch == TargetArch::x86_64 {
        vec![nr, nr | X32_SYSCALL_BIT]
    } else {
        vec![nr]
    }
}

/// The seccomp program refusing the kernel keyrings (`add_key`, `request_key`,
/// `keyctl`) with ENOSYS, a kernel built without them; None on an architecture
/// seccompiler does not know. Landlock does not cover keyrings, and the agent would
/// otherwise share the operator's session keyring (tokens, Kerberos tickets) and reach
/// the persistent one.
fn keyring_filter() -> Result<Option<BpfProgram>, SandboxError> {
    refuse_calls(
        &[libc::SYS_add_key, libc::SYS_request_key, libc::SYS_keyctl],
        libc::ENOSYS,
    )
}

/// The seccomp program refusing every change of a file's owner (EPERM). Landlock does
/// not cover chown, and the agent runs as the operator: it could give away its files,
/// or, as root, clear the set-uid bit of `sudo` for the whole host by chowning it.
fn chown_filter() -> Result<Option<BpfProgram>, SandboxError> {
    #[cfg(target_arch = "x86_64")]
    let calls = [
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_chown,
        libc::SYS_lchown,
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let calls = [libc::SYS_fchown, libc::SYS_fchownat];
    refuse_calls(&calls, libc::EPERM)
}

/// A seccomp program failing every call in `calls` with `errno`; None on an
/// architecture seccompiler does not know.
fn refuse_calls(calls: &[i64], errno: i32) -> Result<Option<BpfProgram>, SandboxError> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
        return Ok(None);
    };
    let rules: BTreeMap<i64, Vec<SeccompRule>> = calls
        .iter()
        .flat_map(|nr| with_x32(arch, *nr))
        .map(|nr| (nr, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(filter_err)?;
    Ok(Some(BpfProgram::try_from(filter).map_err(filter_err)?))
}

/// The seccomp program refusing a `chmod` that sets the set-user-ID, set-group-ID or
/// other-writable bit (EPERM); None on an architecture seccompiler does not know.
/// Landlock does not cover chmod, and the agent runs as the operator: as root it could
/// otherwise make any root-owned program (`/usr/bin/python3`) set-uid root, or
/// `/etc/passwd` writable, for every local user.
fn setid_chmod_filter() -> Result<Option<BpfProgram>, SandboxError> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
        return Ok(None);
    };
    // The mode's argument: chmod(path, mode), fchmod(fd, mode), fchmodat(dir, path,
    // mode), fchmodat2(dir, path, mode, flags).
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ];
    // The legacy call exists on x86_64 only.
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_chmod, 1));
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, arg) in calls {
        let mut per_bit = Vec::new();
        for bit in [libc::S_ISUID, libc::S_ISGID, libc::S_IWOTH] {
            let bit = u64::from(bit);
            let cond = SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )
            .map_err(filter_err)?;
            per_bit.push(SeccompRule::new(vec![cond]).map_err(filter_err)?);
        }
        for n in with_x32(arch, nr) {
            rules.insert(n, per_bit.clone());
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(filter_err)?;
    Ok(Some(BpfProgram::try_from(filter).map_err(filter_err)?))
}

/// The seccomp program refusing MPTCP sockets (EPROTONOSUPPORT, a kernel without MPTCP:
/// programs fall back to TCP); None on an architecture seccompiler does not know.
/// Landlock's TCP rules cover `IPPROTO_TCP` only, and an MPTCP socket connects to any
/// ordinary TCP server.
fn mptcp_filter() -> Result<Option<BpfProgram>, SandboxError> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
        return Ok(None);
    };
    let mptcp = SeccompCondition::new(
        2,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::IPPROTO_MPTCP as u64,
    )
    .map_err(filter_err)?;
    let rule = SeccompRule::new(vec![mptcp]).map_err(filter_err)?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = with_x32(arch, libc::SYS_socket)
        .into_iter()
        .map(|nr| (nr, vec![rule.clone()]))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPROTONOSUPPORT as u32),
        arch,
    )
    .map_err(filter_err)?;
    Ok(Some(BpfProgram::try_from(filter).map_err(filter_err)?))
}

/// The seccomp programs refusing `socket(AF_UNIX, ...)` (EACCES) and `io_uring_setup`
/// (EPERM); None on an architecture seccompiler does not know.
fn unix_socket_filters() -> Result<Option<Vec<BpfProgram>>, SandboxError> {
    let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
        return Ok(None);
    };
    let err = filter_err;
    let numbers = |nr: i64| with_x32(arch, nr);
    // Dword: the kernel reads the domain as an int, so only the low 32 bits count.
    let unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(err)?;
    let rule = SeccompRule::new(vec![unix]).map_err(err)?;
    let socket: BTreeMap<i64, Vec<SeccompRule>> = numbers(libc::SYS_socket)
        .into_iter()
        .map(|nr| (nr, vec![rule.clone()]))
        .collect();
    let uring: BTreeMap<i64, Vec<SeccompRule>> = numbers(libc::SYS_io_uring_setup)
        .into_iter()
        .map(|nr| (nr, Vec::new()))
        .collect();
    let mut programs = Vec::new();
    for (rules, errno) in [(socket, libc::EACCES), (uring, libc::EPERM)] {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(err)?;
        programs.push(BpfProgram::try_from(filter).map_err(err)?);
    }
    Ok(Some(programs))
}

/// See [`super::harden_gateway`].
pub(crate) fn harden_gateway() -> Result<(), SandboxError> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).map_err(
        |e| SandboxError::Io {
            what: "set PR_SET_DUMPABLE to 0".into(),
            source: e.into(),
        },
    )
}
