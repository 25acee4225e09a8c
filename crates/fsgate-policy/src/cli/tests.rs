//! Tests of the `fsgate policy` commands through [`run_to`]: output shape and exit codes.

use std::path::{Path, PathBuf};

use clap::Parser;

use super::exit::{EXIT_FINDINGS, EXIT_INVALID, EXIT_OK};
use super::*;

/// A stand-in for the top-level CLI, so arguments parse exactly as `fsgate policy ...`.
#[derive(Debug, clap::Parser)]
struct Top {
    #[command(subcommand)]
    cmd: PolicyCommand,
}

fn run_args(args: &[&str]) -> (i32, String, String) {
    let top = Top::try_parse_from(std::iter::once("policy").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{e}"));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_to(top.cmd, &mut out, &mut err);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

fn shipped(name: &str) -> String {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("policies")
        .join(name)
        .display()
        .to_string()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const SMALL: &str = r#"version = 1
[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]

[[rule]]
id = "no-gen"
effect = "deny"
ops = ["*"]
paths = ["src/gen"]

[[test]]
op = "read"
path = "src/a.rs"
expect = "allow"

[[test]]
op = "read"
path = "src/gen/a.rs"
expect = "allow"
"#;

#[test]
fn check_exit_codes_and_format() {
    let (code, out, _) = run_args(&["check", &shipped("default.toml")]);
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(
        out.ends_with("checked 1 file(s): 0 error(s), 0 warning(s), 0 note(s)\n"),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.toml", "version = 1\nbogus = 1\n");
    let (code, out, _) = run_args(&["check", &bad]);
    assert_eq!(code, EXIT_INVALID);
    assert!(
        out.starts_with(&format!("{bad}:2:1: error: unknown field `bogus`")),
        "{out}"
    );

    let warn = write(
        dir.path(),
        "warn.toml",
        "version = 1\n[[rule]]\nid = \"t\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [\"tmp\"]\n",
    );
    let (code, out, _) = run_args(&["check", "--json", &warn]);
    assert_eq!(code, EXIT_FINDINGS);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["findings"][0]["code"], "untested-deny");
    assert_eq!(doc["findings"][0]["line"], 3);

    let (code, _, _) = run_args(&["check", "/nonexistent/x.toml"]);
    assert_eq!(code, EXIT_INVALID);
}

#[test]
fn check_refuses_a_growth_budget_too_small_to_work_with_and_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = write(
        dir.path(),
        "tiny.toml",
        "version = 1\n[audit]\nfsync = \"always\"\nmax_session_bytes_per_minute = 100\n",
    );
    let (code, out, _) = run_args(&["check", &tiny]);
    assert_eq!(code, EXIT_INVALID, "{out}");
    assert!(
        out.starts_with(&format!(
            "{tiny}:4:1: error: audit.max_session_bytes_per_minute"
        )),
        "{out}"
    );
    let off = write(
        dir.path(),
        "off.toml",
        "version = 1\n[audit]\nmax_bytes_per_minute = 0\nmax_session_bytes_per_minute = 65536\n",
    );
    let (code, out, _) = run_args(&["check", &off]);
    assert_ne!(code, EXIT_INVALID, "{out}");
}

#[test]
fn test_prints_failures_with_lines_and_the_final_count() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", SMALL);
    let (code, out, _) = run_args(&["test", &f, "--coverage"]);
    assert_eq!(code, EXIT_FINDINGS, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "{f}:19: FAIL read src/gen/a.rs: expected allow, got deny by no-gen (deny rule `no-gen` covers read on this path)"
        )
    );
    assert_eq!(*lines.last().unwrap(), "1 passed, 1 failed");

    let ok = write(
        dir.path(),
        "ok.toml",
        &SMALL.replace(
            "path = \"src/gen/a.rs\"\nexpect = \"allow\"",
            "path = \"src/gen/a.rs\"\nexpect = \"deny\"",
        ),
    );
    let (code, out, _) = run_args(&["test", &ok]);
    assert_eq!((code, out.as_str()), (EXIT_OK, "2 passed, 0 failed\n"));

    // One more rule that no case decides: listed with --coverage, fatal with --fail-on-uncovered.
    let more = format!(
        "{}\n[[rule]]\nid = \"docs\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"docs\"]\n",
        std::fs::read_to_string(&ok).unwrap()
    );
    let more = write(dir.path(), "more.toml", &more);
    let (code, out, _) = run_args(&["test", &more, "--coverage"]);
    assert_eq!(code, EXIT_OK);
    assert!(
        out.contains("uncovered: rule `docs` decides no test case"),
        "{out}"
    );
    let (code, _, _) = run_args(&["test", &more, "--fail-on-uncovered"]);
    assert_eq!(code, EXIT_FINDINGS);

    let (code, out, err) = run_args(&["test", &ok, "/nonexistent/x.toml"]);
    assert_eq!(code, EXIT_INVALID);
    assert!(err.contains("cannot read"), "{err}");
    assert!(out.ends_with("2 passed, 0 failed\n"), "{out}");
}

#[test]
fn explain_shows_order_decider_and_shadowed_rules() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", SMALL);
    let (code, out, _) = run_args(&["explain", &f, "--op", "read", "src/gen/x.rs"]);
    assert_eq!(code, EXIT_OK);
    assert!(out.contains("DENY by no-gen"), "{out}");
    let deny_at = out.find("no-gen ").unwrap();
    assert!(
        out[deny_at..]
            .lines()
            .next()
            .unwrap()
            .contains("<= decides"),
        "{out}"
    );
    assert!(out.contains("also matching, but not reached"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("decision: DENY by no-gen (deny rule `no-gen` covers read on this path)"),
        "{out}"
    );

    // `src/**` lets the agent list the directory `src` (it leads there), not a file.
    let (_, out, _) = run_args(&["explain", &f, "--op", "list", "--json", "--dir", "src"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["decision"]["rule"], "src");
    let (_, out, _) = run_args(&["explain", &f, "--op", "list", "--json", "src"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["decision"]["rule"], "default-deny");
}

#[test]
fn explain_with_content_runs_content_rules() {
    let dir = tempfile::tempdir().unwrap();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    let content = write(dir.path(), "notes.txt", &format!("hello\nkey = {key}\n"));
    let (code, out, _) = run_args(&[
        "explain",
        &shipped("default.toml"),
        "--op",
        "read",
        "notes.txt",
        "--content",
        &content,
    ]);
    assert_eq!(code, EXIT_OK);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("content:aws-access-key-id"))
        .unwrap();
    assert!(
        line.contains("FINDING at line 2, column 7") && line.ends_with("<= decides"),
        "{out}"
    );
    assert!(
        out.contains(
            "decision: DENY by content:aws-access-key-id (the content holds a secret on line 2)"
        ),
        "{out}"
    );
    let (_, out, _) = run_args(&[
        "explain",
        &shipped("default.toml"),
        "--op",
        "list",
        "notes.txt",
        "--content",
        &content,
    ]);
    assert!(
        out.contains("content is not scanned for list operations"),
        "{out}"
    );
}

#[test]
fn diff_reports_changes_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let old = shipped("default.toml");
    let (code, out, _) = run_args(&["diff", &old, &old]);
    assert_eq!(code, EXIT_OK);
    assert!(out.starts_with("0 decision(s) changed"), "{out}");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "").unwrap();
    std::fs::write(ws.join("README.md"), "").unwrap();
    let new = write(dir.path(), "p.toml", SMALL);
    let (code, out, _) = run_args(&["diff", &old, &new, "--workspace", &ws.display().to_string()]);
    // Dropping [content] loosens, whatever the tree shows.
    assert_eq!(code, EXIT_FINDINGS, "{out}");
    for line in [
        "tightens decision  write src/a.rs: allow (workspace-write) -> deny (default-deny)",
        "tightens decision  read README.md: allow (workspace-read) -> deny (default-deny)",
        "loosens  content   [content]: present -> absent: content is not scanned",
        "changes  rule      src: (absent) -> allow read, list on src/** (the old policy's allow rules covered it)",
        "tightens rule      workspace-write: allow write, delete on ** -> (removed)",
    ] {
        assert!(out.lines().any(|l| l == line), "missing `{line}`:\n{out}");
    }
    assert!(!out.contains("loosens  decision"), "{out}");
}

#[test]
fn schema_prints_the_committed_schema() {
    let (code, out, _) = run_args(&["schema"]);
    assert_eq!(code, EXIT_OK);
    assert_eq!(out, crate::schema::schema_text());
}

/// `reports` list-only, `src` readable: the issue's case where explain and the gateway
/// disagreed. `explain --op` decides gateway operations step by step.
const LIST_ONLY: &str = r#"version = 1
[[rule]]
id = "list-reports"
effect = "allow"
ops = ["list"]
paths = ["reports"]

[[rule]]
id = "big-read-only"
effect = "deny"
ops = ["write"]
paths = ["**"]
min_size = 1048577

[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list", "write"]
paths = ["src"]

[[test]]
op = "stat"
path = "reports/lint.json"
expect = "allow"
rule = "list-reports"

[[test]]
op = "ls"
path = "reports/lint.json"
expect = "allow"
rule = "list-reports"

[[test]]
op = "grep"
path = "reports/lint.json"
expect = "deny"
rule = "default-deny"

[[test]]
op = "write"
path = "src/big.bin"
size = 2097152
expect = "deny"
rule = "big-read-only"

[[test]]
op = "write"
path = "src/small.txt"
size = 9
expect = "allow"
rule = "src"
"#;

#[test]
fn explain_and_test_decide_gateway_operations_and_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", LIST_ONLY);
    let (code, out, _) = run_args(&["test", &f]);
    assert_eq!((code, out.as_str()), (EXIT_OK, "5 passed, 0 failed\n"));

    let (code, out, _) = run_args(&["explain", &f, "--op", "ls", "reports/lint.json"]);
    assert_eq!(code, EXIT_OK);
    assert!(
        out.contains("step: list on reports (the directory listing it"),
        "{out}"
    );
    assert!(
        out.contains("step: list on reports/lint.json (the path itself)"),
        "{out}"
    );
    assert!(
        out.trim_end().ends_with(
            "decision: ALLOW by list-reports (allow rule `list-reports` covers list on this path)"
        ),
        "{out}"
    );

    let (_, out, _) = run_args(&["explain", &f, "--op", "grep", "--json", "reports/lint.json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["decision"]["effect"], "deny");
    let steps = doc["steps"].as_array().unwrap();
    let last = steps.last().unwrap();
    assert_eq!(
        (&last["class"], &last["path"]),
        (&"read".into(), &"reports/lint.json".into())
    );

    let (_, out, _) = run_args(&["explain", &f, "--op", "write", "--size", "2097152", "src/a"]);
    assert!(out.contains("DENY by big-read-only"), "{out}");
    let (_, out, _) = run_args(&["explain", &f, "--op", "write", "src/a"]);
    assert!(out.contains("ALLOW by src"), "{out}");
    assert!(out.contains("size not known yet"), "{out}");
}

#[test]
fn a_file_without_cases_fails_and_coverage_counts_content_rules() {
    let dir = tempfile::tempdir().unwrap();
    let empty = write(
        dir.path(),
        "empty.toml",
        "version = 1\n[[rule]]\nid = \"r\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"**\"]\n",
    );
    let (code, out, err) = run_args(&["test", &empty]);
    assert_eq!(code, EXIT_FINDINGS, "{out}");
    assert!(
        err.contains("no [[test]] cases, so nothing was tested"),
        "{err}"
    );
    let text = "version = 1\n[content]\nbuiltin = false\n\
[[content.rules]]\nid = \"k\"\nregex = 'KEY[0-9]{4}'\n\
[[content.rules]]\nid = \"t\"\nregex = 'TOK[0-9]{4}'\n\
[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n\
[[test]]\nop = \"grep\"\npath = \"a.txt\"\ncontent = \"x KEY1234\"\nexpect = \"deny\"\nrule = \"content:k\"\n";
    let f = write(dir.path(), "c.toml", text);
    let (_, out, _) = run_args(&["test", &f, "--coverage"]);
    assert!(
        out.contains("content rules: 1 of 2 decided some test case: content:k"),
        "{out}"
    );
    assert!(out.contains("uncovered: rule `content:t`"), "{out}");
}

const ASKING: &str = r#"version = 1
[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = [".github/**"]
reason = "CI configuration runs with secrets"

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]

[content]
builtin = true

[ask]
timeout_secs = 30

[[test]]
op = "write"
path = ".github/workflows/ci.yml"
expect = "ask"
rule = "ask-ci"

[[test]]
op = "edit"
path = ".github/workflows/ci.yml"
expect = "ask"

[[test]]
op = "read"
path = ".github/workflows/ci.yml"
expect = "allow"
rule = "all"
"#;

#[test]
fn explain_and_test_know_ask() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", ASKING);
    let (code, out, _) = run_args(&["explain", &f, "--op", "write", ".github/workflows/ci.yml"]);
    assert_eq!(code, EXIT_OK);
    assert!(
        out.contains("ASK by ask-ci: CI configuration runs with secrets"),
        "{out}"
    );
    assert!(out.contains("no answer within 30 s means deny"), "{out}");
    assert!(out.contains("then ask rules, then allow rules"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("decision: ASK by ask-ci (CI configuration runs with secrets)"),
        "{out}"
    );
    let (_, out, _) = run_args(&["explain", &f, "--op", "edit", "--json", ".github/x.yml"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["decision"]["effect"], "ask");
    assert_eq!(doc["decision"]["rule"], "ask-ci");
    assert_eq!(doc["path_decision"]["effect"], "ask");

    let (code, out, _) = run_args(&["test", &f]);
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(out.ends_with("3 passed, 0 failed\n"), "{out}");
    // A case expecting allow where an ask rule decides fails, naming the ask.
    let wrong = ASKING.replace("expect = \"ask\"\nrule", "expect = \"allow\"\nrule");
    let g = write(dir.path(), "wrong.toml", &wrong);
    let (code, out, _) = run_args(&["test", &g]);
    assert_eq!(code, EXIT_FINDINGS);
    assert!(
        out.contains("expected allow by ask-ci, got ask by ask-ci"),
        "{out}"
    );
}

#[test]
fn secret_content_is_refused_where_a_person_would_be_asked() {
    let text = format!(
        "{ASKING}\n[[test]]\nop = \"write\"\npath = \".github/deploy.yml\"\ncontent = \"-----BEGIN RSA PRIVATE KEY-----\\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\\n-----END RSA PRIVATE KEY-----\\n\"\nexpect = \"deny\"\nrule = \"content:private-key\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", &text);
    let (code, out, _) = run_args(&["test", &f]);
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(out.ends_with("4 passed, 0 failed\n"), "{out}");
}

#[test]
fn diff_orders_deny_over_ask_over_allow() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(dir.path(), "old.toml", ASKING);
    let allow = ASKING.replace("effect = \"ask\"", "effect = \"allow\"");
    let new = write(dir.path(), "new.toml", &allow);
    // ask -> allow loosens: exit 1.
    let (code, out, _) = run_args(&["diff", &old, &new]);
    assert_eq!(code, EXIT_FINDINGS, "{out}");
    assert!(
        out.contains(
            "loosens  decision  write .github/workflows/ci.yml: ask (ask-ci) -> allow (ask-ci)"
        ),
        "{out}"
    );
    assert!(
        out.contains("loosens  rule      ask-ci: ask write"),
        "{out}"
    );
    // allow -> ask only tightens: exit 0.
    let (code, out, _) = run_args(&["diff", &new, &old]);
    assert_eq!(code, EXIT_OK, "{out}");
    assert!(
        out.contains(
            "tightens decision  write .github/workflows/ci.yml: allow (ask-ci) -> ask (ask-ci)"
        ),
        "{out}"
    );
    assert!(
        out.contains("2 decision(s) changed: 0 loosened, 2 tightened"),
        "{out}"
    );
    assert!(
        out.ends_with("0 loosen(s), 3 tighten(s), 0 other change(s)\n"),
        "{out}"
    );
    // deny -> ask loosens.
    let deny = ASKING.replace("effect = \"ask\"", "effect = \"deny\"");
    let denied = write(dir.path(), "deny.toml", &deny);
    let (code, out, _) = run_args(&["diff", &denied, &old]);
    assert_eq!(code, EXIT_FINDINGS, "{out}");
    assert!(
        out.contains("loosens  rule      ask-ci: deny write on .github/** -> ask write"),
        "{out}"
    );
}

#[test]
fn listings_and_searches_leave_out_what_an_ask_rule_covers() {
    let text = ASKING.replace(
        "ops = [\"write\"]\npaths = [\".github/**\"]",
        "ops = [\"write\", \"list\"]\npaths = [\".github/**\"]",
    );
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "p.toml", &text);
    let path = ".github/workflows/ci.yml";
    for op in ["ls", "glob", "tree", "grep"] {
        let (_, out, _) = run_args(&["explain", &f, "--op", op, "--json", path]);
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["decision"]["effect"], "deny", "{op}: {out}");
        assert_eq!(doc["decision"]["rule"], "ask-ci", "{op}: {out}");
        assert!(
            doc["decision"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("leaves out what an ask rule covers")),
            "{op}: {out}"
        );
    }
    // One path's metadata asks.
    let (_, out, _) = run_args(&["explain", &f, "--op", "stat", "--json", path]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["decision"]["effect"], "ask", "{out}");
}
