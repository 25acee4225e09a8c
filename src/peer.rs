//! Who is at the other end of this process's standard input and output, for the
//! records a command-line request writes.

/// The stdio peer: our parent process and our uid.
pub(crate) fn stdio_peer() -> String {
    let ppid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    format!("pid={ppid} uid={}", rustix::process::getuid().as_raw())
}
