//! `fsgate audit ...`: the clap definitions and the exit codes of verify, show, prune,
//! keygen, and (in `ship::cli`) ship-status and import-syslog. Output goes to stdout
//! (it is the command's product), diagnostics to stderr.
//!
//! This file holds the command line and where each command goes; `verify`: `verify`
//! and `report`; `show`: `show`'s filter and format; `prune`: `prune`; `exit`: the
//! exit code of a failure or a written product.

mod exit;
mod prune;
mod show;
mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use super::keys;
use super::show::ShowFilter;
use exit::{fail, written};
use prune::prune_log;
use show::{show_cmd, show_filter, show_options};
use verify::{report_cmd, verify_cmd};

/// The `fsgate audit` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AuditCommand {
    /// Check a log or a rotated series (files or directories): exit 0 intact,
    /// 1 tampered (names the first bad record), 2 unreadable.
    Verify {
        /// Log files (an active file stands for its whole series: the rotated files
        /// beside it too), or directories holding them (a workspace's state directory
        /// stands for the `audit/` directory in it).
        #[arg(required_unless_present = "workspace", value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
        /// Also read this workspace's default log (under your state dir, where `serve`
        /// and `acp` put it unless told otherwise).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Remember the verified head in STATE, and prove next time that the log still
        /// extends it.
        #[arg(long, value_name = "STATE")]
        trusted: Option<PathBuf>,
        /// The public key that must have signed checkpoints and tombstones (64 hex digits,
        /// or a file holding hex or a PEM PUBLIC KEY).
        #[arg(long, value_name = "KEY")]
        pubkey: Option<String>,
        /// Another checkpoint file to check the log against (e.g. the sink's copy);
        /// may be repeated.
        #[arg(long = "checkpoint", value_name = "FILE")]
        checkpoints: Vec<PathBuf>,
    },
    /// Print records, filtered: a table fitted to the terminal by default (agent-chosen
    /// text escaped, long paths cut in the middle with …), or JSON lines, or CSV; or
    /// counts (--stats); --follow keeps printing new ones.
    Show {
        /// Log files (an active file stands for its whole series: the rotated files
        /// beside it too), or directories holding them (a workspace's state directory
        /// stands for the `audit/` directory in it).
        #[arg(required_unless_present = "workspace", value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
        /// Also read this workspace's default log (under your state dir, where `serve`
        /// and `acp` put it unless told otherwise).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Only records at or after this time (RFC 3339 or YYYY-MM-DD, UTC).
        #[arg(long)]
        since: Option<String>,
        /// Only records before this time (RFC 3339 or YYYY-MM-DD, UTC).
        #[arg(long)]
        until: Option<String>,
        /// Only this operation (or lifecycle kind, e.g. `start`).
        #[arg(long)]
        op: Option<String>,
        /// Only `allow` or `deny`.
        #[arg(long)]
        decision: Option<String>,
        /// Only records whose path (or rename target) matches this glob.
        #[arg(long, value_name = "GLOB")]
        path: Option<String>,
        /// Only this session: its requests, and the records that name it in their
        /// details (a run's start and end, an answer to an `ask`, a staging).
        #[arg(long)]
        session: Option<String>,
        /// Only records of the process with this pid (`fsgate run`'s processes, and
        /// the stdio peer of `serve`).
        #[arg(long, value_name = "PID")]
        pid: Option<u32>,
        /// Only records of processes running this command: the executable's file name
        /// (`cat`) or path (`/usr/bin/cat`), or the command name where no executable
        /// could be read.
        #[arg(long, value_name = "NAME")]
        exe: Option<String>,
        /// Print the matching records as JSON lines (unchanged, still verifiable).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV for spreadsheets.
        #[arg(long)]
        csv: bool,
        /// Print counts instead: requests, refusals by rule, changes by path, sessions
        /// (a table, or JSON with --json).
        #[arg(long, conflicts_with_all = ["csv", "follow"])]
        stats: bool,
        /// Keep printing new records as the gateway appends them (across rotations)
        /// until interrupted.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Columns the table fits in (0: no limit). Default: $COLUMNS, else the
        /// terminal's width, else 160.
        #[arg(long, value_name = "N")]
        width: Option<usize>,
    },
    /// Write one self-contained HTML report: the verdict of verification first, then
    /// the period, sessions, what was read (per file and per session, secrets refused
    /// apart), a timeline, refusals by rule, every change per file with its hashes and
    /// backup, and the policies in force. Exit 0 intact, 1 tampered,
    /// 2 unreadable or not written.
    Report {
        /// Log files (an active file stands for its whole series: the rotated files
        /// beside it too), or directories holding them.
        #[arg(required_unless_present = "workspace", value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
        /// Also read this workspace's default log (every chain in it: one per gateway
        /// that served the workspace at the same time).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Where to write the page (`-`: standard output).
        #[arg(long, value_name = "FILE", required = true)]
        html: PathBuf,
        /// The public key that must have signed checkpoints and tombstones (as for
        /// `verify`).
        #[arg(long, value_name = "KEY")]
        pubkey: Option<String>,
    },
    /// Remove rotated files whose records are all older than DATE, leaving a (signed)
    /// tombstone; the active file is never removed and the chain must verify first.
    Prune {
        /// Cut-off (RFC 3339 or YYYY-MM-DD, UTC).
        #[arg(long, value_name = "DATE")]
        before: String,
        /// The active log file, or its directory.
        #[arg(required_unless_present = "workspace", value_name = "FILE|DIR")]
        path: Option<PathBuf>,
        /// Prune this workspace's default log (under your state dir) instead.
        #[arg(long, value_name = "DIR", conflicts_with = "path")]
        workspace: Option<PathBuf>,
        /// Key that signs the tombstone (the `[audit] signing_key`).
        #[arg(long, value_name = "KEY")]
        signing_key: Option<PathBuf>,
        /// Say what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write a proof that one record is in the log (its Merkle inclusion path and the
    /// signed checkpoint, C2SP tlog-proof layout), or with --consistency that a later
    /// checkpoint extends an earlier one. Exit 0 written, 2 not.
    Prove {
        /// The log's active file (its rotated files beside it are read too). With
        /// --consistency it may be left out when NEW is the log's `NAME.checkpoint`.
        #[arg(value_name = "LOG", required_unless_present = "consistency")]
        log: Option<PathBuf>,
        /// The record's seq.
        #[arg(value_name = "SEQ", required_unless_present = "consistency")]
        seq: Option<u64>,
        /// Prove that checkpoint file NEW extends checkpoint file OLD (the last line of
        /// each that carries a Merkle tree).
        #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], conflicts_with = "seq")]
        consistency: Option<Vec<PathBuf>>,
        /// The checkpoint to prove against (default: the log's `NAME.checkpoint`).
        #[arg(long, value_name = "FILE", conflicts_with = "consistency")]
        checkpoint: Option<PathBuf>,
        /// Write the proof here (default: stdout).
        #[arg(long, value_name = "PROOF")]
        out: Option<PathBuf>,
    },
    /// Check a proof written by `prove` with nothing but the log's public key: exit 0
    /// valid, 1 not, 2 unreadable.
    CheckProof {
        /// The proof file.
        #[arg(value_name = "PROOF")]
        proof: PathBuf,
        /// The public key that must have signed the checkpoint (64 hex digits, or a file
        /// holding hex or a PEM PUBLIC KEY).
        #[arg(long, value_name = "KEY")]
        pubkey: String,
    },
    /// Where shipping to the `[audit] ship` collectors stands, per log and destination:
    /// the seq delivered, the log's head, how far behind, the state and the last error.
    ShipStatus(super::ship::cli::ShipStatusArgs),
    /// Rebuild a log from a syslog collector's files: drop duplicates, order by seq,
    /// name every gap; exit 0 complete, 1 gaps or conflicts, 2 unreadable. Then run
    /// `fsgate audit verify` on the result.
    ImportSyslog(super::ship::cli::ImportSyslogArgs),
    /// Create a signing key file (seed hex, mode 0600) and print its public key.
    Keygen {
        /// Where to write the key; never overwritten.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

/// Runs one subcommand; returns the process exit code.
pub fn run(cmd: AuditCommand) -> i32 {
    let mut stdout = std::io::stdout().lock();
    run_to(cmd, &mut stdout)
}

/// Runs one subcommand, printing its product to `out`.
pub(crate) fn run_to(cmd: AuditCommand, out: &mut dyn Write) -> i32 {
    match cmd {
        AuditCommand::Verify {
            paths,
            workspace,
            json,
            trusted,
            pubkey,
            checkpoints,
        } => on_logs("verify", (&paths, workspace.as_deref()), |paths| {
            verify_cmd(paths, json, trusted, pubkey.as_deref(), checkpoints, out)
        }),
        AuditCommand::Show {
            paths,
            workspace,
            since,
            until,
            op,
            decision,
            path,
            session,
            pid,
            exe,
            json,
            csv,
            stats,
            follow,
            width,
        } => match show_filter(since, until, op, decision, path, session).map(|f| ShowFilter {
            pid,
            exe,
            ..f
        }) {
            Ok(filter) => on_logs("show", (&paths, workspace.as_deref()), |paths| {
                let opts = show_options((json, csv), width, stats, follow);
                show_cmd(paths, &filter, &opts, out)
            }),
            Err(e) => fail("show", &e),
        },
        AuditCommand::Report {
            paths,
            workspace,
            html,
            pubkey,
        } => on_logs("report", (&paths, workspace.as_deref()), |paths| {
            report_cmd(paths, &html, pubkey.as_deref(), out)
        }),
        AuditCommand::Prune {
            before,
            path,
            workspace,
            signing_key,
            dry_run,
        } => prune_log(
            &before,
            (path, workspace.as_deref()),
            signing_key.as_deref(),
            dry_run,
            out,
        ),
        AuditCommand::Prove {
            log,
            seq,
            consistency,
            checkpoint,
            out: file,
        } => super::proof_cli::prove(
            super::proof_cli::ProveArgs {
                log,
                seq,
                consistency,
                checkpoint,
                out: file,
            },
            out,
        ),
        AuditCommand::CheckProof { proof, pubkey } => {
            super::proof_cli::check_proof(&proof, &pubkey, out)
        }
        AuditCommand::ShipStatus(args) => super::ship::cli::ship_status(args, out),
        AuditCommand::ImportSyslog(args) => super::ship::cli::import_syslog(args, out),
        AuditCommand::Keygen { out: file } => keygen_cmd(&file, out),
    }
}

/// Runs `command` on the logs the paths name (or the workspace's); the error of
/// `name` when none can be found.
fn on_logs(
    name: &str,
    (paths, workspace): (&[PathBuf], Option<&Path>),
    command: impl FnOnce(&[PathBuf]) -> i32,
) -> i32 {
    match super::locate::log_paths(paths, workspace) {
        Ok(paths) => command(&paths),
        Err(e) => fail(name, &e),
    }
}

/// `audit keygen`: a new signing key written to `file`, its public key printed.
fn keygen_cmd(file: &Path, out: &mut dyn Write) -> i32 {
    match keys::generate_key_file(file) {
        Ok(pk) => written(out.write_all(format!("{}\n", hex::encode(pk.to_bytes())).as_bytes())),
        Err(e) => fail("keygen", &e.to_string()),
    }
}
