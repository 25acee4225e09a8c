//! Tests of `policy check`: each check fires where it should, at the right position, and
//! stays quiet on the shipped policies.

use super::*;

fn lint(text: &str) -> LintReport {
    lint_text(text, "p.toml", None, None, &LintOptions::default())
}

fn codes(r: &LintReport) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code).collect()
}

fn rule(id: &str, effect: &str, ops: &str, paths: &str) -> String {
    format!("[[rule]]\nid = \"{id}\"\neffect = \"{effect}\"\nops = {ops}\npaths = {paths}\n")
}

fn test_case(op: &str, path: &str, expect: &str) -> String {
    format!("[[test]]\nop = \"{op}\"\npath = \"{path}\"\nexpect = \"{expect}\"\n")
}

#[test]
fn parse_errors_are_located_and_invalid() {
    let r = lint("version = 1\n\n  bogus = 3\n");
    assert!(r.invalid);
    let f = &r.findings[0];
    assert_eq!(
        (f.line, f.col, f.severity, f.code),
        (3, 3, Severity::Error, "parse")
    );
    assert!(f.message.contains("unknown field `bogus`"), "{f}");
    assert!(
        f.to_string()
            .starts_with("p.toml:3:3: error: unknown field `bogus`"),
        "{f}"
    );
    assert!(f.to_string().contains("(hint: check the spelling"), "{f}");
}

#[test]
fn every_bad_glob_and_op_is_reported_at_its_value() {
    let text = format!(
        "version = 1\n{}{}",
        rule("a", "allow", "[\"read\", \"reed\"]", "[\"src/[\"]"),
        rule("b", "allow", "[\"read\"]", "[\"../x\"]")
    );
    let r = lint(&text);
    assert!(r.invalid);
    let got: Vec<(usize, usize)> = r.findings.iter().map(|f| (f.line, f.col)).collect();
    assert_eq!(got, vec![(5, 16), (6, 10), (11, 10)], "{:#?}", r.findings);
}

#[test]
fn content_errors_come_from_the_loader() {
    let r = lint("version = 1\n[content]\n[[content.rules]]\nid = \"x\"\nregex = '('\n");
    assert!(r.invalid);
    assert_eq!((r.findings[0].line, r.findings[0].code), (5, "invalid"));
}

#[test]
fn dead_and_shadowed_allow_rules() {
    let text = format!(
        "version = 1\n{}{}{}{}",
        rule(
            "src-read",
            "allow",
            "[\"read\", \"list\"]",
            "[\"src/**/*.rs\"]"
        ),
        rule(
            "src-write",
            "allow",
            "[\"read\", \"write\"]",
            "[\"src/**\"]"
        ),
        rule(
            "no-src-read",
            "deny",
            "[\"read\", \"list\"]",
            "[\"src/**\"]"
        ),
        test_case("read", "src/a.rs", "deny"),
    );
    let r = lint(&text);
    let dead: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "dead-rule" || f.code == "shadowed-ops")
        .collect();
    assert_eq!(dead.len(), 2, "{:#?}", r.findings);
    assert_eq!((dead[0].code, dead[0].line), ("dead-rule", 3));
    assert_eq!((dead[1].code, dead[1].line), ("shadowed-ops", 8));
    assert!(dead[1].message.contains("ops [read]"), "{}", dead[1]);
}

#[test]
fn a_partial_deny_does_not_kill_an_allow() {
    let text = format!(
        "version = 1\n{}{}{}",
        rule("src", "allow", "[\"read\"]", "[\"src/**\"]"),
        rule("gen", "deny", "[\"read\"]", "[\"src/gen\", \"src/*.rs\"]"),
        test_case("read", "src/gen/a", "deny"),
    );
    let r = lint(&text);
    assert!(!codes(&r).contains(&"dead-rule"), "{:#?}", r.findings);
}

#[test]
fn duplicate_rules() {
    let text = format!(
        "version = 1\n{}{}",
        rule("a", "allow", "[\"read\", \"list\"]", "[\"docs\", \"src\"]"),
        rule("b", "allow", "[\"list\", \"read\"]", "[\"src\", \"docs\"]"),
    );
    let r = lint(&text);
    let d: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "duplicate-rule")
        .collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].line, 8);
}

#[test]
fn secrets_exposed_when_builtin_off() {
    let text = format!(
        "version = 1\n[secrets]\nbuiltin = false\n{}",
        rule("all", "allow", "[\"read\"]", "[\"**\"]")
    );
    let r = lint(&text);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "secret-exposed")
        .expect("exposed");
    assert_eq!(f.severity, Severity::Error);
    assert!(f.message.contains("`.env`"), "{f}");
}

#[test]
fn glob_naming_a_secret_is_flagged() {
    let text = format!(
        "version = 1\n{}",
        rule("git", "allow", "[\"read\"]", "[\".git/**\"]")
    );
    let r = lint(&text);
    assert!(codes(&r).contains(&"secret-glob"), "{:#?}", r.findings);
    assert!(!codes(&r).contains(&"secret-exposed"));
    // With the built-in list off, the same glob really exposes .git.
    let r = lint(&format!(
        "version = 1\n[secrets]\nbuiltin = false\n{}",
        rule("git", "allow", "[\"read\"]", "[\".git/**\"]")
    ));
    assert!(codes(&r).contains(&"secret-exposed"), "{:#?}", r.findings);
}

#[test]
fn write_wider_than_read() {
    let text = format!(
        "version = 1\n{}{}",
        rule("read-src", "allow", "[\"read\"]", "[\"src/**\"]"),
        rule("write-out", "allow", "[\"write\"]", "[\"out/**\"]"),
    );
    let r = lint(&text);
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "write-without-read")
        .collect();
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("`write-out`"));
}

#[test]
fn limits_above_ceilings() {
    let r =
        lint("version = 1\n[limits]\nmax_read_bytes = 1048576\n  max_write_bytes = 209715200\n");
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "limit-ceiling")
        .collect();
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].line, f[0].col), (4, 3));
}

#[test]
fn untested_denies_and_unknown_test_rules() {
    let text = format!(
        "version = 1\n[secrets]\npatterns = [{{ id = \"vault\", regex = 'vault' }}]\n{}{}{}[[test]]\nop = \"read\"\npath = \"a\"\nexpect = \"deny\"\nrule = \"nope\"\n",
        rule("all", "allow", "[\"read\"]", "[\"**\"]"),
        rule("no-tmp", "deny", "[\"*\"]", "[\"tmp/**\"]"),
        test_case("read", "src/a", "allow"),
    );
    let r = lint(&text);
    let u: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "untested-deny")
        .collect();
    assert_eq!(u.len(), 2, "{:#?}", r.findings);
    assert!(u.iter().any(|f| f.message.contains("`secrets:vault`")));
    let t = u.iter().find(|f| f.message.contains("`no-tmp`")).unwrap();
    assert!(t.hint.contains("path = \"tmp/x\""), "{t}");
    assert!(codes(&r).contains(&"unknown-test-rule"));
}

#[test]
fn fixed_floor_without_and_with_workspace() {
    let text = format!(
        "version = 1\n{}",
        rule("own", "allow", "[\"read\"]", "[\".fsgate/**\"]")
    );
    let r = lint(&text);
    assert!(
        r.findings
            .iter()
            .any(|f| f.code == "fixed-floor" && f.severity == Severity::Error)
    );

    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("cfg")).unwrap();
    let policy_path = ws.path().join("cfg/policy.toml");
    let text = format!(
        "version = 1\n{}{}{}",
        rule("cfg", "allow", "[\"read\"]", "[\"cfg/**\"]"),
        rule("all", "allow", "[\"list\"]", "[\"**\"]"),
        test_case("read", "cfg/a", "allow"),
    );
    std::fs::write(&policy_path, &text).unwrap();
    let opts = LintOptions {
        workspace: Some(ws.path().to_path_buf()),
    };
    let r = lint_file(&policy_path, &opts);
    let floor: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.code == "fixed-floor" || f.code == "floor-hidden")
        .map(|f| (f.code, f.severity, f.line))
        .collect();
    assert_eq!(
        floor,
        vec![
            ("fixed-floor", Severity::Error, 3),
            ("floor-hidden", Severity::Note, 8)
        ],
        "{:#?}",
        r.findings
    );
}

#[test]
fn unreadable_file_is_invalid() {
    let r = lint_file(Path::new("/nonexistent/p.toml"), &LintOptions::default());
    assert!(r.invalid);
    assert_eq!(r.findings[0].code, "unreadable");
}

#[test]
fn concretize_globs() {
    use super::checks::concretize;
    assert_eq!(concretize("src/**/*.rs"), "src/x/x.rs");
    assert_eq!(concretize("/docs/[abc]?.{md,txt}"), "docs/ax.md");
    assert_eq!(concretize("a\\*b"), "a*b");
}

#[test]
fn every_shipped_policy_is_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut n = 0;
    let entries = [dir.clone(), dir.join("examples")]
        .into_iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten());
    for e in entries {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "toml") {
            let r = lint_file(&path, &LintOptions::default());
            let bad: Vec<String> = r
                .findings
                .iter()
                .filter(|f| f.severity != Severity::Note)
                .map(|f| f.to_string())
                .collect();
            assert!(
                bad.is_empty() && !r.invalid,
                "{}:\n{}",
                path.display(),
                bad.join("\n")
            );
            n += 1;
        }
    }
    assert!(n >= 1);
}
