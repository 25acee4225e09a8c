//! `fsgate policy check` on a policy holding the mistakes that make rules match the wrong
//! paths or never win: each reported at its value with a stable code, exit 1, and every
//! `[[test]]` it suggests passes `fsgate policy test` once pasted in.

use std::path::Path;

use crate::common::run_cli;

/// Deliberate mistakes: a deny hidden by another deny and by a secret-name pattern, an
/// extension-only deny, a top-level `*`, `x/*.ext` with the wrong extension, `**/*.md`,
/// strong content rules switched off.
const MISTAKES: &str = r#"version = 1

[content]
disabled_rules = ["generic-api-key", "private-key"]

[[rule]]
id = "no-infra"
effect = "deny"
ops = ["write", "delete"]
paths = ["infra"]

[[rule]]
id = "no-infra-prod"
effect = "deny"
ops = ["write", "delete"]
paths = ["infra/prod/**"]

[[rule]]
id = "no-vault"
effect = "deny"
ops = ["*"]
paths = ["config/secrets/**"]

[[rule]]
id = "no-db"
effect = "deny"
ops = ["read"]
extensions = ["sqlite"]

[[rule]]
id = "no-generated"
effect = "deny"
ops = ["write"]
paths = ["gen/**"]
extensions = ["rs"]

[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]

[[rule]]
id = "write-top"
effect = "allow"
ops = ["write"]
paths = ["*"]

[[rule]]
id = "write-docs"
effect = "allow"
ops = ["write", "delete"]
paths = ["docs/*.md", "**/*.md"]
extensions = ["txt"]
"#;

fn run(args: &[&str]) -> (i32, String) {
    let out = run_cli(args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

#[test]
fn check_finds_rules_that_match_wrongly_and_its_suggested_tests_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("mistakes.toml");
    std::fs::write(&file, MISTAKES).expect("write");
    let f = s(&file);
    let (code, out) = run(&["policy", "check", f]);
    assert_eq!(code, 1, "{out}");
    for want in [
        format!("{f}:4:38: warning: disabled_rules switches off `private-key`"),
        format!(
            "{f}:13:1: warning: deny rule `no-infra-prod` never decides: `no-infra` decides first"
        ),
        format!(
            "{f}:19:1: warning: deny rule `no-vault` never decides: `secrets:secret` decides first"
        ),
        format!(
            "{f}:47:10: warning: glob `*` of allow rule `write-top` covers the whole tree like `**`"
        ),
        format!("{f}:53:10: warning: glob `docs/*.md` of rule `write-docs` names .md files"),
        format!("{f}:53:23: warning: glob `**/*.md` of rule `write-docs` names .md files"),
    ] {
        assert!(out.lines().any(|l| l.starts_with(&want)), "{want}\n{out}");
    }
    assert!(!out.contains("`generic-api-key`"), "{out}");

    let (code, json) = run(&["policy", "check", "--json", f]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let findings = doc["findings"].as_array().expect("findings");
    let codes: Vec<&str> = findings.iter().filter_map(|x| x["code"].as_str()).collect();
    for c in [
        "content-disabled",
        "shadowed-rule",
        "broad-glob",
        "no-match",
        "untested-deny",
    ] {
        assert!(codes.contains(&c), "{c}: {codes:?}");
    }
    // The shadowed denies get no suggestion; the others get one that passes.
    let hints: Vec<&str> = findings
        .iter()
        .filter(|x| x["code"] == "untested-deny")
        .filter_map(|x| x["hint"].as_str())
        .collect();
    assert_eq!(hints.len(), 3, "{hints:?}");
    assert!(
        hints.iter().any(|h| h.contains("path = \"x.sqlite\"")),
        "{hints:?}"
    );
    let mut pasted = MISTAKES.to_string();
    for h in &hints {
        let case = h.strip_prefix("add [[test]] ").expect("a ready-made case");
        pasted.push_str(&format!("\n[[test]]\n{}\n", case.replace(", ", "\n")));
    }
    std::fs::write(&file, &pasted).expect("write");
    let (code, out) = run(&["policy", "test", f]);
    assert_eq!(code, 0, "{pasted}\n{out}");
    assert!(out.ends_with("3 passed, 0 failed\n"), "{out}");
    let (_, out) = run(&["policy", "check", f]);
    assert!(
        !out.contains("untested-deny") && !out.contains("has no [[test]]"),
        "{out}"
    );

    // With the real tree: globs matching nothing in it.
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("infra")).expect("mkdir");
    let (code, out) = run(&["policy", "check", "--workspace", s(&ws), f]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("{f}:22:10: warning: glob `config/secrets/**` of rule `no-vault` matches nothing in the workspace")),
        "{out}"
    );
    assert!(
        !out.contains("glob `infra` of rule `no-infra` matches nothing"),
        "{out}"
    );
}
