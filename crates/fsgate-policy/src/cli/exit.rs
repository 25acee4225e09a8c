//! The exit codes of the `policy` commands, and what each command returns.

/// Clean, all passed, nothing loosens.
pub(crate) const EXIT_OK: i32 = 0;
/// Findings, failed cases, uncovered rules (with `--fail-on-uncovered`), a loosening.
pub(crate) const EXIT_FINDINGS: i32 = 1;
/// A file is unreadable or not a valid policy, or the arguments are wrong.
pub(crate) const EXIT_INVALID: i32 = 2;

/// A command's exit code, or the output it could not write.
pub(super) type Res = std::io::Result<i32>;
