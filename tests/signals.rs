//! SIGTERM and SIGINT from the first instant (issue 10, point 4): sent right after
//! spawning (no sleep) and after a few short delays, on every mode, fsgate exits 0 and
//! its audit log ends with a `stop` record and verifies.
//!
//! Only a signal that lands before fsgate's `main` has run its first line (while the
//! kernel and the dynamic loader start the process) meets the default action: the
//! process dies of the signal with nothing opened; the test accepts that only when no
//! audit log exists.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{TIMEOUT, bin, run_cli, wait_output};

/// How long a stop may take: a hang never ends. Once, in a whole-suite run on a loaded
/// two-core machine, a stop exceeded the usual 10 s (never reproduced alone, in 55
/// sweeps): the longer wait tells slowness from a hang, and the stderr shown says where.
const STOP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Delays between spawning and signalling, in milliseconds.
const DELAYS_MS: [u64; 5] = [0, 1, 5, 20, 50];

/// The mode's arguments after the common `--workspace/--audit-log/--backup-dir`.
fn mode_args(mode: &str) -> (&'static str, Vec<&'static str>) {
    match mode {
        "mcp" => ("serve", vec!["--transport", "mcp"]),
        "ws" => (
            "serve",
            vec!["--transport", "ws", "--listen", "127.0.0.1:0"],
        ),
        "acp-proxy" => ("acp", vec!["--", "sleep", "30"]),
        _ => ("serve", vec![]),
    }
}

/// When to send the signal.
#[derive(Debug, Clone, Copy)]
enum When {
    /// This long after spawning (zero: at once).
    After(Duration),
    /// The moment the audit log file appears (polled without sleeping): start-up is then
    /// between opening the log and serving, the window issue 10 found unguarded.
    LogCreated,
}

/// What one run ended with: true for a clean stop, false for death before `main`.
fn stop_once(mode: &str, sig: rustix::process::Signal, when: When) -> bool {
    let dirs = tempfile::tempdir().expect("tempdir");
    let (ws, log) = (
        dirs.path().join("ws"),
        dirs.path().join("audit/audit.jsonl"),
    );
    std::fs::create_dir(&ws).expect("workspace");
    let (sub, extra) = mode_args(mode);
    // A runner that started this suite in the background (a script's `cmd &`) passes
    // SIGINT on ignored, and fsgate keeps an inherited ignore: each run starts as from a
    // terminal (the test process's own disposition is what the child inherits at fork).
    if sig == rustix::process::Signal::INT {
        sigint(libc::SIG_DFL);
    }
    let mut child = Command::new(bin())
        .arg(sub)
        .arg("--workspace")
        .arg(&ws)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(dirs.path().join("backups"))
        .args(extra)
        // Its `stopping` line shows, in a hang's report, whether the stop had begun.
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    match when {
        When::After(d) if !d.is_zero() => std::thread::sleep(d),
        When::After(_) => {}
        When::LogCreated => {
            let t0 = std::time::Instant::now();
            while !log.exists() {
                assert!(t0.elapsed() < TIMEOUT, "{mode}: no audit log appeared");
                std::hint::spin_loop();
            }
        }
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, sig).expect("signal fsgate");
    let _stdin = child.stdin.take(); // kept open: only the signal may end fsgate
    let out = wait_output(&mut child, STOP_TIMEOUT);
    let what = format!(
        "{mode} at {when:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.signal() == Some(sig.as_raw()) {
        assert!(
            !log.exists(),
            "died of the signal after opening its log: {what}"
        );
        return false;
    }
    assert_eq!(out.status.code(), Some(0), "{what}");
    assert_log_ends_with_stop(&log, &what);
    true
}

/// Sets this (test) process's SIGINT disposition, which children inherit.
#[allow(unsafe_code)]
fn sigint(disposition: libc::sighandler_t) {
    // SAFETY: SIG_DFL and SIG_IGN install no handler code; signal(2) only sets the
    // disposition.
    let old = unsafe { libc::signal(libc::SIGINT, disposition) };
    assert_ne!(old, libc::SIG_ERR, "signal(SIGINT)");
}

/// Makes `cmd`'s child start with SIGINT ignored.
#[allow(unsafe_code)]
fn ignore_sigint_in_child(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: runs in the forked child before exec; signal(2) is async-signal-safe and
    // installs no handler code.
    unsafe {
        cmd.pre_exec(|| {
            if libc::signal(libc::SIGINT, libc::SIG_IGN) == libc::SIG_ERR {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn assert_log_ends_with_stop(log: &Path, what: &str) {
    let text =
        std::fs::read_to_string(log).unwrap_or_else(|e| panic!("no audit log ({e}): {what}"));
    let last: serde_json::Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("empty audit log: {what}"));
    assert_eq!(last["kind"], "stop", "last record {last}: {what}");
    let out = run_cli(&["audit", "verify", log.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "audit verify: {}{}: {what}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sweep(mode: &str, sig: rustix::process::Signal) {
    // Every run must end cleanly or (before `main`) die with nothing opened; the
    // zero-delay case, the one that matters most, runs a few times.
    let mut clean = 0;
    for ms in DELAYS_MS {
        for _ in 0..if ms == 0 { 3 } else { 1 } {
            clean += usize::from(stop_once(mode, sig, When::After(Duration::from_millis(ms))));
        }
    }
    // A log that exists means start-up is under way: the stop must be clean, each time.
    for _ in 0..3 {
        assert!(
            stop_once(mode, sig, When::LogCreated),
            "{mode}: died after opening its log"
        );
    }
    eprintln!(
        "{mode} {sig:?}: {clean} of {} timed signals stopped cleanly, the rest landed before main",
        DELAYS_MS.len() + 2
    );
}

#[test]
fn sigterm_at_any_instant_stops_serve_acp_cleanly() {
    sweep("acp", rustix::process::Signal::TERM);
}

#[test]
fn sigterm_at_any_instant_stops_serve_mcp_cleanly() {
    sweep("mcp", rustix::process::Signal::TERM);
}

#[test]
fn sigterm_at_any_instant_stops_serve_ws_cleanly() {
    sweep("ws", rustix::process::Signal::TERM);
}

#[test]
fn sigterm_at_any_instant_stops_the_acp_proxy_cleanly() {
    sweep("acp-proxy", rustix::process::Signal::TERM);
}

#[test]
fn sigint_at_any_instant_stops_serve_cleanly() {
    sweep("acp", rustix::process::Signal::INT);
}

#[test]
fn a_sigint_ignored_at_start_stays_ignored_and_sigterm_still_stops() {
    let dirs = tempfile::tempdir().expect("tempdir");
    let (ws, log) = (
        dirs.path().join("ws"),
        dirs.path().join("audit/audit.jsonl"),
    );
    std::fs::create_dir(&ws).expect("workspace");
    // As a script's `fsgate serve &` starts it: SIGINT ignored in the child alone (the
    // test process's disposition is shared by the tests running beside this one).
    let mut cmd = Command::new(bin());
    ignore_sigint_in_child(&mut cmd);
    let spawned = cmd
        .args(["serve", "--workspace"])
        .arg(&ws)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(dirs.path().join("backups"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = spawned.expect("spawn fsgate");
    let t0 = std::time::Instant::now();
    while !log.exists() {
        assert!(t0.elapsed() < TIMEOUT, "no audit log appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "fsgate stopped on a SIGINT it was started with ignored"
    );
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let _stdin = child.stdin.take();
    let out = wait_output(&mut child, STOP_TIMEOUT);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_log_ends_with_stop(&log, "SIGINT ignored, then SIGTERM");
}
