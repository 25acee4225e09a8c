//! `fsgate policy ...`: check, explain, test, diff and schema, with their exit codes.
//!
//! Self-contained: `src/cli.rs` embeds [`PolicyCommand`] and calls [`run`]. Output is the
//! command's product and goes to stdout; problems with the command itself go to stderr.
//! Exit codes: 0 clean / passed / nothing loosens, 1 findings / failures / something
//! loosens, 2 a file is unreadable or invalid.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::content::ContentTraceStep;
use super::diff::item::{Direction, Item};
use super::diff::{
    DiffReport, FileScan, content_files, decision_items, diff, setting_items, sort_items,
    test_paths, workspace_paths,
};
use super::full_decision::{FullDecision, decide_access_with_content, effect_name};
use super::lint::{LintOptions, Severity, lint_file, only};
use super::testrun::run_cases;
use super::{Access, DEFAULT_DENY, Effect, EntryKind, PathFacts, Policy, TraceStep};
use fsgate_base::path::RelPath;
use fsgate_base::text::{Esc, EscPath, escape_for_humans};
use fsgate_decide::AccessStep;

/// Clean, all passed, nothing loosens.
pub(crate) const EXIT_OK: i32 = 0;
/// Findings, failed cases, uncovered rules (with `--fail-on-uncovered`), a loosening.
pub(crate) const EXIT_FINDINGS: i32 = 1;
/// A file is unreadable or not a valid policy, or the arguments are wrong.
pub(crate) const EXIT_INVALID: i32 = 2;

/// Workspace entries `policy diff --workspace` compares at most, by default.
const DEFAULT_MAX_PATHS: usize = 200_000;

// These doc comments are `--help` text: `[limits]`, `[audit]`... name policy sections,
// not links.
#[allow(rustdoc::broken_intra_doc_links)]
/// Policy authoring tools.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Lint policy files: each problem as `file:line:col: severity: message (hint: ...)`.
    ///
    /// Checks syntax, unknown keys and types, globs and regexes, dead and duplicate
    /// rules, write rights wider than read rights, allows that expose default secret
    /// names or .git, limits above sane ceilings, deny rules without a [[test]], and
    /// allows that reach fsgate's own files (the fixed floor).
    /// Exit 0 clean, 1 findings (errors or warnings), 2 unreadable or invalid.
    Check {
        /// Policy files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print the findings as one JSON document (for CI).
        #[arg(long)]
        json: bool,
        /// The workspace the policy will serve: report allows that reach the policy
        /// file, the audit log or the backups when those lie inside it.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Show which rule decides an operation on a path, and every rule considered, in
    /// evaluation order.
    ///
    /// Example: fsgate policy explain policies/default.toml --op read src/main.rs
    Explain {
        /// Policy file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Operation class (read, write, delete, list) or gateway operation (stat, ls,
        /// glob, tree, grep, edit, mkdir, rm), decided as the gateway decides it.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(fsgate_decide::ACCESS_NAMES))]
        op: String,
        /// Workspace-relative path (a leading `/` means the workspace root).
        path: String,
        /// Judge the path as a directory (default: a file).
        #[arg(long)]
        dir: bool,
        /// The file's size in bytes, for rules with min_size / max_size (for a write,
        /// the larger of its current and new size). Default: not known.
        #[arg(long, value_name = "BYTES")]
        size: Option<u64>,
        /// A file whose content to run the policy's [content] rules on, as if it were
        /// the content read or written.
        #[arg(long, value_name = "FILE")]
        content: Option<PathBuf>,
        /// With several workspaces served: decide in the workspace of this name (its
        /// rules scoped with `workspaces`, and the rules for every workspace).
        #[arg(long, value_name = "NAME")]
        workspace_name: Option<String>,
        /// Print the explanation as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the [[test]] cases in policy files: one line per failure with its line
    /// number, then `N passed, M failed`.
    Test {
        /// Policy files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// List the rules no test case exercised.
        #[arg(long)]
        coverage: bool,
        /// Exit 1 if some rule is not exercised by any test case (implies --coverage).
        #[arg(long)]
        fail_on_uncovered: bool,
        /// Print the results as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Show everything that loosens or tightens between two policies (for reviewing a
    /// change, or gating one in CI).
    ///
    /// Decisions of every operation class on every path of --workspace (or else on the
    /// paths the two policies' [[test]] cases name, and their parent directories);
    /// [limits]; secret-name patterns; content rules (with --workspace, also the files
    /// whose content one policy refuses and the other lets through); the rules by id;
    /// and [audit], [backup], [sandbox], [agent], [acp], [ws] key by key. Each line is
    /// marked `loosens`, `tightens` or `changes` (no clear direction).
    /// Exit 0 nothing loosens, 1 something loosens, 2 invalid input.
    Diff {
        /// The policy in force.
        #[arg(value_name = "OLD")]
        old: PathBuf,
        /// The proposed policy.
        #[arg(value_name = "NEW")]
        new: PathBuf,
        /// Compare on this directory's real tree (symlinks are not followed), and scan
        /// its files' content (up to the larger read limit) with both policies' rules.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Stop the workspace walk after this many entries.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PATHS)]
        max_paths: usize,
        /// With several workspaces served: compare the rules as they apply in the
        /// workspace of this name.
        #[arg(long, value_name = "NAME")]
        workspace_name: Option<String>,
        /// Print the differences as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of policy files (policies/schema.json), for editors.
    Schema,
}

/// Runs a policy command, printing to stdout and stderr; returns the exit code.
pub fn run(cmd: PolicyCommand) -> i32 {
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    run_to(cmd, &mut out, &mut err)
}

/// Runs a policy command, printing to `out` (the product) and `err` (problems).
pub(crate) fn run_to(cmd: PolicyCommand, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let result = match cmd {
        PolicyCommand::Check {
            files,
            json,
            workspace,
        } => check(&files, json, LintOptions { workspace }, out),
        PolicyCommand::Explain {
            file,
            op,
            path,
            dir,
            size,
            content,
            workspace_name,
            json,
        } => {
            let kind = if dir { EntryKind::Dir } else { EntryKind::File };
            let facts = PathFacts { kind, size };
            let at = (path.as_str(), workspace_name.as_deref());
            explain(&file, &op, at, facts, content.as_deref(), json, out, err)
        }
        PolicyCommand::Test {
            files,
            coverage,
            fail_on_uncovered,
            json,
        } => test(
            &files,
            coverage || fail_on_uncovered,
            fail_on_uncovered,
            json,
            out,
            err,
        ),
        PolicyCommand::Diff {
            old,
            new,
            workspace,
            max_paths,
            workspace_name,
            json,
        } => {
            let on = (workspace.as_deref(), workspace_name.as_deref());
            policy_diff(&old, &new, on, max_paths, json, out, err)
        }
        PolicyCommand::Schema => write!(out, "{}", super::schema::schema_text()).map(|_| EXIT_OK),
    };
    match result {
        Ok(code) => code,
        // A reader that stopped early (`| head`) needs no message; the exit still says
        // the output was not all written.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_INVALID,
        Err(e) => {
            let _ = writeln!(err, "fsgate policy: cannot write output: {e}");
            EXIT_INVALID
        }
    }
}

/// For a policy file that does not load (`serve`, `acp`): writes each of its errors as
/// `policy check` does, `file:line:col: error: message (hint: ...)`, and returns how
/// many it wrote (0 when the linter finds none, and the caller's own message stands).
pub fn write_load_errors(path: &Path, err: &mut dyn Write) -> std::io::Result<usize> {
    let report = lint_file(path, &LintOptions::default());
    let mut n = 0;
    for f in report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
    {
        writeln!(err, "{f}")?;
        n += 1;
    }
    Ok(n)
}

type Res = std::io::Result<i32>;

fn check(files: &[PathBuf], json: bool, options: LintOptions, out: &mut dyn Write) -> Res {
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

fn load(path: &Path, err: &mut dyn Write) -> std::io::Result<Option<(Policy, String)>> {
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

#[allow(clippy::too_many_arguments)]
fn explain(
    file: &Path,
    op: &str,
    (path, workspace): (&str, Option<&str>),
    facts: PathFacts,
    content: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Res {
    let Some((policy, _)) = load(file, err)? else {
        return Ok(EXIT_INVALID);
    };
    let policy = match workspace {
        Some(name) => policy.for_workspace(name),
        None => policy,
    };
    let Some(op) = Access::parse(op) else {
        writeln!(err, "fsgate policy explain: unknown op `{}`", Esc(op))?;
        return Ok(EXIT_INVALID);
    };
    let rel = match RelPath::parse_rooted(path) {
        Ok(p) => p,
        Err(e) => {
            writeln!(
                err,
                "fsgate policy explain: path `{}`: {}",
                Esc(path),
                Esc(&e.to_string())
            )?;
            return Ok(EXIT_INVALID);
        }
    };
    let bytes = match content.map(std::fs::read) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            writeln!(
                err,
                "fsgate policy explain: cannot read {}: {}",
                EscPath(content.unwrap_or(Path::new(""))),
                Esc(&e.to_string())
            )?;
            return Ok(EXIT_INVALID);
        }
    };
    let x = Explained::new(&policy, op, &rel, facts, bytes.as_deref());
    if json {
        writeln!(out, "{:#}", x.json(file))?;
        return Ok(EXIT_OK);
    }
    x.print(out)?;
    Ok(EXIT_OK)
}

/// Everything `explain` shows about one operation on one path.
struct Explained<'p> {
    policy: &'p Policy,
    op: Access,
    rel: &'p RelPath,
    facts: PathFacts,
    path_decision: super::Decision<'p>,
    steps: Vec<(AccessStep, Vec<TraceStep>)>,
    not_reached: Vec<&'p str>,
    final_d: FullDecision,
    content_note: Option<String>,
    content_trace: Vec<ContentTraceStep>,
}

impl<'p> Explained<'p> {
    fn new(
        policy: &'p Policy,
        op: Access,
        rel: &'p RelPath,
        facts: PathFacts,
        bytes: Option<&[u8]>,
    ) -> Self {
        let (d, steps) = policy.explain_access(op, rel, &facts);
        let not_reached = steps
            .iter()
            .rev()
            .find(|(s, _)| !d.allowed() || s.class == op.primary())
            .map(|(s, trace)| not_reached(policy, s, &facts, trace))
            .unwrap_or_default();
        let final_d = decide_access_with_content(policy, op, rel, &facts, bytes);
        let class = op.primary();
        let (content_note, content_trace) = match (bytes, policy.content_scanner()) {
            (None, _) => (None, Vec::new()),
            (Some(_), None) => (
                Some("the policy has no [content] section: content is not scanned".into()),
                Vec::new(),
            ),
            (Some(_), Some(sc)) if !sc.applies_to(class) => (
                Some(format!(
                    "content is not scanned for {} operations",
                    class.as_str()
                )),
                Vec::new(),
            ),
            (Some(_), Some(_)) if d.effect == Effect::Deny => (
                Some("content is not scanned: the path decision already denies".into()),
                Vec::new(),
            ),
            (Some(b), Some(sc)) => (None, sc.explain(rel, b)),
        };
        Explained {
            policy,
            op,
            rel,
            facts,
            path_decision: d,
            steps,
            not_reached,
            final_d,
            content_note,
            content_trace,
        }
    }

    fn json(&self, file: &Path) -> serde_json::Value {
        let d = &self.path_decision;
        let steps: Vec<_> = self
            .steps
            .iter()
            .map(|(s, trace)| {
                serde_json::json!({
                    "class": s.class, "path": s.path.as_str(), "dir": s.dir,
                    "why": s.why, "trace": trace,
                })
            })
            .collect();
        let trace = self
            .steps
            .last()
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
        serde_json::json!({
            "policy": file.display().to_string(),
            "op": self.op.as_str(),
            "path": self.rel.as_str(),
            "dir": self.facts.kind == EntryKind::Dir,
            "size": self.facts.size,
            "decision": self.final_d,
            "path_decision": { "effect": d.effect, "rule": d.rule, "reason": d.reason },
            "steps": steps,
            "trace": trace,
            "also_matching_not_reached": self.not_reached,
            "content_note": self.content_note,
            "content_trace": self.content_trace,
        })
    }

    fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        print_explain(out, self)?;
        if let Some(note) = &self.content_note {
            writeln!(out, "\ncontent: {}", Esc(note))?;
        }
        let final_d = &self.final_d;
        if !self.content_trace.is_empty() {
            writeln!(out, "\ncontent rules, in order (first finding decides):")?;
            let width = self
                .content_trace
                .iter()
                .map(|t| shown_len(&t.rule))
                .max()
                .unwrap_or(0);
            for t in &self.content_trace {
                let mark = if t.hit && t.rule == final_d.rule {
                    "  <= decides"
                } else {
                    ""
                };
                writeln!(out, "  {:width$}  {}{mark}", Esc(&t.rule), Esc(&t.note))?;
            }
        }
        writeln!(
            out,
            "\ndecision: {} by {} ({})",
            effect_name(final_d.effect).to_uppercase(),
            Esc(&final_d.rule),
            Esc(&final_d.reason)
        )
    }
}

/// Rules the evaluation of `step` never reached that would also match: shadowed
/// alternatives.
fn not_reached<'p>(
    policy: &'p Policy,
    step: &AccessStep,
    facts: &PathFacts,
    trace: &[TraceStep],
) -> Vec<&'p str> {
    let facts = if step.dir {
        PathFacts::kind(EntryKind::Dir)
    } else {
        *facts
    };
    let reached: Vec<&str> = trace.iter().map(|t| t.rule.as_str()).collect();
    policy
        .rules()
        .iter()
        .filter(|r| !reached.contains(&r.id.as_str()))
        .filter(|r| {
            only(policy, vec![(*r).clone()])
                .decide_with(step.class, &step.path, &facts)
                .rule
                == r.id
        })
        .map(|r| r.id.as_str())
        .collect()
}

fn print_explain(out: &mut dyn Write, x: &Explained<'_>) -> std::io::Result<()> {
    let shown = if x.rel.is_root() { "/" } else { x.rel.as_str() };
    let size = x
        .facts
        .size
        .map(|s| format!(", {s} bytes"))
        .unwrap_or_default();
    writeln!(
        out,
        "{} {} ({}{size}) under {} (sha256 {}):",
        x.op.as_str(),
        Esc(shown),
        if x.facts.kind == EntryKind::Dir {
            "directory"
        } else {
            "file"
        },
        Esc(x.policy.origin()),
        x.policy.sha256().get(..12).unwrap_or("")
    )?;
    let d = &x.final_d;
    writeln!(
        out,
        "  {} by {}: {}",
        effect_name(d.effect).to_uppercase(),
        Esc(&d.rule),
        Esc(&d.reason)
    )?;
    if d.effect == Effect::Ask {
        writeln!(
            out,
            "  (a person is asked when the request comes; no answer within {} s means deny)",
            x.policy.ask_timeout().as_secs()
        )?;
    }
    let decider = x.path_decision.rule;
    let composite = x.steps.len() > 1 || x.op != Access::Class(x.op.primary());
    for (step, trace) in &x.steps {
        if composite {
            let p = if step.path.is_root() {
                "/"
            } else {
                step.path.as_str()
            };
            writeln!(
                out,
                "\nstep: {} on {} ({}{}):",
                step.class.as_str(),
                Esc(p),
                step.why,
                if step.dir { ", as a directory" } else { "" }
            )?;
        }
        print_trace(out, trace, decider, d.rule == decider)?;
    }
    if decider != DEFAULT_DENY && !x.not_reached.is_empty() {
        writeln!(
            out,
            "\nalso matching, but not reached (an earlier rule decided):"
        )?;
        for r in &x.not_reached {
            writeln!(out, "       {}", Esc(r))?;
        }
    }
    Ok(())
}

/// One evaluation, rule by rule.
fn print_trace(
    out: &mut dyn Write,
    trace: &[TraceStep],
    decider: &str,
    path_decides: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nevaluation order (secret names, then deny rules, then ask rules, then allow rules; the first match decides):"
    )?;
    let width = trace.iter().map(|t| shown_len(&t.rule)).max().unwrap_or(0);
    for (i, t) in trace.iter().enumerate() {
        let matched = if t.matched { "MATCH" } else { "-" };
        let mark = match (t.matched && t.rule == decider, path_decides) {
            (true, true) => "  <= decides",
            (true, false) => "  <= decides the path; the content rules below refuse",
            _ => "",
        };
        writeln!(
            out,
            "  {:>3}  {:width$}  {:5}  {:5}  {}{mark}",
            i + 1,
            Esc(&t.rule),
            effect_name(t.effect),
            matched,
            Esc(&t.note)
        )?;
    }
    Ok(())
}

fn test(
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
    fn add(&mut self, run: &super::testrun::TestRun) {
        self.passed += run.passed();
        self.failed += run.failed();
        self.uncovered += run.uncovered.len();
        self.empty += usize::from(run.cases.is_empty());
    }
}

fn test_json(f: &Path, run: &super::testrun::TestRun, coverage: bool) -> serde_json::Value {
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
    run: &super::testrun::TestRun,
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

#[allow(clippy::too_many_arguments)]
fn policy_diff(
    old: &Path,
    new: &Path,
    (workspace, name): (Option<&Path>, Option<&str>),
    max_paths: usize,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Res {
    let (Some((a, ta)), Some((b, tb))) = (load(old, err)?, load(new, err)?) else {
        return Ok(EXIT_INVALID);
    };
    let (a, b) = match name {
        Some(n) => (a.for_workspace(n), b.for_workspace(n)),
        None => (a, b),
    };
    let (paths, truncated, source) = match workspace {
        Some(ws) => match workspace_paths(ws, max_paths) {
            Ok((p, t)) => (p, t, format!("the tree of {}", ws.display())),
            Err(e) => {
                writeln!(
                    err,
                    "fsgate policy diff: cannot walk {}: {}",
                    EscPath(ws),
                    Esc(&e.to_string())
                )?;
                return Ok(EXIT_INVALID);
            }
        },
        None => (
            test_paths(&[&a, &b]),
            false,
            "the paths named by both policies' tests".into(),
        ),
    };
    let mut report: DiffReport = diff(&a, &b, &paths);
    report.truncated = truncated;
    let files = workspace.map(|ws| content_files(&a, &b, ws, &paths));
    let mut items = decision_items(&report);
    items.extend(setting_items(&a, &ta, &b, &tb));
    if let Some(f) = &files {
        items.extend(f.items.iter().cloned());
    }
    sort_items(&mut items);
    let count = |d: Direction| items.iter().filter(|i| i.direction == d).count();
    let (loosens, tightens, changes) = (
        count(Direction::Loosens),
        count(Direction::Tightens),
        count(Direction::Changes),
    );
    if json {
        let doc = serde_json::json!({
            "source": source,
            "loosens": loosens,
            "tightens": tightens,
            "changes": changes,
            "items": items,
            "decisions": report,
            "content_files": files.as_ref().map(|f| serde_json::json!({ "scanned": f.scanned, "skipped": f.skipped })),
        });
        writeln!(out, "{doc:#}")?;
    } else {
        print_items(out, &items)?;
        print_diff_summary(out, &report, files.as_ref(), &source)?;
        writeln!(
            out,
            "{loosens} loosen(s), {tightens} tighten(s), {changes} other change(s)"
        )?;
    }
    Ok(if loosens > 0 { EXIT_FINDINGS } else { EXIT_OK })
}

/// One line per item: `loosens  area  subject: old -> new`, policy text escaped.
fn print_items(out: &mut dyn Write, items: &[Item]) -> std::io::Result<()> {
    let area_w = items.iter().map(|i| shown_len(&i.area)).max().unwrap_or(0);
    for i in items {
        writeln!(
            out,
            "{:8} {:area_w$}  {}: {} -> {}",
            i.direction.as_str(),
            Esc(&i.area),
            Esc(&i.subject),
            Esc(&i.old),
            Esc(&i.new)
        )?;
    }
    Ok(())
}

fn print_diff_summary(
    out: &mut dyn Write,
    r: &DiffReport,
    files: Option<&FileScan>,
    source: &str,
) -> std::io::Result<()> {
    let widened = r.changes.iter().filter(|c| c.widens()).count();
    let narrowed = r.changes.len() - widened;
    writeln!(
        out,
        "{} decision(s) changed: {widened} loosened, {narrowed} tightened; {} keep their effect under another rule; compared {} path(s) x 4 ops from {}{}",
        r.changes.len(),
        r.rule_changes.len(),
        r.paths,
        Esc(source),
        if r.truncated {
            " (walk truncated: raise --max-paths)"
        } else {
            ""
        }
    )?;
    if let Some(f) = files {
        writeln!(
            out,
            "content scanned in {} file(s) with both policies' rules ({} skipped: over the read limits or 64 MiB, unreadable or not regular)",
            f.scanned, f.skipped
        )?;
    }
    Ok(())
}

/// How many characters `s` takes once escaped (for column widths).
fn shown_len(s: &str) -> usize {
    escape_for_humans(s).chars().count()
}

#[cfg(test)]
mod tests;
