//! Start-up failures and their exit code.

use std::process::ExitCode;

use fsgate_policy::Policy;

/// Exit code for invalid configuration or unreadable input.
pub const EXIT_CONFIG: u8 = 2;

/// `fsgate run`'s exit status for its own failures (its arguments, the policy, a
/// workspace, the view): nothing was run. 125, as env(1) and timeout(1) say theirs, so
/// that it is not taken for one of the command's own (126: found but not runnable;
/// 127: not found).
pub(super) const EXIT_OWN: u8 = 125;

/// A start-up failure. When the policy file does not load, every error in it is
/// reported, located and with its hint, as `fsgate policy check` reports them.
pub(super) fn fail_open(msg: &str, policy: Option<&std::path::Path>) -> ExitCode {
    use std::io::Write;
    if let Some(p) = policy
        && Policy::load(p).is_err()
    {
        let mut err = std::io::stderr().lock();
        if let Ok(n @ 1..) = fsgate_policy::cli::write_load_errors(p, &mut err) {
            let p = fsgate_base::text::EscPath(p);
            let _ = writeln!(
                err,
                "fsgate: invalid policy {p}: {n} error(s), nothing started \
                 (`fsgate policy check {p}` lists the warnings too)"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    fail(msg)
}

pub(super) fn fail(msg: &str) -> ExitCode {
    fsgate_base::text::eprint_line(&format!("fsgate: {msg}"));
    ExitCode::from(EXIT_CONFIG)
}

/// A failure once the gateway's log is open, before it served: said as [`fail`] says
/// it, and the log closed with a `stop` naming it (`startup::stop_early`).
pub(super) fn fail_after_start(gateway: &fsgate_gateway::Gateway, msg: &str) -> ExitCode {
    let code = fail(msg);
    crate::startup::stop_early(gateway, msg);
    code
}
