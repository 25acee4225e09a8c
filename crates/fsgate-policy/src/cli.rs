//! `fsgate policy ...`: check, explain, test, diff and schema, with their exit codes.
//!
//! Self-contained: `src/cli.rs` embeds [`PolicyCommand`] and calls [`run`]. Output is the
//! command's product and goes to stdout; problems with the command itself go to stderr.
//! Exit codes: 0 clean / passed / nothing loosens, 1 findings / failures / something
//! loosens, 2 a file is unreadable or invalid.

mod cases;
mod check;
mod columns;
mod diff;
mod exit;
mod explain;
mod load;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::lint::{LintOptions, Severity, lint_file};
use crate::{EntryKind, PathFacts};
use exit::{EXIT_INVALID, EXIT_OK};

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
        } => check::check(&files, json, LintOptions { workspace }, out),
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
            explain::explain(&file, &op, at, facts, content.as_deref(), json, out, err)
        }
        PolicyCommand::Test {
            files,
            coverage,
            fail_on_uncovered,
            json,
        } => cases::test(
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
            diff::policy_diff(&old, &new, on, max_paths, json, out, err)
        }
        PolicyCommand::Schema => write!(out, "{}", crate::schema::schema_text()).map(|_| EXIT_OK),
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

#[cfg(test)]
mod tests;
