//! The agent's end: its stderr relayed to the last line, what it started ended, the
//! `agent-exit` record's details and fsgate's exit code.

use std::process::ExitCode;

use super::relay::StoppedBy;
use fsgate_doors::proxy::AgentEnd;

/// Relays the agent's stderr to ours, escaped and marked, noting the paths it says
/// were denied.
pub(super) fn copy_agent_stderr(
    child: &mut std::process::Child,
    noted: fsgate_sandbox::denied::Denials,
) -> Option<std::thread::JoinHandle<()>> {
    child.stderr.take().map(|e| {
        std::thread::spawn(move || {
            fsgate_base::text::copy_escaped_noting(e, std::io::stderr(), "agent: ", |line| {
                noted.note_line(line)
            })
        })
    })
}

/// Ends what the agent started (nothing may run or write after the stop record) and
/// lets the copy of its stderr finish: the first details of the `agent-exit` record.
pub(super) fn end_tree(
    tree: &mut fsgate_sandbox::agent_tree::AgentTree,
    agent_stderr: Option<std::thread::JoinHandle<()>>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut details = serde_json::Map::new();
    match tree.end() {
        Ok(left) => details.insert("treeKilled".into(), left.into()),
        Err(e) => details.insert("treeError".into(), e.into()),
    };
    finish_copy(agent_stderr);
    details
}

/// Lets the copy of the agent's stderr write what the agent left (a process the agent
/// started may hold the pipe open: then give up after a moment).
fn finish_copy(copy: Option<std::thread::JoinHandle<()>>) {
    let Some(copy) = copy else { return };
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while !copy.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How the agent ended, in the `agent-exit` record's details, and fsgate's exit code.
/// `failed` is told the agent's end before the exit code is chosen.
pub(super) fn agent_exit(
    result: std::io::Result<AgentEnd>,
    stopped_by: &StoppedBy,
    details: &mut serde_json::Map<String, serde_json::Value>,
    failed: impl FnOnce(&AgentEnd),
) -> ExitCode {
    let end = match result {
        Ok(end) => end,
        Err(e) => {
            fsgate_base::text::eprint_line(&format!("fsgate: relay failed: {e}"));
            details.insert("error".into(), e.to_string().into());
            return ExitCode::FAILURE;
        }
    };
    let status = end.status;
    tracing::info!(%status, "agent exited");
    details.insert("status".into(), status.to_string().into());
    details.insert("code".into(), status.code().into());
    failed(&end);
    match stopped_by.get() {
        Some(sig) => {
            details.insert("stoppedBy".into(), (*sig).into());
            ExitCode::SUCCESS
        }
        None if end.killed_after_eof => {
            details.insert("stoppedBy".into(), "end-of-input".into());
            killed_after_eof_exit()
        }
        None => exit_code_of(status),
    }
}

/// `fsgate acp`'s status when it had to kill an agent that outlived the end of its
/// input (as `timeout(1)` exits when it had to end its command).
pub const EXIT_AGENT_KILLED_AFTER_EOF: u8 = 124;

/// Says that the agent ignored the end of its input and was killed; the exit code.
fn killed_after_eof_exit() -> ExitCode {
    fsgate_base::text::eprint_line(&format!(
        "fsgate: the agent was still running {} s after its input ended; fsgate killed it (exit {EXIT_AGENT_KILLED_AFTER_EOF})",
        fsgate_doors::proxy::GRACE.as_secs()
    ));
    ExitCode::from(EXIT_AGENT_KILLED_AFTER_EOF)
}

/// The agent's exit status as ours: its code, or 128 + signal number.
fn exit_code_of(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(255)),
        _ => ExitCode::FAILURE,
    }
}
