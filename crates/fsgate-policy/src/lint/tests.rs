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

/// `cacert.pem` is no built-in secret: a rule that allows it exposes nothing, and a glob
/// naming it is no glob naming a secret; `server.pem` beside it still is.
#[test]
fn a_rule_allowing_the_ca_bundle_exposes_no_secret() {
    let text = format!(
        "version = 1\n{}",
        rule("ca", "allow", "[\"read\"]", "[\"**/certifi/cacert.pem\"]")
    );
    let r = lint(&text);
    let found = codes(&r);
    assert!(
        !found.contains(&"secret-exposed") && !found.contains(&"secret-glob"),
        "{:#?}",
        r.findings
    );
    let r = lint(&format!(
        "version = 1\n{}",
        rule("pem", "allow", "[\"read\"]", "[\"**/certifi/server.pem\"]")
    ));
    assert!(codes(&r).contains(&"secret-glob"), "{:#?}", r.findings);
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
    // Said once: not also as a shadowed rule.
    assert!(!codes(&r).contains(&"shadowed-rule"), "{:#?}", r.findings);
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

/// A policy that lowers a model's limits but not a process's is told so, at the key.
#[test]
fn lowered_model_limits_note_that_processes_keep_theirs() {
    let note = |text: &str| {
        let r = lint(text);
        (r.findings.iter())
            .filter(|f| f.code == "limit-processes")
            .map(|f| (f.line, f.message.clone()))
            .collect::<Vec<_>>()
    };
    let found = note("version = 1\n[limits]\nmax_read_bytes = 1048576\n");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 3);
    assert!(found[0].1.contains("268435456"), "{found:?}");
    let both =
        "version = 1\n[limits]\nmax_read_bytes = 1048576\nmax_process_file_bytes = 1048576\n";
    assert!(note(both).is_empty());
    assert!(note("version = 1\n[limits]\nmax_read_bytes = 10485760\n").is_empty());
}

/// A process's file limit has its own, higher ceiling (1 GiB): 512 MiB passes.
#[test]
fn the_process_file_limit_warns_above_a_gibibyte() {
    let ceiling = |value: u64| {
        let r = lint(&format!(
            "version = 1\n[limits]\nmax_process_file_bytes = {value}\n"
        ));
        (r.findings.iter())
            .filter(|f| f.code == "limit-ceiling" && f.message.contains("max_process_file_bytes"))
            .count()
    };
    assert_eq!((ceiling(512 << 20), ceiling(2 << 30)), (0, 1));
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
    use super::checks::samples::concretize;
    assert_eq!(concretize("src/**/*.rs"), "src/x/x.rs");
    assert_eq!(concretize("/docs/[abc]?.{md,txt}"), "docs/ax.md");
    assert_eq!(concretize("a\\*b"), "a*b");
}

#[test]
fn every_shipped_policy_is_clean() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("policies");
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

fn found<'r>(r: &'r LintReport, code: &str) -> Vec<&'r Finding> {
    r.findings.iter().filter(|f| f.code == code).collect()
}

fn rule_ext(id: &str, effect: &str, ops: &str, paths: &str, exts: &str) -> String {
    format!("{}extensions = {exts}\n", rule(id, effect, ops, paths))
}

/// The position of the `n`th occurrence of `needle` in `text`, 1-based.
fn pos_of(text: &str, needle: &str) -> (usize, usize) {
    let at = text.find(needle).expect("needle");
    crate::position::line_col(text, at)
}

#[test]
fn no_match_when_a_glob_contradicts_the_extensions() {
    let text = format!(
        "version = 1\n[content]\n{}{}",
        rule_ext(
            "docs",
            "allow",
            "[\"read\", \"write\"]",
            "[\"src/**\", \"docs/*.md\"]",
            "[\"rs\"]"
        ),
        rule_ext("no-md", "deny", "[\"*\"]", "[\"*.{md,txt}\"]", "[\"rs\"]"),
    );
    let r = lint(&text);
    let f = found(&r, "no-match");
    assert_eq!(f.len(), 2, "{:#?}", r.findings);
    assert_eq!((f[0].line, f[0].col), pos_of(&text, "\"docs/*.md\""));
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].message.contains("names .md files"), "{}", f[0]);
    assert!(f[0].hint.contains("`docs/*`"), "{}", f[0]);
    // A glob that matches nothing is not also called broad.
    assert!(found(&r, "broad-glob").is_empty(), "{:#?}", r.findings);
    assert_eq!(
        (f[1].line, f[1].col, f[1].severity),
        (
            pos_of(&text, "\"*.{md").0,
            pos_of(&text, "\"*.{md").1,
            Severity::Error
        )
    );
    // The extension listed: no finding.
    let ok = lint(&format!(
        "version = 1\n[content]\n{}",
        rule_ext("docs", "allow", "[\"read\"]", "[\"docs/*.md\"]", "[\"MD\"]")
    ));
    assert!(found(&ok, "no-match").is_empty(), "{:#?}", ok.findings);
}

#[test]
fn no_match_for_components_no_path_has() {
    // `a/.` is read as `a`, and `/` as the whole tree: neither matches nothing. A NUL does.
    let text = format!(
        "version = 1\n[content]\n{}{}{}",
        rule("dot", "deny", "[\"*\"]", "[\"a/.\"]"),
        rule("nul", "deny", "[\"*\"]", "[\"a\\u0000b\"]"),
        rule("all", "deny", "[\"write\"]", "[\"/\"]"),
    );
    let r = lint(&text);
    let f = found(&r, "no-match");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("NUL"), "{}", f[0]);
    let all = pos_of(&text, "\"/\"");
    assert!(
        r.findings.iter().any(|f| (f.line, f.col) == all
            && f.code == "glob-form"
            && f.message.contains("the whole tree")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn normalised_glob_forms_get_a_note_saying_how_they_are_read() {
    let text = format!(
        "version = 1\n[content]\n{}{}{}",
        rule("dot", "deny", "[\"*\"]", "[\"./keys\"]"),
        rule("root", "deny", "[\"*\"]", "[\"/keys\"]"),
        rule("trail", "deny", "[\"*\"]", "[\"keys/\"]"),
    );
    let r = lint(&text);
    let pol = Policy::from_toml(&text, "t").unwrap();
    let under = fsgate_base::path::RelPath::parse_rooted("/keys/a").unwrap();
    let mut notes = 0;
    for (id, glob) in [
        ("dot", "\"./keys\""),
        ("root", "\"/keys\""),
        ("trail", "\"keys/\""),
    ] {
        let at = pos_of(&text, glob);
        let here: Vec<_> = r
            .findings
            .iter()
            .filter(|f| (f.line, f.col) == at)
            .collect();
        assert_eq!(here.len(), 1, "{glob}: {:#?}", r.findings);
        // A glob the compiler reads normally gets the note; one it cannot match, no-match.
        let alone = only(
            &pol,
            vec![pol.rules().iter().find(|r| r.id == id).unwrap().clone()],
        );
        let reads_away = alone
            .decide(OpClass::Read, &under, crate::EntryKind::File)
            .rule
            == id;
        if reads_away {
            notes += 1;
            assert_eq!(
                (here[0].code, here[0].severity),
                ("glob-form", Severity::Note)
            );
            assert!(
                here[0].message.contains(
                    "is read as `keys`: the path `keys` itself and everything beneath it"
                ),
                "{}",
                here[0]
            );
        } else {
            assert_eq!(
                (here[0].code, here[0].severity),
                ("no-match", Severity::Error)
            );
        }
    }
    // Every form is read away by the compiler: three notes, no no-match.
    assert_eq!(notes, 3, "{:#?}", r.findings);
    let trail = r
        .findings
        .iter()
        .find(|f| f.message.contains("`keys/`"))
        .unwrap();
    assert!(
        trail.hint.contains("`keys/**` for what lies beneath only"),
        "{trail}"
    );
}

#[test]
fn broad_globs_on_write_rules() {
    let text = format!(
        "version = 1\n[content]\n{}{}{}",
        rule("top", "allow", "[\"write\"]", "[\"*\"]"),
        rule(
            "reports",
            "allow",
            "[\"read\", \"write\"]",
            "[\"reports/*.json\"]"
        ),
        rule("notes", "allow", "[\"delete\"]", "[\"**/*.md\"]"),
    );
    let r = lint(&text);
    let f = found(&r, "broad-glob");
    assert_eq!(f.len(), 3, "{:#?}", r.findings);
    assert_eq!((f[0].line, f[0].col), pos_of(&text, "\"*\""));
    assert!(
        f[0].message.contains("covers the whole tree like `**`"),
        "{}",
        f[0]
    );
    assert!(f[1].message.contains("`reports/x.json`"), "{}", f[1]);
    assert!(
        f[1].message
            .contains("(write `reports/x.json/payload.sh` is allowed)"),
        "{}",
        f[1]
    );
    assert!(f[1].hint.contains("extensions = [\"json\"]"), "{}", f[1]);
    assert!(f[2].message.contains("`README.md` at the top"), "{}", f[2]);
    assert!(f[2].message.contains("delete `README.md`"), "{}", f[2]);
    // Read-only rules, and the narrower form the hint suggests, are not broad.
    let narrow = format!(
        "version = 1\n[content]\n{}{}",
        rule("top", "allow", "[\"read\", \"list\"]", "[\"*\"]"),
        rule_ext(
            "reports",
            "allow",
            "[\"write\"]",
            "[\"reports/*.json\"]",
            "[\"json\"]"
        ),
    );
    let r = lint(&narrow);
    assert!(found(&r, "broad-glob").is_empty(), "{:#?}", r.findings);
}

#[test]
fn shadowed_rules_by_an_earlier_deny_a_secret_name_or_an_earlier_allow() {
    let text = format!(
        "version = 1\n[content]\n{}{}{}{}{}",
        rule("no-infra", "deny", "[\"write\"]", "[\"infra\"]"),
        rule(
            "no-infra-prod",
            "deny",
            "[\"write\"]",
            "[\"infra/prod/**\"]"
        ),
        rule("no-vault", "deny", "[\"*\"]", "[\"config/secrets/**\"]"),
        rule("read-src", "allow", "[\"read\"]", "[\"src\"]"),
        rule("read-gen", "allow", "[\"read\"]", "[\"src/gen/**\"]"),
    );
    let r = lint(&text);
    let f = found(&r, "shadowed-rule");
    let got: Vec<(usize, &str)> = f
        .iter()
        .map(|f| (f.line, f.message.split('`').nth(1).unwrap_or("")))
        .collect();
    assert_eq!(
        got,
        vec![(9, "no-infra-prod"), (14, "no-vault"), (24, "read-gen")],
        "{:#?}",
        r.findings
    );
    assert!(
        f[0].message.contains("`no-infra` decides first"),
        "{}",
        f[0]
    );
    assert!(f[1].message.contains("`secrets:secret`"), "{}", f[1]);
    assert!(f[1].hint.contains("secret-name pattern"), "{}", f[1]);
    // The shadowed denies get no (failing) test suggestion.
    let untested: Vec<_> = found(&r, "untested-deny").iter().map(|f| f.line).collect();
    assert_eq!(untested, vec![4], "{:#?}", r.findings);
    // The other order: each deny decides somewhere.
    let text = format!(
        "version = 1\n[content]\n{}{}",
        rule(
            "no-infra-prod",
            "deny",
            "[\"write\"]",
            "[\"infra/prod/**\"]"
        ),
        rule("no-infra", "deny", "[\"write\"]", "[\"infra\"]"),
    );
    assert!(found(&lint(&text), "shadowed-rule").is_empty());
}

#[test]
fn suggested_cases_pass_when_pasted_in() {
    let mut text = format!(
        "version = 1\n[content]\n{}{}{}{}{}",
        rule("read-all", "allow", "[\"read\", \"list\"]", "[\"**\"]"),
        rule("no-infra", "deny", "[\"*\"]", "[\"infra\"]"),
        rule("no-infra-prod", "deny", "[\"*\"]", "[\"infra/prod/**\"]"),
        "[[rule]]\nid = \"no-db\"\neffect = \"deny\"\nops = [\"read\"]\nextensions = [\"sqlite\"]\n",
        rule_ext("no-gen", "deny", "[\"write\"]", "[\"gen/**\"]", "[\"rs\"]"),
    );
    // A size-conditioned deny decides only with a size: its case names one.
    text.push_str(&rule("big-ro", "deny", "[\"write\"]", "[\"data/**\"]"));
    text.push_str("min_size = 1048577\n");
    let r = lint(&text);
    let hints: Vec<String> = found(&r, "untested-deny")
        .iter()
        .map(|f| f.hint.clone())
        .collect();
    assert_eq!(hints.len(), 4, "{:#?}", r.findings);
    assert!(hints[1].contains("path = \"x.sqlite\""), "{hints:?}");
    assert!(hints[2].contains(".rs\""), "{hints:?}");
    assert!(hints[3].contains("size = 1048577"), "{hints:?}");
    for h in &hints {
        let case = h.strip_prefix("add [[test]] ").expect("a ready-made case");
        text.push_str(&format!("[[test]]\n{}\n", case.replace(", ", "\n")));
    }
    let pol = Policy::from_toml(&text, "t").unwrap();
    let run = crate::testrun::run_cases(&pol, &text);
    assert_eq!((run.passed(), run.failed()), (4, 0), "{:#?}", run.cases);
}

#[test]
fn workspace_globs_matching_nothing_and_floor_only_rules() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src/app")).unwrap();
    std::fs::write(ws.path().join("src/app/main.rs"), "fn main() {}").unwrap();
    std::fs::create_dir(ws.path().join("cfg")).unwrap();
    let policy_path = ws.path().join("cfg/policy.toml");
    let text = format!(
        "version = 1\n[content]\n{}{}{}",
        rule(
            "src",
            "allow",
            "[\"read\"]",
            "[\"src/**/*.rs\", \"lib/**\"]"
        ),
        rule("own", "allow", "[\"read\"]", "[\"cfg/policy.toml\"]"),
        rule(
            "no-SRC",
            "deny",
            "[\"write\"]",
            "[\"SRC/app\", \"**/node_modules\"]"
        ),
    );
    std::fs::write(&policy_path, &text).unwrap();
    let opts = LintOptions {
        workspace: Some(ws.path().to_path_buf()),
    };
    let r = lint_file(&policy_path, &opts);
    let missing: Vec<(usize, usize)> = found(&r, "workspace-no-match")
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| (f.line, f.col))
        .collect();
    let guard: Vec<(usize, usize)> = found(&r, "workspace-no-match")
        .iter()
        .filter(|f| f.severity == Severity::Note)
        .map(|f| (f.line, f.col))
        .collect();
    assert_eq!(guard, vec![pos_of(&text, "\"**/node_modules\"")]);
    // `SRC/app` is a deny: it matches `src/app` only if denies fold case.
    let deny_folds = Policy::from_toml(&text, "t")
        .unwrap()
        .decide(
            OpClass::Write,
            &fsgate_base::path::RelPath::parse_rooted("/src/app").unwrap(),
            crate::EntryKind::File,
        )
        .rule
        == "no-SRC";
    let mut want = vec![pos_of(&text, "\"lib/**\"")];
    if !deny_folds {
        want.push(pos_of(&text, "\"SRC/app\""));
    }
    assert_eq!(missing, want, "{:#?}", r.findings);
    let floor: Vec<_> = found(&r, "no-match").iter().map(|f| f.line).collect();
    assert_eq!(floor, vec![9], "{:#?}", r.findings);
    // Without a workspace neither is known.
    let r = lint(&text);
    assert!(found(&r, "workspace-no-match").is_empty() && found(&r, "no-match").is_empty());
}

#[test]
fn strong_content_rules_disabled() {
    let text = "version = 1\n[content]\ndisabled_rules = [\"generic-api-key\", \"private-key\"]\n";
    let r = lint(text);
    let f = found(&r, "content-disabled");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!((f[0].line, f[0].col), pos_of(text, "\"private-key\""));
    assert_eq!(f[0].severity, Severity::Warning);

    let text = format!(
        "version = 1\n[secrets]\nbuiltin = true\n[content]\nbuiltin = false\n{}",
        rule("all", "allow", "[\"read\"]", "[\"**\"]")
    );
    let f: Vec<_> = found(&lint(&text), "content-disabled")
        .iter()
        .map(|f| (f.line, f.col))
        .collect();
    assert_eq!(f, vec![(5, 1)]);

    let no_content = format!(
        "version = 1\n{}",
        rule("all", "allow", "[\"read\"]", "[\"**\"]")
    );
    let f: Vec<_> = found(&lint(&no_content), "content-disabled")
        .iter()
        .map(|f| (f.line, f.col))
        .collect();
    assert_eq!(f, vec![(1, 1)]);
    // Nothing readable or writable: nothing to scan.
    let deny_only = format!("version = 1\n{}", rule("d", "deny", "[\"*\"]", "[\"x\"]"));
    assert!(found(&lint(&deny_only), "content-disabled").is_empty());
}

#[test]
fn unknown_disabled_rule_is_reported_at_its_own_position() {
    let text =
        "version = 1\n[content]\ndisabled_rules = [\n  \"generic-api-key\",\n  \"no-such\",\n]\n";
    let r = lint(text);
    assert!(r.invalid);
    let f = &r.findings[0];
    assert_eq!((f.line, f.col, f.code), (5, 3, "invalid"), "{f}");
    assert!(
        f.message.contains("no content rule has the id `no-such`"),
        "{f}"
    );
}

#[test]
fn a_waiver_is_a_note_at_its_entry() {
    let text = format!(
        "version = 1\n[content]\n[secrets]\ndisabled_patterns = [\"secret\"]\n{}",
        rule("all", "allow", "[\"read\", \"list\"]", "[\"**\"]")
    );
    let r = lint(&text);
    let f = found(&r, "waived-pattern");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!((f[0].line, f[0].col), pos_of(&text, "\"secret\""));
    assert_eq!(f[0].severity, Severity::Note);
    assert!(
        f[0].message.contains("`secrets:secret` (/secret/)"),
        "{}",
        f[0]
    );
}

#[test]
fn findings_about_inherited_rules_name_the_base_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The base's second deny never decides (the first covers it); the project adds one.
    let base = format!(
        "version = 1\n[content]\n{}{}{}",
        rule("no-infra", "deny", "[\"write\"]", "[\"infra\"]"),
        rule("no-prod", "deny", "[\"write\"]", "[\"infra/prod/**\"]"),
        rule("all", "allow", "[\"*\"]", "[\"**\"]"),
    );
    std::fs::write(dir.path().join("base.toml"), &base).expect("write");
    let project = format!(
        "version = 1\nextends = \"base.toml\"\n{}{}",
        rule("no-gen", "deny", "[\"write\"]", "[\"gen\"]"),
        test_case("write", "gen/a", "deny"),
    );
    let path = dir.path().join("project.toml");
    std::fs::write(&path, &project).expect("write");
    let r = lint_file(&path, &LintOptions::default());
    let shadowed = found(&r, "shadowed-rule");
    assert_eq!(shadowed.len(), 1, "{:#?}", r.findings);
    assert!(shadowed[0].file.ends_with("base.toml"), "{}", shadowed[0]);
    assert_eq!(shadowed[0].line, pos_of(&base, "id = \"no-prod\"").0);
    // The base's denies are tested in the base, not asked of the project.
    assert!(
        found(&r, "untested-deny")
            .iter()
            .all(|f| !f.message.contains("no-infra") && !f.message.contains("no-prod")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn size_conditioned_denies_are_not_called_duplicates_or_always_winning() {
    let sized = |id: &str, effect: &str, ops: &str, size: &str| {
        format!("{}{size}\n", rule(id, effect, ops, "[\"src/**\"]"))
    };
    let text = format!(
        "version = 1\n{}{}{}{}",
        sized("src", "allow", "[\"read\", \"write\"]", "max_size = 5000"),
        sized("big-ro", "deny", "[\"write\"]", "min_size = 1000"),
        sized("small-del", "deny", "[\"delete\"]", "max_size = 10"),
        sized("big-del", "deny", "[\"delete\"]", "min_size = 11"),
    );
    let r = lint(&text);
    let c = codes(&r);
    assert!(!c.contains(&"shadowed-ops"), "{:#?}", r.findings);
    assert!(!c.contains(&"duplicate-rule"), "{:#?}", r.findings);
    // A deny whose range holds the allow's does leave it dead.
    let text = text.replace("min_size = 1000", "min_size = 0");
    assert!(codes(&lint(&text)).contains(&"shadowed-ops"));
}

#[test]
fn notes_on_whole_tree_and_double_star_forms_give_a_usable_hint() {
    let text = format!(
        "version = 1\n[content]\n{}",
        rule("w", "deny", "[\"write\"]", "[\"./\", \"./**\", \"a/**/\"]"),
    );
    let r = lint(&text);
    let hints: Vec<(&str, &str)> = found(&r, "glob-form")
        .iter()
        .map(|f| (f.message.as_str(), f.hint.as_str()))
        .collect();
    assert_eq!(hints.len(), 3, "{:#?}", r.findings);
    assert!(hints[0].0.contains("the whole tree"), "{hints:?}");
    assert_eq!(hints[0].1, "write `**`, which means the same");
    assert!(hints[1].0.contains("the whole tree"), "{hints:?}");
    assert_eq!(hints[2].1, "write `a/**`, which means the same");
}

#[test]
fn an_extension_deny_leaves_an_extension_allow_its_directories() {
    let text = format!(
        "version = 1\n[content]\n{}{}",
        rule_ext(
            "list-rs",
            "allow",
            "[\"list\", \"read\"]",
            "[\"src/**\"]",
            "[\"rs\"]"
        ),
        rule_ext(
            "no-rs",
            "deny",
            "[\"list\", \"read\"]",
            "[\"**\"]",
            "[\"rs\"]"
        ),
    );
    let r = lint(&text);
    // It decides `list src/sub`, so it is not dead; its read never decides.
    assert!(!codes(&r).contains(&"dead-rule"), "{:#?}", r.findings);
    assert!(!codes(&r).contains(&"shadowed-rule"), "{:#?}", r.findings);
    let f = found(&r, "shadowed-ops");
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert!(f[0].message.contains("ops [read]"), "{}", f[0]);
}

#[test]
fn an_ask_rule_a_deny_hides_is_shadowed() {
    let text = format!(
        "version = 1\n{}{}{}{}",
        rule("no-ci", "deny", "[\"write\"]", "[\".github\"]"),
        rule("ask-ci", "ask", "[\"write\"]", "[\".github/workflows/**\"]"),
        rule("all", "allow", "[\"*\"]", "[\"**\"]"),
        test_case("write", ".github/workflows/ci.yml", "deny"),
    );
    let r = lint(&text);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "shadowed-rule")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(f.line, 8, "{f}");
    assert!(
        f.message
            .contains("ask rule `ask-ci` never decides: `no-ci` decides first"),
        "{f}"
    );
    assert!(!codes(&r).contains(&"untested-ask"), "{:#?}", r.findings);
}

#[test]
fn an_ask_rule_covering_list_is_flagged_and_an_untested_one_gets_a_case() {
    let text = format!(
        "version = 1\n{}{}{}",
        rule(
            "ask-infra",
            "ask",
            "[\"write\", \"list\"]",
            "[\"infra/**\"]"
        ),
        rule("all", "allow", "[\"*\"]", "[\"**\"]"),
        test_case("read", "src/a.rs", "allow"),
    );
    let r = lint(&text);
    let list = r
        .findings
        .iter()
        .find(|f| f.code == "ask-list")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!((list.line, list.severity), (3, Severity::Warning));
    assert!(
        list.message
            .contains("leave out the entries it covers rather than asking"),
        "{list}"
    );
    let untested = r
        .findings
        .iter()
        .find(|f| f.code == "untested-ask")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert!(
        untested
            .message
            .contains("ask rule `ask-infra` has no [[test]] that it decides"),
        "{untested}"
    );
    assert!(untested.hint.contains("expect = \"ask\""), "{untested}");
    assert!(untested.hint.contains("rule = \"ask-infra\""), "{untested}");
    // Without list, and with a case it decides: clean.
    let text = format!(
        "version = 1\n{}{}{}{}",
        rule("ask-infra", "ask", "[\"write\"]", "[\"infra/**\"]"),
        rule("all", "allow", "[\"*\"]", "[\"**\"]"),
        test_case("write", "infra/main.tf", "ask"),
        test_case("read", "src/a.rs", "allow"),
    );
    let r = lint(&text);
    assert!(
        !codes(&r).iter().any(|c| c.contains("ask")),
        "{:#?}",
        r.findings
    );
}

#[test]
fn an_ask_rule_naming_fsgate_s_own_files_is_an_error() {
    let text = format!(
        "version = 1\n{}{}",
        rule("ask-state", "ask", "[\"write\"]", "[\".fsgate/**\"]"),
        test_case("write", ".fsgate/x", "ask"),
    );
    let r = lint(&text);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "fixed-floor")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!(f.severity, Severity::Error);
    assert!(f.message.starts_with("ask rule `ask-state`"), "{f}");
}

#[test]
fn an_ask_rule_reaching_the_policy_file_in_the_workspace_is_an_error() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("cfg")).unwrap();
    let policy_path = ws.path().join("cfg/policy.toml");
    let text = format!(
        "version = 1\n{}{}{}",
        rule("cfg", "ask", "[\"write\"]", "[\"cfg/**\"]"),
        rule("all", "allow", "[\"read\", \"list\"]", "[\"**\"]"),
        test_case("write", "cfg/a", "ask"),
    );
    std::fs::write(&policy_path, &text).unwrap();
    let opts = LintOptions {
        workspace: Some(ws.path().to_path_buf()),
    };
    let r = lint_file(&policy_path, &opts);
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "fixed-floor")
        .unwrap_or_else(|| panic!("{:#?}", r.findings));
    assert_eq!((f.severity, f.line), (Severity::Error, 3));
    assert!(f.message.starts_with("ask rule `cfg` reaches"), "{f}");
}

#[test]
fn rules_scoped_to_a_workspace_are_checked_as_they_apply_there() {
    let text = format!(
        "version = 1\n{}{}workspaces = [\"docs\"]\n",
        rule("read-all", "allow", "[\"read\", \"list\"]", "[\"**\"]"),
        rule("read-docs", "allow", "[\"read\"]", "[\"docs/**\"]"),
    );
    let r = lint(&text);
    let shadowed: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.message.contains("`read-docs` never decides"))
        .collect();
    assert_eq!(shadowed.len(), 1, "{:?}", r.findings);
}
