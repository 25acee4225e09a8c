//! Integration tests for the command line: help text, and refusing to start on a bad policy
//! or a bad workspace before serving anything.

use std::process::{Command, Stdio};

use crate::common::{TIMEOUT, bin, policy_with, run_cli, wait_output};

#[test]
fn top_level_help_names_serve() {
    let out = run_cli(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("serve"),
        "--help must list the serve command:\n{text}"
    );
}

#[test]
fn serve_help_explains_each_flag() {
    let out = run_cli(&["serve", "--help"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    for flag in [
        "--workspace",
        "--policy",
        "--transport",
        "--listen",
        "--audit-log",
        "--backup-dir",
    ] {
        let i = lines
            .iter()
            .position(|l| l.trim_start().starts_with(flag) || l.contains(&format!(", {flag}")))
            .unwrap_or_else(|| panic!("serve --help does not list {flag}:\n{text}"));
        // The explanation follows the flag on its line, or on the next line in long help.
        let rest = lines[i].split_once(flag).map_or("", |(_, r)| r).to_owned()
            + lines.get(i + 1).copied().unwrap_or("");
        let words = rest
            .split_whitespace()
            .filter(|w| !w.starts_with('<') && !w.starts_with('-'))
            .count();
        assert!(
            words >= 3,
            "serve --help lists {flag} without explaining it:\n{text}"
        );
    }
}

/// What `--policy`'s help must say of the built-in policy's binary handling, for each
/// `[limits] binary` mode.
const BINARY_HELP: [(&str, &str); 3] = [
    ("deny", "binary reads denied"),
    (
        "media",
        "binary reads only of images and audio (base64), every other binary file refused",
    ),
    ("base64", "any binary file read base64-encoded"),
];

/// `serve --help` and `acp --help` describe the built-in policy as policies/default.toml
/// (the text the binary embeds) has it: its binary mode and its size limits.
#[test]
fn help_describes_the_default_policy_as_it_is() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(repo.join("policies/default.toml")).expect("policy");
    let policy: toml::Table = toml::from_str(&text).expect("default policy is TOML");
    let limits = policy.get("limits").and_then(|l| l.as_table());
    let field = |k: &str| limits.and_then(|l| l.get(k));
    // Unset, `binary` is "deny" (policies/README.md).
    let mode = field("binary").and_then(|b| b.as_str()).unwrap_or("deny");
    let (read, write) = (
        field("max_read_bytes").and_then(|v| v.as_integer()),
        field("max_write_bytes").and_then(|v| v.as_integer()),
    );
    assert_eq!(read, write, "one size limit in the help, two in the policy");
    let mib = read.expect("max_read_bytes") / (1024 * 1024);
    for cmd in ["serve", "acp"] {
        let out = run_cli(&[cmd, "--help"]);
        assert!(out.status.success(), "{out:?}");
        // One line of words, however the help is wrapped.
        let help = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let (_, policy_help) = help
            .split_once("--policy")
            .unwrap_or_else(|| panic!("{cmd} --help has no --policy: {help}"));
        let policy_help = policy_help.split(" --").next().unwrap_or_default();
        for (m, phrase) in BINARY_HELP {
            assert_eq!(
                policy_help.contains(phrase),
                m == mode,
                "{cmd} --help on --policy, with binary = {mode:?} in the default policy: {policy_help}"
            );
        }
        assert!(
            policy_help.contains(&format!("{mib} MiB limits")),
            "{cmd} --help: {policy_help}"
        );
    }
}

/// Starts `serve` with `policy`, keeping stdin open: a bad policy must make it exit on its own.
fn serve_with_policy_text(policy: &str) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir ws");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, policy).expect("write policy");
    let mut child = Command::new(bin())
        .arg("serve")
        .arg("--workspace")
        .arg(&ws)
        .arg("--policy")
        .arg(&file)
        .arg("--audit-log")
        .arg(dir.path().join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(dir.path().join("backups"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    let out = wait_output(&mut child, TIMEOUT);
    (out, dir)
}

fn assert_refuses_policy(policy: &str, must_name: &str) {
    let (out, _dir) = serve_with_policy_text(policy);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "serve accepted an invalid policy (must name {must_name}); stderr:\n{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing may be served on an invalid policy: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(must_name),
        "the error must name {must_name:?}; stderr:\n{stderr}"
    );
}

#[test]
fn unknown_key_in_limits_is_a_load_error_naming_it() {
    let policy = policy_with(1000, 1000, "deny", "")
        .replace("max_read_bytes = 1000", "max_reed_bytes = 1000");
    assert_refuses_policy(&policy, "max_reed_bytes");
}

#[test]
fn unknown_key_in_rule_is_a_load_error_naming_it() {
    let policy =
        policy_with(1000, 1000, "deny", "").replacen("effect = \"allow\"", "efect = \"allow\"", 1);
    assert_refuses_policy(&policy, "efect");
}

#[test]
fn unknown_top_level_key_is_a_load_error_naming_it() {
    let policy = format!(
        "allow_everything = true\n{}",
        policy_with(1000, 1000, "deny", "")
    );
    assert_refuses_policy(&policy, "allow_everything");
}

#[test]
fn bad_glob_is_a_load_error_naming_the_key() {
    let policy =
        policy_with(1000, 1000, "deny", "").replacen("paths = [\"**\"]", "paths = [\"src/[a\"]", 1);
    assert_refuses_policy(&policy, "paths");
}

#[test]
fn bad_regex_is_a_load_error_naming_the_key() {
    let policy = policy_with(1000, 1000, "deny", "").replace(
        "patterns = []",
        r#"patterns = [{ id = "broken", regex = "(unclosed" }]"#,
    );
    assert_refuses_policy(&policy, "regex");
}

/// The secret-name patterns are compiled as one set on first use, not at start; each
/// pattern is still compiled alone when the policy is read, so a broken one is refused by
/// `serve` before anything is served and reported by `policy check` at its value.
#[test]
fn bad_secret_pattern_is_refused_by_serve_and_reported_by_policy_check() {
    let policy = policy_with(1000, 1000, "deny", "").replace(
        "patterns = []",
        r#"patterns = [{ id = "broken", regex = "(unclosed" }]"#,
    );
    assert_refuses_policy(&policy, "secret pattern `broken`: invalid regex");
    let (_, dir) = serve_with_policy_text(&policy);
    let file = dir.path().join("bad.toml");
    let out = run_cli(&["policy", "check", &file.to_string_lossy()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("bad.toml:5:38: error: secret pattern `broken`: invalid regex"),
        "{stdout}"
    );
}

/// The built-in content rules compile on first use, a policy's own content rules still
/// at start: a broken one (bad regex, or a true-positive example it misses) refuses to
/// start, before the audit log is written.
#[test]
fn bad_content_rule_still_refuses_to_start_before_the_audit_log_is_written() {
    let base = policy_with(1000, 1000, "deny", "");
    for (rule, must_name) in [
        (
            "id = \"broken\"\nregex = '''(unclosed'''\n",
            "invalid regex",
        ),
        (
            "id = \"missed\"\nregex = '''tok_[0-9]{6}'''\ntps = [\"tok_12\"]\n",
            "true-positive",
        ),
    ] {
        let policy = format!("{base}\n[content]\n[[content.rules]]\n{rule}");
        let (out, dir) = serve_with_policy_text(&policy);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(must_name), "{must_name:?}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing served: {out:?}");
        assert!(
            !dir.path().join("audit.jsonl").exists(),
            "no audit log before the policy is known good"
        );
    }
}

#[test]
fn bad_binary_mode_is_a_load_error() {
    // Not a class the issue requires to name its key; naming the bad value suffices.
    let policy = policy_with(1000, 1000, "maybe", "");
    assert_refuses_policy(&policy, "maybe");
}

#[test]
fn missing_policy_file_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().to_string_lossy().into_owned();
    let missing = dir.path().join("nope.toml").to_string_lossy().into_owned();
    let out = run_cli(&["serve", "--workspace", &ws, "--policy", &missing]);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_or_nonexistent_workspace_refuses_to_start() {
    let out = run_cli(&["serve"]);
    assert!(
        !out.status.success(),
        "serve without --workspace must fail: {out:?}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ghost = dir
        .path()
        .join("does-not-exist")
        .to_string_lossy()
        .into_owned();
    let out = run_cli(&["serve", "--workspace", &ghost]);
    assert!(
        !out.status.success(),
        "serve on a missing workspace must fail: {out:?}"
    );
    assert!(
        !out.stderr.is_empty(),
        "the failure must be explained on stderr"
    );
    assert!(out.stdout.is_empty());
}

/// A running `fsgate` whose audit log is in `state`, for the signal tests.
struct Running {
    child: std::process::Child,
    log: std::path::PathBuf,
    state: tempfile::TempDir,
    _ws: tempfile::TempDir,
}

impl Running {
    /// Starts `fsgate SUB --workspace W --audit-log L --backup-dir B ARGS...` and waits
    /// until its log holds a record of `kind` (then a moment more: the record is written
    /// before the signal handlers exist).
    fn start(sub: &str, args: &[&str], kind: &str) -> (Running, serde_json::Value) {
        let running = Running::spawn(sub, args);
        let t0 = std::time::Instant::now();
        let rec = loop {
            if let Some(r) = running.records().into_iter().find(|r| r["kind"] == kind) {
                break r;
            }
            assert!(
                t0.elapsed() < TIMEOUT,
                "no `{kind}` record: fsgate did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        std::thread::sleep(std::time::Duration::from_millis(500));
        (running, rec)
    }

    /// Starts `fsgate SUB ...` and returns at once.
    fn spawn(sub: &str, args: &[&str]) -> Running {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log = state.path().join("audit.jsonl");
        let child = Command::new(bin())
            .arg(sub)
            .arg("--workspace")
            .arg(ws.path())
            .arg("--audit-log")
            .arg(&log)
            .arg("--backup-dir")
            .arg(state.path().join("b"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Running {
            child,
            log,
            state,
            _ws: ws,
        }
    }

    fn records(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Sends SIGTERM and waits for the exit.
    fn sigterm(&mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
        let t0 = std::time::Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(t0.elapsed() < TIMEOUT, "fsgate did not exit after SIGTERM");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

#[test]
fn sigterm_at_any_moment_of_start_up_still_ends_with_a_stop_record() {
    // Regression: a signal between the `start` record and the handlers' installation
    // killed fsgate with no `stop` record. Now every start that was recorded is stopped
    // (exit 0, `stop` last, chain intact); a signal so early that the process had not yet
    // reached its own code kills it before it wrote anything.
    let mut clean = 0;
    let mut cases = 0;
    for extra in [
        &[][..],
        &["--transport", "mcp"],
        &["--transport", "ws", "--listen", "0"],
        &["--transport", "http", "--listen", "0"],
    ] {
        for delay_ms in [0u64, 0, 1, 2, 5, 10, 15, 20, 30, 50, 100] {
            cases += 1;
            let mut running = Running::spawn("serve", extra);
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            let status = running.sigterm();
            let recs = running.records();
            let what = format!("{extra:?} after {delay_ms} ms: {status:?}");
            if recs.is_empty() {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(
                    status.signal(),
                    Some(15),
                    "{what}: no record, yet not killed"
                );
                continue;
            }
            assert!(status.success(), "{what}");
            assert_eq!(
                recs.last().unwrap()["kind"],
                "stop",
                "{what}: {:?}",
                recs.last()
            );
            let out = run_cli(&["audit", "verify", &running.log.display().to_string()]);
            assert!(out.status.success(), "{what}: {out:?}");
            clean += 1;
        }
    }
    eprintln!("sigterm during start-up: {clean} of {cases} stopped cleanly, the rest before main");
    assert!(
        clean * 3 >= cases,
        "only {clean} of {cases} reached fsgate's own code"
    );
}

#[test]
fn sigterm_stops_every_transport_with_a_stop_record_and_a_final_checkpoint() {
    for extra in [
        &[][..],
        &["--transport", "mcp"],
        &["--transport", "ws", "--listen", "0"],
        &["--transport", "http", "--listen", "0"],
    ] {
        let (mut running, _) = Running::start("serve", extra, "start");
        let status = running.sigterm();
        let recs = running.records();
        assert!(status.success(), "{extra:?}: {status:?}");
        let last = recs.last().unwrap();
        assert_eq!(last["kind"], "stop", "{extra:?}: {last}");
        assert_eq!(last["details"]["reason"], "SIGTERM", "{extra:?}: {last}");
        let log = running.state.path().join("audit.jsonl");
        let out = run_cli(&["audit", "verify", "--json", &log.display().to_string()]);
        assert!(out.status.success(), "{extra:?}: {out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = report.to_string();
        assert!(
            text.contains("shutdown"),
            "{extra:?}: the final checkpoint is missing: {text}"
        );
    }
}

#[test]
fn check_sandbox_prints_what_landlock_enforced_and_exits_without_serving() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["serve", "--check-sandbox", "--workspace"])
        .arg(ws.path())
        .arg("--audit-log")
        .arg(state.path().join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.path().join("b"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_default();
    assert!(
        ["fully enforced", "partially enforced", "not enforced"]
            .iter()
            .any(|s| line.contains(s)),
        "{text}"
    );
    // Nothing was served: the log holds the start and the stop, no request.
    let log = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert!(!log.contains("\"kind\":\"request\""), "{log}");
}

#[test]
fn listen_without_the_ws_transport_is_refused_with_a_hint() {
    let ws = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args([
            "serve",
            "--transport",
            "mcp",
            "--listen",
            "0",
            "--workspace",
        ])
        .arg(ws.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--transport ws"));
    assert!(out.stdout.is_empty());
}

#[test]
fn sigterm_to_the_acp_proxy_ends_its_agent_and_closes_the_log() {
    let (mut running, started) = Running::start("acp", &["--", "/bin/sleep", "600"], "agent-start");
    let agent_pid = started["details"]["pid"].as_i64().unwrap();
    let status = running.sigterm();
    // Asked to stop, fsgate ends its agent and stops cleanly: exit 0 (the agent's own
    // status is in the log).
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        !std::path::Path::new(&format!("/proc/{agent_pid}")).exists(),
        "the agent outlived fsgate"
    );
    let recs = running.records();
    let exit = &recs[recs.len() - 2];
    assert_eq!(exit["kind"], "agent-exit", "{exit}");
    assert_eq!(exit["details"]["stoppedBy"], "SIGTERM", "{exit}");
    assert_eq!(recs[recs.len() - 1]["kind"], "stop");
}

/// A policy with three independent mistakes: `serve` and `acp` report all of them,
/// located, exactly as `policy check` does, and start nothing.
#[test]
fn serve_and_acp_report_every_policy_error_as_policy_check_does() {
    let bad = policy_with(1000, 1000, "deny", "")
        .replacen("paths = [\"**\"]", "paths = [\"src/[a\"]", 1)
        .replacen(
            "ops = [\"write\", \"delete\"]",
            "ops = [\"wirte\", \"delete\"]",
            1,
        )
        + "\n[[rule]]\nid = \"third\"\neffect = \"deny\"\nops = [\"read\"]\npaths = [\"x/{a\"]\n";
    let (out, dir) = serve_with_policy_text(&bad);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing served: {out:?}");
    let file = dir.path().join("bad.toml");
    let check = run_cli(&["policy", "check", file.to_str().expect("utf-8 temp path")]);
    let check_out = String::from_utf8_lossy(&check.stdout).into_owned();
    let errors: Vec<&str> = check_out
        .lines()
        .filter(|l| l.contains(": error: "))
        .collect();
    assert_eq!(errors.len(), 3, "policy check finds three: {check_out}");
    let name = file.display().to_string();
    for (line, want) in errors.iter().zip(["src/[a", "wirte", "x/{a"]) {
        assert!(
            line.starts_with(&format!("{name}:")) && line.contains(want),
            "{line}"
        );
        assert!(line.contains("(hint: "), "{line}");
        assert!(
            stderr.contains(line),
            "serve must report {line:?}:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("3 error(s)"),
        "a summary line counts them: {stderr}"
    );
    // `acp` reports the same, before any agent is started.
    let ws = dir.path().join("ws");
    let out = Command::new(bin())
        .args(["acp", "--workspace"])
        .arg(&ws)
        .arg("--policy")
        .arg(&file)
        .arg("--audit-log")
        .arg(dir.path().join("acp-audit.jsonl"))
        .arg("--backup-dir")
        .arg(dir.path().join("acp-backups"))
        .args(["--", "sh", "-c", "echo started > started"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run fsgate acp");
    let acp_err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{acp_err}");
    for line in &errors {
        assert!(
            acp_err.contains(line),
            "acp must report {line:?}:\n{acp_err}"
        );
    }
    assert!(!dir.path().join("started").exists(), "no agent started");
}

/// The policy's file name and text reach the terminal escaped, never as control codes.
#[test]
fn serve_policy_errors_are_escaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir ws");
    let file = dir.path().join("bad\x1b[2J\n.toml");
    std::fs::write(&file, "version = 1\n\"evil\x1b]8;;x\x07\" = 1\n").expect("write policy");
    let out = Command::new(bin())
        .arg("serve")
        .arg("--workspace")
        .arg(&ws)
        .arg("--policy")
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run fsgate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        !out.stderr.iter().any(|&b| b == 0x1b || b == 0x07),
        "{stderr:?}"
    );
    assert!(stderr.contains(r"bad\u{1b}[2J\n.toml"), "{stderr}");
    assert_eq!(
        stderr.lines().count(),
        2,
        "one finding, one summary: {stderr}"
    );
}
