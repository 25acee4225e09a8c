//! Every output a person reads escapes what an agent chose: file names, session ids and
//! methods holding terminal escapes (CSI, OSC 8 hyperlinks), BEL, newlines, C1 controls,
//! bidi overrides and zero-width characters reach tables, CSV, stderr messages and logs
//! only as `\u{..}` escapes; `audit show --json` keeps the records byte for byte.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::common::{Gate, TIMEOUT, run_cli};

/// A file name an agent might choose: a bidi override (`doc<RLO>gnp.sh` reads as
/// `dochs.png`), a screen clear, an OSC 8 hyperlink ended by BEL, a newline that forges
/// a line, a C1 CSI and zero-width characters.
const NAME: &str = "doc\u{202e}gnp.sh\u{1b}[2J\u{1b}]8;;mailto:a@b\u{7}link\u{1b}]8;;\u{7}\nFORGED\u{9b}31m\u{200b}z\u{feff}";
/// How [`NAME`] must read once escaped.
const NAME_SHOWN: &str = "doc\\u{202e}gnp.sh\\u{1b}[2J\\u{1b}]8;;mailto:a@b\\u{7}link\\u{1b}]8;;\\u{7}\\nFORGED\\u{9b}31m\\u{200b}z\\u{feff}";
/// A session id an agent might choose.
const SESSION: &str = "s\u{1b}]8;;http://x\u{7}\u{202e}\nFORGED";
const SESSION_SHOWN: &str = "s\\u{1b}]8;;http://x\\u{7}\\u{202e}\\nFORGED";

/// Fails if `text` (a command's stdout or stderr) holds a raw control, format or
/// separator character other than the newlines that end its lines, or a line forged by
/// a newline inside a name.
fn assert_clean(what: &str, text: &str) {
    let bad = crate::common::raw_controls(text);
    assert!(bad.is_empty(), "{what}: raw {bad:?} in:\n{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("FORGED")),
        "{what}: a forged line:\n{text}"
    );
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("output is UTF-8")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A gateway whose agent overwrote [`NAME`] in session [`SESSION`]: one backup, and
/// audit records naming both.
fn hostile_gate() -> Gate {
    let g = Gate::start();
    g.put(NAME, "old\n");
    g.ok(
        "fs/write_text_file",
        json!({"sessionId": SESSION, "path": g.abs(NAME), "content": "new\n"}),
    );
    g
}

fn stopped(mut g: Gate) -> Gate {
    g.close_stdin();
    let status = g.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", g.stderr());
    g.join_readers();
    g
}

#[test]
fn backup_list_escapes_file_names() {
    let g = stopped(hostile_gate());
    let dir = g.state.join("backups");
    let out = run_cli(&["backup", "list", "--backup-dir", s(&dir)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert_clean("backup list", &stdout);
    assert!(stdout.contains(NAME_SHOWN), "{stdout}");
    // --json is machine output: the name exactly.
    let out = run_cli(&["backup", "list", "--backup-dir", s(&dir), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(v["rel_path"], NAME);
}

#[test]
fn audit_show_table_and_csv_escape_and_json_is_byte_exact() {
    let g = stopped(hostile_gate());
    let log = s(&g.audit_log).to_owned();
    // --width 0: the whole name (a table fitted to a terminal cuts long paths).
    for (args, what) in [(vec!["--width", "0"], "table"), (vec!["--csv"], "csv")] {
        let mut all = vec!["audit", "show", log.as_str()];
        all.extend(args);
        let out = run_cli(&all);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        assert_clean(what, &stdout);
        assert!(stdout.contains(NAME_SHOWN), "{what}:\n{stdout}");
    }
    let out = run_cli(&["audit", "show", "--csv", &log, "--session", SESSION]);
    assert!(
        text(&out.stdout).contains(SESSION_SHOWN),
        "{}",
        text(&out.stdout)
    );
    let out = run_cli(&["audit", "show", &log, "--json"]);
    let file = std::fs::read(&g.audit_log).expect("audit log");
    assert_eq!(out.stdout, file, "--json prints the records byte for byte");
    let named = String::from_utf8_lossy(&file)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["path"] == NAME && r["session"] == SESSION)
        .count();
    assert!(named >= 1, "the record keeps the exact name and session");
}

#[test]
fn audit_verify_escapes_what_it_names() {
    let g = stopped(hostile_gate());
    // A log kept under a name as hostile as a file's, then tampered with.
    let dir = g.state.join(format!("logs-{NAME}"));
    std::fs::create_dir(&dir).expect("mkdir");
    let log = dir.join("audit.jsonl");
    let body = std::fs::read_to_string(&g.audit_log).expect("log");
    let tampered = body.replacen("\"decision\":\"allow\"", "\"decision\":\"deny\"", 1);
    assert_ne!(body, tampered);
    std::fs::write(&log, tampered).expect("write");
    let out = run_cli(&["audit", "verify", s(&log)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_clean("audit verify", &stdout);
    assert!(stdout.contains(&format!("logs-{NAME_SHOWN}")), "{stdout}");
}

#[test]
fn policy_diff_on_a_workspace_escapes_file_names() {
    let ws = tempfile::tempdir().expect("tempdir");
    std::fs::write(ws.path().join(NAME), "x").expect("write");
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let out = run_cli(&[
        "policy",
        "diff",
        s(&policies.join("default.toml")),
        s(&policies.join("readonly.toml")),
        "--workspace",
        s(ws.path()),
    ]);
    let stdout = text(&out.stdout);
    // A pure tightening: exit 0.
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_clean("policy diff", &stdout);
    assert!(
        stdout.contains(&format!("tightens decision  write {NAME_SHOWN}:")),
        "{stdout}"
    );
}

#[test]
fn policy_explain_and_test_escape_paths_and_rule_text() {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let out = run_cli(&[
        "policy",
        "explain",
        s(&policies.join("default.toml")),
        "--op",
        "read",
        NAME,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_clean("policy explain", &stdout);
    assert!(stdout.contains(NAME_SHOWN), "{stdout}");
    // A [[test]] case that fails, naming the hostile path, in a file with a hostile name.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(format!("{NAME}.toml"));
    let case = serde_json::to_string(NAME).expect("quote");
    let policy = format!(
        "version = 1\n[[rule]]\nid = \"r\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"**\"]\n\n[[test]]\nop = \"read\"\npath = {case}\nexpect = \"deny\"\n"
    );
    std::fs::write(&file, policy).expect("write");
    let out = run_cli(&["policy", "test", s(&file)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert_clean("policy test", &stdout);
    assert!(
        stdout.contains(&format!("FAIL read {NAME_SHOWN}")),
        "{stdout}"
    );
    let out = run_cli(&["policy", "check", s(&file)]);
    assert_clean("policy check", &text(&out.stdout));
    assert_clean("policy check stderr", &text(&out.stderr));
}

#[test]
fn serve_logs_at_debug_escape_sessions_methods_and_paths() {
    for level in ["fsgate=debug", "fsgate=trace"] {
        let g = Gate::with_env(&[("RUST_LOG", level)]);
        g.put(NAME, "x\n");
        g.ok(
            "fs/read_text_file",
            json!({"sessionId": SESSION, "path": g.abs(NAME)}),
        );
        let _ = g.call(
            "fs/read_text_file",
            json!({"sessionId": SESSION, "path": g.abs(&format!("{NAME}/missing"))}),
        );
        g.send_raw(&json!({"jsonrpc": "2.0", "method": SESSION}).to_string());
        let g = stopped(g);
        let stderr = g.stderr();
        assert_clean(level, &stderr);
        assert!(stderr.contains(SESSION_SHOWN), "{level}:\n{stderr}");
    }
}

/// Runs `args`, which must fail saying so (on stderr, or for `audit verify` on stdout)
/// cleanly, naming the hostile text escaped (`shown`).
fn cli_error_showing(args: &[&str], shown: &str) {
    let out: Output = run_cli(args);
    assert!(!out.status.success(), "{args:?} should fail");
    let said = text(&out.stderr) + &text(&out.stdout);
    assert_clean(&format!("{args:?}"), &said);
    assert!(said.contains(shown), "{args:?}:\n{said}");
}

fn cli_error(args: &[&str]) {
    cli_error_showing(args, NAME_SHOWN);
}

#[test]
fn cli_errors_naming_a_hostile_path_are_escaped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing: PathBuf = tmp.path().join(NAME);
    let missing = s(&missing);
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    cli_error(&["serve", "--workspace", missing]);
    cli_error(&["audit", "show", missing]);
    cli_error(&["audit", "verify", missing]);
    cli_error(&["policy", "explain", missing, "--op", "read", "a"]);
    cli_error(&["policy", "diff", missing, s(&policies.join("default.toml"))]);
    let (ws, store) = (tmp.path().join("ws"), tmp.path().join("store"));
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::create_dir(&store).expect("mkdir");
    // This message quotes the name with `{:?}` first: escaped twice, still clean.
    cli_error_showing(
        &[
            "backup",
            "restore",
            "--workspace",
            s(&ws),
            "--backup-dir",
            s(&store),
            NAME,
        ],
        "gnp.sh\\\\u{1b}[2J",
    );
}

#[test]
fn an_agents_own_stderr_is_escaped_by_fsgate_acp() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (ws, state) = (tmp.path().join("ws"), tmp.path().join("state"));
    std::fs::create_dir(&ws).expect("mkdir");
    // The agent says something ordinary, then tries to drive the terminal, then exits.
    // (Its own newlines stay line breaks: they are how it writes lines.)
    let script = "printf 'ready\\n%s\\n' \"$X\" >&2";
    let mut child = std::process::Command::new(crate::common::bin())
        .args(["acp", "--workspace", s(&ws), "--audit-log"])
        .arg(state.join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.join("backups"))
        .args(["--", "sh", "-c", script])
        .env("X", NAME)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fsgate acp");
    let out = crate::common::wait_output(&mut child, TIMEOUT);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_clean("agent stderr", &stderr);
    // Each line is marked as the agent's: a newline cannot pass for fsgate's own line.
    let shown = NAME_SHOWN.replace("\\n", "\nagent: ");
    assert!(
        stderr.contains(&format!("agent: ready\nagent: {shown}\n")),
        "{stderr}"
    );
}
