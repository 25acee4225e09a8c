//! `fsgate-bench`: see the crate documentation and docs/benchmarks.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fsgate_bench::mono::Mono;
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
        /// A monorepo made by `gen-monorepo` with its default counts and seed, for the
        /// `mono_*` workloads; without it they run on a small one the driver generates.
        #[arg(long)]
        monorepo: Option<PathBuf>,
        /// `fd`, for the monorepo comparison (`fd` or `fdfind`).
        #[arg(long)]
        fd: Option<PathBuf>,
    },
    /// Generates the monorepo (deterministic from the seed) under OUT, which must not
    /// exist; prints its counts.
    GenMonorepo {
        /// Where to create it (under /tmp, not in a repository).
        #[arg(long)]
        out: PathBuf,
        /// Files, secret files included.
        #[arg(long, default_value_t = Mono::FULL.files)]
        files: usize,
        /// Directories, the top-level packages included.
        #[arg(long, default_value_t = Mono::FULL.dirs)]
        dirs: usize,
        /// Top-level packages.
        #[arg(long, default_value_t = Mono::FULL.packages)]
        packages: usize,
        #[arg(long, default_value_t = Mono::FULL.seed)]
        seed: u64,
        /// Threads writing files.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
}

fn main() -> ExitCode {
    let cmd = Cli::parse().cmd;
    if let Cmd::GenMonorepo {
        out,
        files,
        dirs,
        packages,
        seed,
        threads,
    } = cmd
    {
        return gen_monorepo(
            &out,
            Mono {
                files,
                dirs,
                packages,
                seed,
            },
            threads,
        );
    }
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
        monorepo,
        fd,
    } = cmd
    else {
        return ExitCode::from(2);
    };
    let cfg = Config {
        fsgate,
        reference: reference.map(|js| (node, js)),
        rg,
        work,
        reps: reps.unwrap_or(if quick { 1 } else { 3 }),
        quick,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        only,
        monorepo,
        fd,
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

fn gen_monorepo(out: &std::path::Path, m: Mono, threads: usize) -> ExitCode {
    let t0 = std::time::Instant::now();
    match m.build(out, threads) {
        Ok(()) => {
            println!(
                "{}: {} files ({} secret) in {} directories, seed {}, {:.1} s",
                out.display(),
                m.files,
                m.secrets().len(),
                m.dir_count(),
                m.seed,
                t0.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fsgate-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
