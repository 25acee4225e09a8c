//! Integration tests for `fsgate policy check|explain|test|diff|schema`: the real binary,
//! its output formats (read by CI tooling) and its exit codes (0 clean, 1 findings, 2 invalid).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::run_cli;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every shipped policy, as `.ci/run` passes them (`policies/*.toml`).
fn shipped() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo().join("policies"))
        .expect("policies/")
        .flatten()
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
    assert!(
        out.ends_with("0 error(s), 0 warning(s), 0 note(s)\n"),
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
fn diff_lists_changed_decisions() {
    let (code, out, _) = run(&[
        "policy",
        "diff",
        &policy("default.toml"),
        &policy("readonly.toml"),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("- write  src/main.rs: allow (workspace-write) -> deny (default-deny)"),
        "{out}"
    );
    assert!(
        !out.lines().any(|l| l.starts_with('+')),
        "read-only never widens:\n{out}"
    );
    let (code, out, _) = run(&[
        "policy",
        "diff",
        &policy("default.toml"),
        &policy("default.toml"),
    ]);
    assert_eq!(code, 0);
    assert!(out.starts_with("0 decision(s) changed"), "{out}");
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
