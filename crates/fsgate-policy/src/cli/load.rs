//! A policy file read and loaded for a command, each failure written as the command's
//! own `file: error: ...` line.

use std::io::Write;
use std::path::Path;

use crate::Policy;
use fsgate_base::text::{Esc, EscPath};

/// The policy and its text, or `None` once the reason it does not load is written.
pub(super) fn load(path: &Path, err: &mut dyn Write) -> std::io::Result<Option<(Policy, String)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            writeln!(
                err,
                "{}: error: cannot read the policy: {}",
                EscPath(path),
                Esc(&e.to_string())
            )?;
            return Ok(None);
        }
    };
    let base = path.parent().filter(|p| !p.as_os_str().is_empty());
    match Policy::from_toml_in(
        &text,
        &path.display().to_string(),
        Some(base.unwrap_or(Path::new("."))),
    ) {
        Ok(p) => Ok(Some((p, text))),
        Err(e) => {
            writeln!(
                err,
                "{}: error: invalid policy: {} (hint: run `fsgate policy check` on it)",
                EscPath(path),
                Esc(&e.to_string())
            )?;
            Ok(None)
        }
    }
}
