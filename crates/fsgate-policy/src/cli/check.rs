//! `policy check`: every file linted, its findings as lines or one JSON document.

use std::io::Write;
use std::path::PathBuf;

use super::exit::{EXIT_FINDINGS, EXIT_INVALID, EXIT_OK, Res};
use crate::lint::{LintOptions, Severity, lint_file};

pub(super) fn check(
    files: &[PathBuf],
    json: bool,
    options: LintOptions,
    out: &mut dyn Write,
) -> Res {
    let reports: Vec<_> = files.iter().map(|f| lint_file(f, &options)).collect();
    let invalid = reports.iter().any(|r| r.invalid);
    let failing: usize = reports.iter().map(|r| r.failing()).sum();
    let count = |s: Severity| {
        reports
            .iter()
            .flat_map(|r| &r.findings)
            .filter(|f| f.severity == s)
            .count()
    };
    let (errors, warnings, notes) = (
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Note),
    );
    if json {
        let findings: Vec<_> = reports.iter().flat_map(|r| &r.findings).collect();
        let doc = serde_json::json!({
            "files": files.len(),
            "invalid": invalid,
            "errors": errors,
            "warnings": warnings,
            "notes": notes,
            "findings": findings,
        });
        writeln!(out, "{doc:#}")?;
    } else {
        for f in reports.iter().flat_map(|r| &r.findings) {
            writeln!(out, "{f}")?;
        }
        writeln!(
            out,
            "checked {} file(s): {errors} error(s), {warnings} warning(s), {notes} note(s)",
            files.len()
        )?;
    }
    Ok(if invalid {
        EXIT_INVALID
    } else if failing > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
