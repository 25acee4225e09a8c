//! `fsgate-audit`: the `fsgate audit` commands (verify, show, report, prune, proofs,
//! keygen, shipping status) built from this crate alone, so a reviewer can check a log
//! with a program that holds no gateway, no doors and no async runtime:
//! `cargo run -p fsgate-audit -- verify LOG`.

use clap::Parser;

/// Check and read fsgate audit logs.
#[derive(Debug, Parser)]
#[command(name = "fsgate-audit", version)]
struct Cli {
    #[command(subcommand)]
    command: fsgate_audit::cli::AuditCommand,
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(fsgate_audit::cli::run(cli.command));
}
