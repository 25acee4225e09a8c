//! Integration tests for `fsgate policy check|explain|test|diff|schema`: the real binary,
//! its output formats (read by CI tooling) and its exit codes (0 clean, 1 findings, 2 invalid).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::run_cli;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every shipped policy, as CI passes them (`policies/*.toml policies/examples/*.toml`).
fn shipped() -> Vec<String> {
    let dirs = [repo().join("policies"), repo().join("policies/examples")];
    let mut v: Vec<String> = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).expect("policies/").flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

fn policy(name: &str) -> String {
    repo().join("policies").join(name).display().to_string()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = run_cli(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

#[test]
fn ci_checks_every_shipped_policy_clean() {
    let files = shipped();
    assert!(files.len() >= 5, "{files:?}");
    let mut args = vec!["policy", "check"];
    args.extend(files.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "policy check must be clean:\n{out}{err}");
    // The one note is the waiver that is the whole point of the git example: `.git`
    // decided by its rules instead of hidden.
    assert!(
        out.ends_with("0 error(s), 0 warning(s), 1 note(s)\n"),
        "{out}"
    );
    let note = out
        .lines()
        .find(|l| l.contains(": note: "))
        .unwrap_or_default();
    assert!(
        note.contains("git-through-the-view.toml") && note.contains("secrets:vcs-internals"),
        "{out}"
    );
}

#[test]
fn ci_tests_every_shipped_policy_and_prints_the_final_count() {
    let files = shipped();
    let mut args = vec!["policy", "test", "--fail-on-uncovered"];
    args.extend(files.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}{err}");
    let last = out.lines().last().expect("a final line");
    let (passed, failed) = last
        .split_once(" passed, ")
        .and_then(|(p, f)| {
            Some((
                p.parse::<usize>().ok()?,
                f.strip_suffix(" failed")?.parse::<usize>().ok()?,
            ))
        })
        .unwrap_or_else(|| panic!("final line is not `N passed, M failed`: {last:?}"));
    assert!(passed >= 40 && failed == 0, "{last}");
}

#[test]
fn check_reports_located_findings_and_exit_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let syntax = write(dir.path(), "syntax.toml", "version = 1\n[limits\n");
    let (code, out, _) = run(&["policy", "check", &syntax]);
    assert_eq!(code, 2, "{out}");
    assert!(out.starts_with(&format!("{syntax}:2:")), "{out}");

    let findings = write(
        dir.path(),
        "findings.toml",
        "version = 1\n[[rule]]\nid = \"tmp\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [\"tmp\"]\n",
    );
    let (code, out, _) = run(&["policy", "check", &findings]);
    assert_eq!(code, 1, "{out}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "{findings}:3:1: warning: deny rule `tmp` has no [[test]]"
        )) && first.contains("(hint: add [[test]] op = \"read\", path = \"tmp\""),
        "{out}"
    );

    let (code, out, _) = run(&["policy", "check", "--json", &findings]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(doc["warnings"], 1);
    assert_eq!(doc["findings"][0]["code"], "untested-deny");

    let (code, _, _) = run(&["policy", "check", "/nonexistent/policy.toml"]);
    assert_eq!(code, 2);
}

#[test]
fn test_reports_each_failure_with_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "p.toml",
        "version = 1\n[[rule]]\nid = \"docs\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"docs/**\"]\n\n\
[[test]]\nop = \"read\"\npath = \"docs/a.md\"\nexpect = \"allow\"\n\n\
[[test]]\nop = \"read\"\npath = \"src/a.rs\"\nexpect = \"allow\"\n",
    );
    let (code, out, _) = run(&["policy", "test", &f]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        format!(
            "{f}:13: FAIL read src/a.rs: expected allow, got deny by default-deny (no rule allows read on this path)\n1 passed, 1 failed\n"
        )
    );
}

#[test]
fn explain_names_the_rule_and_the_order() {
    let (code, out, _) = run(&[
        "policy",
        "explain",
        &policy("default.toml"),
        "--op",
        "read",
        "config/.env",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("DENY by secrets:dotenv"), "{out}");
    let order: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|w| w.starts_with("secrets:") || *w == "workspace-read")
        .collect();
    assert_eq!(order.first(), Some(&"secrets:dotenv"), "{out}");

    let dir = tempfile::tempdir().expect("tempdir");
    let key = ["-----BEGIN EC PRIVATE ", "KEY-----\n"].concat()
        + &"MHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\n".repeat(2)
        + "-----END EC PRIVATE KEY-----\n";
    let content = write(dir.path(), "notes.txt", &format!("deploy notes\n{key}"));
    let (code, out, _) = run(&[
        "policy",
        "explain",
        &policy("default.toml"),
        "--op",
        "read",
        "notes.txt",
        "--content",
        &content,
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "decision: DENY by content:private-key (the content holds a secret on line 2)"
        ),
        "{out}"
    );

    let (code, _, _) = run(&[
        "policy",
        "explain",
        &policy("default.toml"),
        "--op",
        "reed",
        "a",
    ]);
    assert_eq!(code, 2, "clap rejects an unknown op");
}

#[test]
fn diff_of_a_pure_tightening_lists_it_and_exits_0() {
    let (code, out, _) = run(&[
        "policy",
        "diff",
        &policy("default.toml"),
        &policy("readonly.toml"),
    ]);
    assert_eq!(code, 0, "nothing loosens:\n{out}");
    assert!(
        out.contains(
            "tightens decision  write src/main.rs: allow (workspace-write) -> deny (default-deny)"
        ),
        "{out}"
    );
    assert!(
        !out.lines().any(|l| l.starts_with("loosens")),
        "read-only never loosens:\n{out}"
    );
    let (code, out, _) = run(&[
        "policy",
        "diff",
        &policy("default.toml"),
        &policy("default.toml"),
    ]);
    assert_eq!(code, 0);
    assert!(out.starts_with("0 decision(s) changed"), "{out}");
    assert!(
        out.ends_with("0 loosen(s), 0 tighten(s), 0 other change(s)\n"),
        "{out}"
    );
}

/// The example: a copy of the default policy that switches off two strong content
/// rules and raises the write limit 100x no longer passes as "0 decisions changed".
#[test]
fn diff_names_disabled_content_rules_raised_limits_and_the_files_now_let_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let default = std::fs::read_to_string(policy("default.toml")).expect("default.toml");
    let loose = default
        .replace(
            "disabled_rules = [\"generic-api-key\"]",
            "disabled_rules = [\"generic-api-key\", \"private-key\", \"aws-access-key-id\"]",
        )
        .replace("max_write_bytes = 10485760", "max_write_bytes = 1048576000");
    assert_ne!(loose, default);
    let new = write(dir.path(), "loose.toml", &loose);
    let old = policy("default.toml");
    let (code, out, err) = run(&["policy", "diff", &old, &new]);
    assert_eq!(code, 1, "{out}{err}");
    for line in [
        "loosens  limits   max_write_bytes: 10485760 -> 1048576000",
        "loosens  content  content:private-key: on -> disabled",
        "loosens  content  content:aws-access-key-id: on -> disabled",
    ] {
        assert!(out.lines().any(|l| l == line), "missing `{line}`:\n{out}");
    }
    // Over a tree holding a key, the file whose content now passes is named.
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("deploy")).expect("mkdir");
    let body = "g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD";
    let key =
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----\n");
    std::fs::write(ws.join("deploy/notes.txt"), key).expect("write");
    std::fs::write(ws.join("README.md"), "nothing secret\n").expect("write");
    let (code, out, err) = run(&["policy", "diff", &old, &new, "--workspace", s(&ws)]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.lines().any(|l| l
            == "loosens  content-file  deploy/notes.txt (read, write): deny (content:private-key) -> allow (workspace-read)"),
        "{out}"
    );
    assert!(!out.contains("README.md"), "{out}");
    // The reverse direction tightens only: exit 0.
    let (code, out, _) = run(&["policy", "diff", &new, &old, "--workspace", s(&ws)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("tightens content-file  deploy/notes.txt (read, write)"),
        "{out}"
    );
    // --json carries the same items.
    let (code, out, _) = run(&["policy", "diff", &old, &new, "--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(doc["loosens"], 3, "{doc:#}");
    assert_eq!(doc["items"][1]["subject"], "content:private-key", "{doc:#}");
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let (code, out, _) = run(&["policy", "schema"]);
    assert_eq!(code, 0);
    let committed =
        std::fs::read_to_string(repo().join("policies/schema.json")).expect("schema.json");
    assert_eq!(
        out, committed,
        "regenerate with: fsgate policy schema > policies/schema.json"
    );
}

#[test]
fn check_points_at_a_bad_agent_entry_and_refuses_the_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = write(
        dir.path(),
        "bad.toml",
        "version = 1\n[agent]\nexecute = [\"/opt/tools\", \"tools/bin\"]\nnetwork = [443, 443]\n",
    );
    let (code, out, err) = run(&["policy", "check", &f]);
    assert_eq!(code, 2, "invalid policy: {out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "{f}:3:26: error: agent.execute[1]: `tools/bin` is relative"
        )),
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "{f}:4:17: error: agent.network[1]: port 443 is listed twice"
        )),
        "{out}"
    );
    // The same policy does not start a gateway, which reports both errors as check does.
    let ws = tempfile::tempdir().expect("workspace");
    let (code, _, err) = run(&["serve", "--workspace", s(ws.path()), "--policy", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(lines[0]) && err.contains(lines[1]), "{err}");
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

#[test]
fn check_refuses_agent_access_to_the_policys_own_audit_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).expect("mkdir");
    let f = write(
        dir.path(),
        "p.toml",
        &format!(
            "version = 1\n[audit]\npath = {:?}\n[agent]\nread = [{:?}]\n",
            s(&logs.join("audit.jsonl")),
            s(&logs)
        ),
    );
    let (code, out, err) = run(&["policy", "check", &f]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.starts_with(&format!(
            "{f}:5:9: error: agent.read[0]: {} is the audit log directory",
            s(&logs)
        )),
        "{out}"
    );
    // Relative to the policy file, like [audit] path itself.
    let rel = write(
        dir.path(),
        "rel.toml",
        &format!(
            "version = 1\n[audit]\npath = \"logs/audit.jsonl\"\n[agent]\nread_write = [{:?}]\n",
            s(dir.path())
        ),
    );
    let (code, out, _) = run(&["policy", "check", &rel]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("agent.read_write[0]: ") && out.contains("contains the audit log directory"),
        "{out}"
    );
    // The policy file itself: refused by check and by a start.
    let sub = dir.path().join("pol");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let own = write(
        &sub,
        "own.toml",
        &format!(
            "version = 1\n[agent]\nexecute = [\"/opt\", {:?}]\n",
            s(&sub)
        ),
    );
    let (code, out, _) = run(&["policy", "check", &own]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.starts_with(&format!(
            "{own}:3:20: error: agent.execute[1]: {} contains the policy file {own}",
            s(&sub)
        )),
        "{out}"
    );
    let ws = tempfile::tempdir().expect("workspace");
    let (code, _, err) = run(&["serve", "--workspace", s(ws.path()), "--policy", &own]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(out.lines().next().unwrap_or("?")), "{err}");
}

#[test]
fn check_with_a_workspace_refuses_agent_access_to_it_and_to_its_state_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::create_dir_all(&state).expect("mkdir");
    let f = write(
        dir.path(),
        "p.toml",
        &format!(
            "version = 1\n[agent]\nread = [{:?}, \"/usr/share\"]\nread_write = [{:?}]\n",
            s(&ws.join("src")),
            s(&state)
        ),
    );
    // Without --workspace the policy is fine.
    let (code, out, _) = run(&["policy", "check", &f]);
    assert_eq!(code, 0, "{out}");
    let mut child = std::process::Command::new(crate::common::bin())
        .args(["policy", "check", "--workspace", s(&ws), &f])
        .env("XDG_STATE_HOME", &state)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    let res = crate::common::wait_output(&mut child, crate::common::TIMEOUT);
    let out = String::from_utf8_lossy(&res.stdout);
    assert_eq!(res.status.code(), Some(1), "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(errors.len(), 2, "{out}");
    assert!(
        errors[0].starts_with(&format!("{f}:3:9: error: agent.read[0]: "))
            && errors[0].contains("lies inside the workspace"),
        "{out}"
    );
    assert!(
        errors[1].starts_with(&format!("{f}:4:15: error: agent.read_write[0]: "))
            && errors[1].contains("contains the fsgate state directory"),
        "{out}"
    );
}

/// `[ask] timeout_secs` out of range loads and is used clamped: `policy check` warns,
/// naming the value used; a negative one is refused with a hint about its range, not
/// about the TOML syntax.
#[test]
fn check_warns_of_an_ask_timeout_out_of_range_and_hints_at_a_negative_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (secs, used) in [("0", "1"), ("7200", "3600")] {
        let f = write(
            dir.path(),
            &format!("t{secs}.toml"),
            &format!("version = 1\n[ask]\ntimeout_secs = {secs}\n"),
        );
        let (code, out, err) = run(&["policy", "check", &f]);
        assert_eq!(code, 1, "{out}{err}");
        let want = format!(
            "{f}:3:1: warning: ask.timeout_secs = {secs} is outside 1 to 3600: {used} s is used"
        );
        assert!(out.lines().any(|l| l.starts_with(&want)), "{want}\n{out}");
    }
    let f = write(
        dir.path(),
        "in.toml",
        "version = 1\n[ask]\ntimeout_secs = 60\n",
    );
    let (code, out, err) = run(&["policy", "check", &f]);
    assert_eq!(code, 0, "{out}{err}");
    let f = write(
        dir.path(),
        "neg.toml",
        "version = 1\n[ask]\ntimeout_secs = -5\n",
    );
    let (code, out, err) = run(&["policy", "check", &f]);
    assert_eq!(code, 2, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.contains("invalid value"))
        .unwrap_or_else(|| panic!("{out}{err}"));
    assert!(line.contains("(hint: give a value in the range"), "{line}");
}
