//! A confined agent runs in a session of its own, so no hang-up reaches it when the
//! gateway dies: it must die with the gateway instead of living on unsupervised.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Waits up to `limit` for `cond`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// The pid of the process whose parent is `parent` and whose command line is `cmdline`.
fn child_of(parent: u32, cmdline: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let ppid: u32 = stat
            .rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        (ppid == parent && cmd.split(|b| *b == 0).any(|a| a == cmdline.as_bytes())).then_some(pid)
    })
}

#[test]
fn a_confined_agent_dies_with_its_gateway() {
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let marker = "7391.25"; // an argument no other process has
    let mut gate = Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["acp", "--confine-agent", "--workspace"])
        .arg(ws.path())
        .arg("--audit-log")
        .arg(state.path().join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.path().join("backups"))
        .args(["--", "sleep", marker])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn fsgate");
    let mut agent = None;
    assert!(
        eventually(Duration::from_secs(10), || {
            agent = child_of(gate.id(), marker);
            agent.is_some()
        }),
        "the agent (sleep {marker}) did not start"
    );
    let agent = agent.expect("agent pid");
    gate.kill().expect("kill -9 the gateway");
    let _ = gate.wait();
    let proc_dir = format!("/proc/{agent}");
    let gone = || {
        std::fs::read_to_string(format!("{proc_dir}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    };
    assert!(
        eventually(Duration::from_secs(5), gone),
        "the agent {agent} outlived its gateway"
    );
}
