//! `fsgate asks`: the questions `ask` rules put under `fsgate run`, listed and answered
//! from another terminal than the command's (docs/run.md). Each running `fsgate run`
//! of the workspace listens on a socket of its own under the workspace's state
//! directory (`fsgate_view::asks`); a socket nobody listens on any more is removed.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use super::exit::fail;
use fsgate_base::text::escape_for_humans;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("answer").args(["allow", "allow_run", "reject"])))]
pub(super) struct AsksArgs {
    /// The workspace the runs serve, or a directory inside it (default: the current
    /// directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    workspace: PathBuf,
    /// Print the waiting questions as JSON (one object per running `fsgate run`).
    #[arg(long)]
    json: bool,
    /// Allow question ID this once.
    #[arg(long, value_name = "ID")]
    allow: Option<String>,
    /// Allow question ID, and the same rule and class for the rest of the run.
    #[arg(long, value_name = "ID")]
    allow_run: Option<String>,
    /// Refuse question ID (the process gets EACCES).
    #[arg(long, value_name = "ID")]
    reject: Option<String>,
}

/// The longest answer read from a run.
const MAX_REPLY: u64 = 1 << 20;

pub(super) fn asks(args: AsksArgs) -> ExitCode {
    let dir = match asks_dir(&args.workspace) {
        Ok(dir) => dir,
        Err(e) => return fail(&e),
    };
    let answer = [
        (&args.allow, "allow_once"),
        (&args.allow_run, "allow_always"),
        (&args.reject, "reject_once"),
    ]
    .into_iter()
    .find_map(|(id, kind)| id.as_ref().map(|id| (id.clone(), kind)));
    match answer {
        Some((id, kind)) => answer_one(&dir, &id, kind),
        None => list(&dir, args.json),
    }
}

/// Where the runs of the workspace at or above `workspace` listen: the nearest
/// directory from `workspace` up that has runs (`fsgate asks` in a subdirectory of the
/// workspace finds its runs), else `workspace`'s own.
fn asks_dir(workspace: &Path) -> Result<PathBuf, String> {
    let root = std::fs::canonicalize(workspace).map_err(|e| {
        let shown = fsgate_base::text::EscPath(workspace);
        format!("cannot use workspace {shown}: {e}")
    })?;
    let no_state = || "no state directory: neither XDG_STATE_HOME nor HOME is set".to_owned();
    let own = fsgate_view::asks::dir(&root).ok_or_else(no_state)?;
    let with_runs = (root.ancestors())
        .filter_map(fsgate_view::asks::dir)
        .find(|dir| sockets(dir).iter().any(|s| listening(s)));
    Ok(with_runs.unwrap_or(own))
}

/// Whether a run listens at `socket` (a dead one is removed, so that it hides no run
/// farther up).
fn listening(socket: &Path) -> bool {
    connect(socket).is_some()
}

/// A connection to the run listening at `socket`; None if nobody listens. A socket
/// left by a run that ended (a killed gateway cannot remove its own) is removed.
fn connect(socket: &Path) -> Option<UnixStream> {
    let (_dir, at) = fsgate_view::asks::short(socket).ok()?;
    match UnixStream::connect(at) {
        Ok(conn) => Some(conn),
        Err(e) => {
            if e.kind() == std::io::ErrorKind::ConnectionRefused {
                let _ = std::fs::remove_file(socket);
            }
            None
        }
    }
}

/// Prints what every run of the workspace waits for; a run that listens but does not
/// answer is said on stderr (exit 1): its questions may wait still.
fn list(dir: &Path, as_json: bool) -> ExitCode {
    let mut runs: Vec<Value> = Vec::new();
    let mut code = ExitCode::SUCCESS;
    for socket in sockets(dir) {
        match ask(&socket, &serde_json::json!({"request": "list"})) {
            Reached::Answered(run) => runs.push(run),
            Reached::NotRunning => {}
            Reached::Silent(why) => {
                let run = socket.file_stem().unwrap_or_default().to_string_lossy();
                let run = escape_for_humans(&run);
                fsgate_base::text::eprint_line(&format!(
                    "fsgate: run {run} did not answer ({why}): its questions are not listed"
                ));
                code = ExitCode::from(1);
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        let _ = writeln!(out, "{}", Value::Array(runs));
        return code;
    }
    let questions: Vec<&Value> = runs
        .iter()
        .filter_map(|r| r["questions"].as_array())
        .flatten()
        .collect();
    if questions.is_empty() {
        let _ = writeln!(out, "no question waits");
    }
    for q in questions {
        let s = |k: &str| escape_for_humans(q[k].as_str().unwrap_or("")).into_owned();
        let _ = writeln!(
            out,
            "{}  {} {}  (rule {}: {})\n    asked by {}; refused after {} s without an answer",
            s("id"),
            s("op"),
            s("path"),
            s("rule"),
            s("reason"),
            s("process"),
            q["timeoutSecs"]
        );
    }
    code
}

/// Answers question `id` (`SESSION:N`) with `kind`.
fn answer_one(dir: &Path, id: &str, kind: &str) -> ExitCode {
    let parsed = id
        .split_once(':')
        .filter(|(s, _)| fsgate_base::state::valid_workspace_name(s))
        .and_then(|(s, n)| Some((s, n.parse::<u64>().ok()?)));
    let Some((session, n)) = parsed else {
        return fail("a question's id is SESSION:N, as `fsgate asks` lists it");
    };
    let socket = dir.join(format!("{session}.sock"));
    let request = serde_json::json!({"request": "answer", "id": n, "answer": kind});
    match ask(&socket, &request) {
        Reached::Answered(r) if r["ok"] == true => ExitCode::SUCCESS,
        Reached::Answered(r) => fail(&escape_for_humans(r["error"].as_str().unwrap_or("refused"))),
        Reached::NotRunning => fail(&format!("no run {} is running", escape_for_humans(session))),
        Reached::Silent(why) => fail(&format!(
            "run {} did not answer ({why}); the answer may or may not have reached it: list the questions again to see",
            escape_for_humans(session)
        )),
    }
}

/// The sockets of the workspace's runs (`run-*.sock`).
fn sockets(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sock"))
        .collect();
    found.sort();
    found
}

/// What one request to a run got.
enum Reached {
    /// Its answer.
    Answered(Value),
    /// Nobody listens (a socket left by a run that ended is removed).
    NotRunning,
    /// A run listens but gave no answer: why.
    Silent(String),
}

/// One request to the run listening at `socket`, and what came of it.
fn ask(socket: &Path, request: &Value) -> Reached {
    let Some(mut conn) = connect(socket) else {
        return Reached::NotRunning;
    };
    let mut exchange = || -> std::io::Result<Value> {
        let timeout = Some(Duration::from_secs(10));
        conn.set_read_timeout(timeout)?;
        conn.set_write_timeout(timeout)?;
        let mut line = request.to_string();
        line.push('\n');
        conn.write_all(line.as_bytes())?;
        let mut reply = String::new();
        BufReader::new((&conn).take(MAX_REPLY)).read_line(&mut reply)?;
        if reply.is_empty() {
            return Err(std::io::Error::other("it closed the connection (busy)"));
        }
        serde_json::from_str(&reply).map_err(std::io::Error::other)
    };
    match exchange() {
        Ok(v) => Reached::Answered(v),
        Err(e) => Reached::Silent(e.to_string()),
    }
}
