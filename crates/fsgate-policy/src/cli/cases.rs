//! `policy test`: each file's [[test]] cases run, failures and coverage as lines or one
//! JSON document.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::exit::{EXIT_FINDINGS, EXIT_INVALID, EXIT_OK, Res};
use super::load::load;
use crate::Policy;
use crate::testrun::{TestRun, run_cases};
use fsgate_base::text::{Esc, EscPath};

pub(super) fn test(
    files: &[PathBuf],
    coverage: bool,
    fail_on_uncovered: bool,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Res {
    let mut tally = Tally::default();
    let mut docs = Vec::new();
    for f in files {
        let Some((policy, text)) = load(f, err)? else {
            tally.invalid = true;
            let name = f.display().to_string();
            docs.push(serde_json::json!({ "file": name, "error": "unreadable or invalid policy" }));
            continue;
        };
        let run = run_cases(&policy, &text);
        tally.add(&run);
        if json {
            docs.push(test_json(f, &run, coverage));
        } else {
            print_test_file(out, err, f, &policy, &run, coverage)?;
        }
    }
    let Tally {
        passed,
        failed,
        uncovered,
        empty,
        invalid,
    } = tally;
    if json {
        let doc = serde_json::json!({ "files": docs, "passed": passed, "failed": failed, "uncovered": uncovered, "without_cases": empty });
        writeln!(out, "{doc:#}")?;
    } else {
        writeln!(out, "{passed} passed, {failed} failed")?;
    }
    Ok(if invalid {
        EXIT_INVALID
    } else if failed > 0 || empty > 0 || (fail_on_uncovered && uncovered > 0) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

/// Counts over every file `policy test` ran.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    uncovered: usize,
    /// Files with no [[test]] case: nothing was tested, which is not a pass.
    empty: usize,
    invalid: bool,
}

impl Tally {
    fn add(&mut self, run: &TestRun) {
        self.passed += run.passed();
        self.failed += run.failed();
        self.uncovered += run.uncovered.len();
        self.empty += usize::from(run.cases.is_empty());
    }
}

fn test_json(f: &Path, run: &TestRun, coverage: bool) -> serde_json::Value {
    let cov = |v: serde_json::Value| if coverage { v } else { serde_json::Value::Null };
    serde_json::json!({
        "file": f.display().to_string(),
        "passed": run.passed(),
        "failed": run.failed(),
        "cases": run.cases,
        "error": run.cases.is_empty().then_some("no [[test]] cases"),
        "uncovered": cov(serde_json::to_value(&run.uncovered).unwrap_or_default()),
        "content_rules": cov(run.content_rules.len().into()),
        "content_exercised": cov(serde_json::to_value(&run.content_exercised).unwrap_or_default()),
    })
}

fn print_test_file(
    out: &mut dyn Write,
    err: &mut dyn Write,
    f: &Path,
    policy: &Policy,
    run: &TestRun,
    coverage: bool,
) -> std::io::Result<()> {
    let shown = EscPath(f);
    for c in run.cases.iter().filter(|c| !c.passed) {
        let kind = if policy.raw().tests.get(c.index).is_some_and(|t| t.dir) {
            " (dir)"
        } else {
            ""
        };
        writeln!(
            out,
            "{shown}:{}: FAIL {} {}{kind}: {}",
            c.line,
            Esc(&c.op),
            Esc(&c.path),
            Esc(c.failure.as_deref().unwrap_or("failed"))
        )?;
    }
    if run.cases.is_empty() {
        writeln!(
            err,
            "{shown}: error: no [[test]] cases, so nothing was tested (hint: add [[test]] cases with op, path and expect; see policies/README.md)"
        )?;
    }
    if !coverage {
        return Ok(());
    }
    for u in &run.uncovered {
        writeln!(
            out,
            "{shown}:{}: uncovered: rule `{}` decides no test case",
            u.line,
            Esc(&u.rule)
        )?;
    }
    if !run.content_rules.is_empty() {
        let names: Vec<String> = run
            .content_exercised
            .iter()
            .map(|r| Esc(r).to_string())
            .collect();
        writeln!(
            out,
            "{shown}: content rules: {} of {} decided some test case{}{}",
            run.content_exercised.len(),
            run.content_rules.len(),
            if names.is_empty() { "" } else { ": " },
            names.join(", ")
        )?;
    }
    Ok(())
}
