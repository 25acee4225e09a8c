//! A command's terminal, closed to input injection: `TIOCSTI` pushes characters into a
//! terminal's input as if typed, and `TIOCLINUX` (a console's selection paste) does the
//! same; what they push is read by whoever reads the terminal next, such as the shell
//! that started fsgate once the run ends, outside every confinement. A seccomp filter
//! fails both ioctls with EPERM, for the native calling convention and the 32-bit
//! compat one (x32's ioctl too), so a 32-bit program is refused alike and not killed.

#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]

use seccompiler::sock_filter;

use crate::error::SandboxError;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

/// The native architecture, its ioctl numbers (after `NR_MASK`), the compat
/// architecture and its ioctl number.
#[cfg(target_arch = "x86_64")]
const ARCH: (u32, [u32; 2], u32, u32) = (0xC000_003E, [16, 514], 0x4000_0003, 54);
#[cfg(target_arch = "aarch64")]
const ARCH: (u32, [u32; 2], u32, u32) = (0xC000_00B7, [29, 29], 0x4000_0028, 54);
/// x32 calls carry the native architecture with this bit set in the number.
const NR_MASK: u32 = !0x4000_0000;

// BPF_LD | BPF_W | BPF_ABS, BPF_ALU | BPF_AND | BPF_K, BPF_JMP | BPF_JEQ | BPF_K,
// BPF_RET | BPF_K.
const LD_W_ABS: u16 = 0x20;
const AND_K: u16 = 0x54;
const JEQ_K: u16 = 0x15;
const RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
/// `struct seccomp_data`: the arch, the number and the second argument's low half
/// (little-endian).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG1: u32 = 24;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The program: ioctl(_, TIOCSTI | TIOCLINUX, _) fails with EPERM; all else runs.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn program() -> Vec<sock_filter> {
    let (native, [ioctl, ioctl_x32], compat, compat_ioctl) = ARCH;
    vec![
        stmt(LD_W_ABS, OFF_ARCH),                    // 0
        jeq(native, 0, 4),                           // 1: native ? 2 : 6
        stmt(LD_W_ABS, OFF_NR),                      // 2
        stmt(AND_K, NR_MASK),                        // 3
        jeq(ioctl, 4, 0),                            // 4: -> 9
        jeq(ioctl_x32, 3, 6),                        // 5: -> 9 : 12
        jeq(compat, 0, 5),                           // 6: -> 7 : 12
        stmt(LD_W_ABS, OFF_NR),                      // 7
        jeq(compat_ioctl, 0, 3),                     // 8: -> 9 : 12
        stmt(LD_W_ABS, OFF_ARG1),                    // 9
        jeq(TIOCSTI, 2, 0),                          // 10: -> 13
        jeq(TIOCLINUX, 1, 0),                        // 11: -> 13
        stmt(RET_K, RET_ALLOW),                      // 12
        stmt(RET_K, RET_ERRNO | libc::EPERM as u32), // 13
    ]
}

/// The program for this architecture; None where it is not written for one.
pub(crate) fn program_here() -> Option<Vec<sock_filter>> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    return Some(program());
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    None
}

/// Installs the filter on this thread (inherited by every process it starts; sets
/// `no_new_privs`, which seccomp needs). Ok(false): an architecture it is not written
/// for, where nothing is installed.
pub fn refuse_terminal_injection() -> Result<bool, SandboxError> {
    let Some(program) = program_here() else {
        return Ok(false);
    };
    seccompiler::apply_filter(&program).map_err(|e| SandboxError::Io {
        what: "close the terminal's input to the command (seccomp: TIOCSTI, TIOCLINUX)".into(),
        source: std::io::Error::other(e),
    })?;
    Ok(true)
}
