//! The arguments and exit codes of `fsgate audit ship-status` and `fsgate audit
//! import-syslog`.

use std::io::Write;
use std::path::PathBuf;

/// `fsgate audit ship-status`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShipStatusArgs {
    /// Log files, or directories holding them (a workspace's state directory stands for
    /// the `audit/` directory in it).
    #[arg(required_unless_present_any = ["workspace", "audit_log"], value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
    /// The active log file (as given to `serve --audit-log`).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Also read this workspace's default log (under your state dir).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fsgate audit import-syslog`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportSyslogArgs {
    /// Files a syslog collector wrote (one message a line; the record is found in each
    /// line however the collector's template framed it).
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// The log file to write (must not exist); check it with `fsgate audit verify`.
    #[arg(long, value_name = "LOG")]
    pub out: PathBuf,
    /// Keep only the lines of this log (its id: the PROCID of fsgate's messages), when
    /// several gateways ship to one file.
    #[arg(long, value_name = "ID")]
    pub log_id: Option<String>,
    /// Print the findings as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ship-status`: exit 0, or 2 when no log could be read.
pub(crate) fn ship_status(args: ShipStatusArgs, out: &mut dyn Write) -> i32 {
    let mut paths = args.paths;
    paths.extend(args.audit_log);
    let paths = match crate::locate::log_paths(&paths, args.workspace.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail("ship-status", &e),
    };
    let logs = match super::status::collect(&paths) {
        Ok(l) => l,
        Err(e) => return fail("ship-status", &e),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&logs)
            .map(|s| s + "\n")
            .unwrap_or_default()
    } else {
        super::status::render(&logs)
    };
    if out.write_all(text.as_bytes()).is_ok() {
        0
    } else {
        2
    }
}

/// Runs `import-syslog`: exit 0 complete, 1 gaps or conflicts (the log is written with
/// what was found), 2 unreadable input or unwritable output.
pub(crate) fn import_syslog(args: ImportSyslogArgs, out: &mut dyn Write) -> i32 {
    match super::import::import(&args.inputs, &args.out, args.log_id.as_deref()) {
        Ok(report) => {
            for line in report.render(&args.out).lines() {
                fsgate_base::text::eprint_line(line);
            }
            if args.json {
                let text = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
                if out.write_all(text.as_bytes()).is_err() {
                    return 2;
                }
            }
            report.exit_code()
        }
        Err(e) => fail("import-syslog", &e),
    }
}

fn fail(cmd: &str, e: &str) -> i32 {
    fsgate_base::text::eprint_line(&format!("fsgate audit {cmd}: {e}"));
    2
}
