//! `fsgate-bench`: see the crate documentation and docs/benchmarks.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fsgate_bench::suite::{self, Config};

#[derive(Parser)]
#[command(
    name = "fsgate-bench",
    about = "Benchmark fsgate against the reference MCP filesystem server; every answer is checked"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every workload on every server, repetitions alternating the servers, medians.
    Suite {
        /// The fsgate binary.
        #[arg(long)]
        fsgate: PathBuf,
        /// The reference server's dist/index.js (run as `node FILE ROOT`); without it,
        /// fsgate alone.
        #[arg(long)]
        reference: Option<PathBuf>,
        /// The node binary for the reference server.
        #[arg(long, default_value = "node")]
        node: PathBuf,
        /// ripgrep, for the search comparison.
        #[arg(long)]
        rg: Option<PathBuf>,
        /// Directory for the trees, server state and logs (created; its tree copies are
        /// replaced).
        #[arg(long)]
        work: PathBuf,
        /// Repetitions (medians across them); 1 in quick mode unless given.
        #[arg(long)]
        reps: Option<usize>,
        /// Tiny counts and trees: proves in seconds that everything runs and checks.
        #[arg(long)]
        quick: bool,
        /// Write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the report as a Markdown section here.
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Only these workloads (comma-separated names, e.g. `read_seq,stat`); the disk's
        /// fdatasync figure is measured with `read_seq`.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

fn main() -> ExitCode {
    let Cmd::Suite {
        fsgate,
        reference,
        node,
        rg,
        work,
        reps,
        quick,
        json,
        markdown,
        only,
    } = Cli::parse().cmd;
    let cfg = Config {
        fsgate,
        reference: reference.map(|js| (node, js)),
        rg,
        work,
        reps: reps.unwrap_or(if quick { 1 } else { 3 }),
        quick,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        only,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fsgate-bench: runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match rt.block_on(suite::run(cfg)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fsgate-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let md = report.markdown();
    println!("{md}");
    let mut ok = report.all_ran();
    if let Some(p) = markdown
        && let Err(e) = std::fs::write(&p, &md)
    {
        eprintln!("fsgate-bench: {}: {e}", p.display());
        ok = false;
    }
    if let Some(p) = json {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(&p, text) {
            eprintln!("fsgate-bench: {}: {e}", p.display());
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
