//! The agent's whole process tree ends with its session: a process the agent started in
//! a session of its own (`setsid`, reparented away from the agent) is killed when the
//! session ends, before fsgate's `stop` record, and the `agent-start` record says how
//! the tree was kept together.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Lines in `file` (0 if it does not exist).
fn lines(file: &std::path::Path) -> usize {
    std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
}

/// Whether `pid` is running (a zombie waiting for its reaper counts as ended).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_process_the_agent_left_running_ends_with_the_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ws, out, pidfile) = (
        dir.path().join("ws"),
        dir.path().join("out"),
        dir.path().join("pid"),
    );
    std::fs::create_dir(&ws).expect("mkdir");
    // The "agent": starts a writer in a session of its own, then ends with its input.
    let script = format!(
        "setsid sh -c 'echo $$ > {p}; while :; do echo x >> {o}; sleep 0.01; done' \
         </dev/null >/dev/null 2>&1 & exec cat >/dev/null",
        p = pidfile.display(),
        o = out.display()
    );
    let log = dir.path().join("log").join("audit.jsonl");
    let mut gate = Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["acp", "--workspace"])
        .arg(&ws)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(dir.path().join("backups"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    let started = std::time::Instant::now();
    while lines(&out) < 5 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lines(&out) >= 5, "the agent's writer did not start");
    let writer = std::fs::read_to_string(&pidfile)
        .expect("pid file")
        .trim()
        .to_owned();
    let _ = gate.stdin.take().map(|mut s| s.flush());
    let done = gate.wait_with_output().expect("fsgate ends");
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{stderr}");
    let at_stop = lines(&out);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        lines(&out),
        at_stop,
        "the writer went on after the session: {stderr}"
    );
    assert!(
        !running(&writer),
        "the writer {writer} outlived the session"
    );
    let records = std::fs::read_to_string(&log).expect("audit log");
    assert!(
        records.contains(r#""processTree":{"cgroup":"#),
        "the start record names the agent's cgroup: {records}"
    );
    let exit = records
        .lines()
        .find(|l| l.contains(r#""kind":"agent-exit""#))
        .expect("agent-exit");
    // The writer, and the `sleep` it may be running.
    let killed: serde_json::Value = serde_json::from_str(exit).expect("JSON record");
    let killed = killed["details"]["treeKilled"].as_u64().unwrap_or(0);
    assert!((1..=2).contains(&killed), "{exit}");
    assert!(stderr.contains("ends with the session"), "{stderr}");
}
