//! The exit code of an `audit` command: 2 with what went wrong on stderr, or whether
//! its product was written.

/// Says what went wrong on stderr; exit code 2.
pub(super) fn fail(cmd: &str, e: &str) -> i32 {
    fsgate_base::text::eprint_line(&format!("fsgate audit {cmd}: {e}"));
    2
}

/// Exit code 0 if the product was written, 2 if not.
pub(super) fn written(r: std::io::Result<()>) -> i32 {
    if r.is_ok() { 0 } else { 2 }
}

/// The product could not be written to standard output: exit code 2, said on stderr
/// unless its reader stopped reading (`| head`), which needs no message.
pub(super) fn output_failed(cmd: &str, e: &std::io::Error) -> i32 {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => 2,
        _ => fail(cmd, &format!("output: {e}")),
    }
}
