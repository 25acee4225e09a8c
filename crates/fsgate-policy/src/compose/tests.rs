//! Sets, waivers and `extends`: what loads, what merges, and every refusal.

use crate::{EntryKind, OpClass, Policy, PolicyError};
use fsgate_base::path::RelPath;

fn p(s: &str) -> RelPath {
    RelPath::parse_rooted(s).expect("path")
}

fn load(text: &str) -> Policy {
    Policy::from_toml(text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn rule_of(pol: &Policy, op: OpClass, path: &str) -> String {
    pol.decide(op, &p(path), EntryKind::File).rule.to_string()
}

/// (line, col, message) of a located error, else the error's text.
fn located(r: Result<Policy, PolicyError>) -> (usize, usize, String) {
    match r {
        Err(PolicyError::Located {
            line, col, message, ..
        }) => (line, col, message),
        Err(e) => panic!("not a located error: {e}"),
        Ok(_) => panic!("loaded"),
    }
}

const SETS: &str = r#"version = 1
[sets]
infra = ["infra/**", "terraform"]
docs = ["docs/**"]

[[rule]]
id = "no-infra"
effect = "deny"
ops = ["write", "delete"]
paths = ["@infra"]

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
"#;

#[test]
fn a_set_expands_where_it_is_named_and_an_unused_set_is_fine() {
    let pol = load(SETS);
    assert_eq!(rule_of(&pol, OpClass::Write, "infra/a.tf"), "no-infra");
    assert_eq!(rule_of(&pol, OpClass::Write, "terraform/x/y"), "no-infra");
    assert_eq!(rule_of(&pol, OpClass::Read, "infra/a.tf"), "all");
    assert_eq!(rule_of(&pol, OpClass::Write, "src/a.rs"), "all");
    assert_eq!(
        pol.rules()[0].globs,
        vec!["infra/**".to_string(), "terraform".to_string()]
    );
    assert_eq!(pol.rule_sets("no-infra").collect::<Vec<_>>(), ["infra"]);
    assert_eq!(pol.rule_sets("all").count(), 0);
}

#[test]
fn an_unknown_set_is_an_error_at_its_entry() {
    let text = SETS.replace("paths = [\"@infra\"]", "paths = [\"src\", \"@infar\"]");
    let (line, col, msg) = located(Policy::from_toml(&text, "t"));
    assert_eq!((line, col), (10, 17), "{msg}");
    assert!(msg.contains("unknown set `@infar`"), "{msg}");
}

#[test]
fn a_set_naming_a_set_and_an_empty_set_are_refused() {
    let text = SETS.replace("docs = [\"docs/**\"]", "docs = [\"docs/**\", \"@infra\"]");
    let (line, col, msg) = located(Policy::from_toml(&text, "t"));
    assert_eq!((line, col), (4, 20), "{msg}");
    assert!(msg.contains("cannot name another set"), "{msg}");
    let text = SETS.replace("docs = [\"docs/**\"]", "docs = []");
    let e = Policy::from_toml(&text, "t").err().map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("sets.docs (line 4)") && e.contains("empty")));
}

const WAIVED: &str = r#"version = 1
[secrets]
disabled_patterns = ["secret"]

[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
"#;

#[test]
fn a_waived_pattern_lets_its_paths_through_and_says_so() {
    let pol = load(WAIVED);
    let d = pol.decide(
        OpClass::Read,
        &p("docs/secret-rotation.md"),
        EntryKind::File,
    );
    assert!(d.allowed(), "{d:?}");
    assert_eq!(d.rule, "read-all");
    assert_eq!(d.waived, vec!["secrets:secret"]);
    // Every other built-in pattern still holds.
    let env = pol.decide(OpClass::Read, &p(".env"), EntryKind::File);
    assert_eq!((env.allowed(), env.rule), (false, "secrets:dotenv"));
    assert!(env.waived.is_empty());
    let plain = pol.decide(OpClass::Read, &p("docs/a.md"), EntryKind::File);
    assert!(plain.waived.is_empty());
    let (_, trace) = pol.explain(
        OpClass::Read,
        &p("docs/secret-rotation.md"),
        &crate::PathFacts::kind(EntryKind::File),
    );
    let step = trace
        .iter()
        .find(|t| t.rule == "secrets:secret")
        .expect("step");
    assert!(
        step.note.contains("waived by disabled_patterns"),
        "{}",
        step.note
    );
    assert!(step.note.contains("lets it through"), "{}", step.note);
    assert_eq!(pol.waived_patterns().len(), 1);
    // Without the waiver the same path is denied.
    let strict = load(&WAIVED.replace("disabled_patterns = [\"secret\"]", ""));
    assert_eq!(
        rule_of(&strict, OpClass::Read, "docs/secret-rotation.md"),
        "secrets:secret"
    );
}

#[test]
fn waivers_accept_the_prefixed_id_and_refuse_unknown_ones_at_their_position() {
    let pol = load(&WAIVED.replace("[\"secret\"]", "[\"secrets:secret\"]"));
    assert_eq!(rule_of(&pol, OpClass::Read, "a/secret.txt"), "read-all");
    let text = WAIVED.replace("[\"secret\"]", "[\"netrc\", \"secrets:nope\"]");
    let (line, col, msg) = located(Policy::from_toml(&text, "t"));
    assert_eq!((line, col), (3, 31), "{msg}");
    assert!(
        msg.contains("unknown built-in secret-name pattern `nope`"),
        "{msg}"
    );
    let off = WAIVED.replace("[secrets]\n", "[secrets]\nbuiltin = false\n");
    let (_, _, msg) = located(Policy::from_toml(&off, "t"));
    assert!(msg.contains("builtin = false"), "{msg}");
}

// ---- extends ----------------------------------------------------------------------

const BASE: &str = r#"version = 1
[sets]
infra = ["infra/**"]

[limits]
max_write_bytes = 1000000

[[rule]]
id = "no-infra"
effect = "deny"
ops = ["write", "delete"]
paths = ["@infra"]

[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list", "write"]
paths = ["src/**", "docs"]

[[rule]]
id = "tools"
effect = "allow"
ops = ["read"]
paths = ["tools/**"]
overridable = true
"#;

/// Writes the base and the project into a fresh directory; loads the project.
fn extend(project: &str) -> Result<Policy, PolicyError> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("base.toml"), BASE).expect("base");
    let path = dir.path().join("project.toml");
    std::fs::write(&path, project).expect("project");
    Policy::load(&path)
}

fn refused(project: &str) -> String {
    match extend(project) {
        Ok(_) => panic!("loaded:\n{project}"),
        Err(e) => e.to_string(),
    }
}

fn project(rest: &str) -> String {
    format!("version = 1\nextends = \"base.toml\"\n{rest}")
}

#[test]
fn the_merge_puts_base_rules_first_and_keeps_base_denies() {
    let pol = extend(&project(
        r#"
[[rule]]
id = "no-src-gen"
effect = "deny"
ops = ["write"]
paths = ["src/gen"]

[[rule]]
id = "src-read"
effect = "allow"
ops = ["read"]
paths = ["src/lib/**"]

[[rule]]
id = "infra-write"
effect = "deny"
ops = ["read"]
paths = ["@infra"]

[[test]]
op = "write"
path = "src/gen/a.rs"
expect = "deny"
"#,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<&str> = pol.rules().iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "no-infra",
            "src",
            "tools",
            "no-src-gen",
            "src-read",
            "infra-write"
        ]
    );
    assert_eq!(rule_of(&pol, OpClass::Write, "src/gen/a.rs"), "no-src-gen");
    assert_eq!(rule_of(&pol, OpClass::Write, "src/a.rs"), "src");
    assert_eq!(rule_of(&pol, OpClass::Read, "infra/x"), "infra-write");
    assert_eq!(rule_of(&pol, OpClass::Write, "infra/x"), "no-infra");
    assert_eq!(pol.raw().tests.len(), 1, "the project's own cases");
    assert!(
        pol.rule_origin("no-infra")
            .is_some_and(|f| f.ends_with("base.toml"))
    );
    assert_eq!(pol.rule_origin("no-src-gen"), None);
    assert_eq!(pol.bases().len(), 1);
    assert_eq!(pol.limits().max_write_bytes, 1_000_000);
}

#[test]
fn a_narrower_replacement_and_an_overridable_one_load() {
    let pol = extend(&project(
        r#"
[limits]
max_write_bytes = 500

[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/app/**"]

[[rule]]
id = "tools"
effect = "allow"
ops = ["*"]
paths = ["**"]
"#,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rule_of(&pol, OpClass::Write, "src/app/a.rs"), "tools");
    assert_eq!(rule_of(&pol, OpClass::Read, "src/app/a.rs"), "src");
    assert_eq!(rule_of(&pol, OpClass::Write, "infra/a"), "no-infra");
    assert_eq!(pol.rules().len(), 3);
    assert_eq!(pol.rule_origin("src"), None, "replaced by the project");
    assert_eq!(pol.limits().max_write_bytes, 500);
}

#[test]
fn replacing_a_base_rule_with_a_looser_one_is_refused() {
    for (rule, why) in [
        (
            "id = \"src\"\neffect = \"allow\"\nops = [\"read\", \"delete\"]\npaths = [\"src/**\"]",
            "covers delete",
        ),
        (
            "id = \"src\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"lib/**\"]",
            "reaches beyond",
        ),
        (
            "id = \"src\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"**/*.rs\"]",
            "no literal directory",
        ),
        (
            "id = \"no-infra\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"infra/prod\"]",
            "only an allow rule",
        ),
    ] {
        let e = refused(&project(&format!("[[rule]]\n{rule}\n")));
        assert!(
            e.contains("base.toml") && e.contains("not `overridable"),
            "{e}"
        );
        assert!(e.contains(why), "{why}: {e}");
        assert!(e.contains("line 4"), "{e}");
    }
}

#[test]
fn a_new_allow_rule_must_lie_inside_a_base_allow() {
    let e = refused(&project(
        "[[rule]]\nid = \"more\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"etc/**\"]\n",
    ));
    assert!(
        e.contains("rule `more` is a new allow rule that no allow rule of the base covers"),
        "{e}"
    );
    assert!(e.contains("base.toml"), "{e}");
    // Listing `docs` is allowed by the base, listing `src` too: `src/a/**` is covered,
    // and so are `src/**` itself and `src/**/*.rs` (beneath `src`, like the base's).
    for paths in ["\"src/a/**\"", "\"src/**\"", "\"src/**/*.rs\", \"docs/x\""] {
        extend(&project(&format!(
            "[[rule]]\nid = \"a\"\neffect = \"allow\"\nops = [\"list\"]\npaths = [{paths}]\n"
        )))
        .unwrap_or_else(|e| panic!("{paths}: {e}"));
    }
    // `src` itself is not beneath `src`: the base never allowed reading it as a file.
    let e = refused(&project(
        "[[rule]]\nid = \"a\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"src\"]\n",
    ));
    assert!(e.contains("reaches beyond"), "{e}");
}

#[test]
fn limits_sections_secrets_and_content_cannot_loosen_the_base() {
    for (rest, what) in [
        (
            "[limits]\nmax_write_bytes = 2000000\n",
            "raises limits.max_write_bytes",
        ),
        (
            "[limits]\nmax_process_file_bytes = 536870912\n",
            "raises limits.max_process_file_bytes",
        ),
        ("[limits]\nbinary = \"base64\"\n", "loosens limits.binary"),
        (
            "[secrets]\nbuiltin = false\n",
            "cannot turn off the base's built-in",
        ),
        (
            "[secrets]\ndisabled_patterns = [\"secret\"]\n",
            "cannot waive `secrets:secret`",
        ),
        ("[audit]\nfsync = \"never\"\n", "[audit] is set by the base"),
        (
            "[content]\nbuiltin = false\n",
            "cannot turn off the base's built-in content",
        ),
        (
            "[content]\ndisabled_rules = [\"private-key\"]\n",
            "cannot disable the base's content rule `private-key`",
        ),
        (
            "[content]\n[[content.allowlists]]\npaths = ['''x''']\n",
            "an allowlist here",
        ),
        (
            "[content]\ngitleaks_config = \"g.toml\"\n",
            "a gitleaks config here",
        ),
        (
            "[content]\n[[content.rules]]\nid = \"private-key\"\nregex = 'never_matches'\n",
            "content rule `private-key` is the base's",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = format!("{BASE}\n[audit]\nfsync = \"always\"\n[content]\n");
        std::fs::write(dir.path().join("base.toml"), base).expect("base");
        let path = dir.path().join("project.toml");
        std::fs::write(&path, project(rest)).expect("project");
        let e = Policy::load(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(what) && e.contains("base.toml"), "{rest}: {e}");
    }
}

#[test]
fn sections_the_base_lacks_may_be_set_and_the_base_s_are_inherited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = format!("{BASE}\n[acp]\nallow_terminal = true\n");
    std::fs::write(dir.path().join("base.toml"), base).expect("base");
    let path = dir.path().join("project.toml");
    std::fs::write(&path, project("[ws]\nmax_connections = 3\n")).expect("project");
    let pol = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(pol.raw().acp.as_ref().is_some_and(|a| a.allow_terminal));
    assert!(pol.raw().ws.is_some());
}

#[test]
fn a_content_rule_id_the_base_uses_is_refused_at_the_project_s_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = format!(
        "{BASE}\n[content]\ndisabled_rules = [\"mytok\"]\n[[content.rules]]\nid = \"mytok\"\nregex = 'tok_[a-z]{{8}}'\n"
    );
    std::fs::write(dir.path().join("base.toml"), base).expect("base");
    let path = dir.path().join("project.toml");
    let rest = "\n\n[content]\n[[content.rules]]\nid = \"mytok\"\nregex = 'tok_[a-z]{9}'\n";
    std::fs::write(&path, project(rest)).expect("project");
    match Policy::load(&path) {
        Err(PolicyError::Invalid { line, message, .. }) => {
            assert_eq!(line, 7, "{message}");
            assert!(message.contains("`mytok` is the base's"), "{message}");
        }
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn a_base_that_is_no_policy_file_is_refused_without_quoting_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("id_rsa");
    std::fs::write(&key, "AKIAIOSFODNN7EXAMPLE secret=hunter2\n").expect("key");
    for (base, what) in [
        (key.display().to_string(), "not a policy file"),
        ("/dev/zero".to_string(), "not a regular file"),
    ] {
        let path = dir.path().join("project.toml");
        std::fs::write(&path, project("").replace("base.toml", &base)).expect("project");
        let e = Policy::load(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(what), "{e}");
        assert!(!e.contains("hunter2") && !e.contains("AKIA"), "{e}");
    }
}

#[test]
fn a_section_the_base_lacks_may_not_loosen_its_defaults() {
    for (rest, what) in [
        ("[acp]\nallow_terminal = true\n", "acp.allow_terminal"),
        ("[audit]\nfsync = \"never\"\n", "audit.fsync"),
        ("[ws]\nmax_connections = 100000\n", "ws.max_connections"),
    ] {
        let e = refused(&project(rest));
        assert!(e.contains(what) && e.contains("base.toml"), "{rest}: {e}");
    }
    // The defaults written out, or tighter, load.
    let rest = "[acp]\nallow_terminal = false\n[audit]\nfsync = \"always\"\n";
    extend(&project(rest)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn only_the_root_marks_rules_overridable() {
    let e = refused(&project(
        "[[rule]]\nid = \"x\"\neffect = \"deny\"\nops = [\"read\"]\npaths = [\"x\"]\noverridable = true\n",
    ));
    assert!(e.contains("only a policy that extends nothing"), "{e}");
}

#[test]
fn chains_follow_relative_paths_and_refuse_cycles_depth_and_missing_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir(d.join("org")).expect("mkdir");
    std::fs::write(d.join("org/root.toml"), BASE).expect("root");
    std::fs::write(
        d.join("team.toml"),
        project("").replace("base.toml", "org/root.toml"),
    )
    .expect("team");
    std::fs::write(
        d.join("p.toml"),
        project("").replace("base.toml", "team.toml"),
    )
    .expect("p");
    let pol = Policy::load(&d.join("p.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pol.bases().len(), 2);
    assert!(
        pol.bases()[0].ends_with("org/root.toml"),
        "{:?}",
        pol.bases()
    );
    // A cycle: root extends p.
    std::fs::write(
        d.join("org/root.toml"),
        project("").replace("base.toml", "../p.toml"),
    )
    .expect("root");
    let e = Policy::load(&d.join("p.toml"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("cycle"), "{e}");
    // A missing base names the file that extends it and the base.
    std::fs::write(
        d.join("q.toml"),
        project("").replace("base.toml", "nope.toml"),
    )
    .expect("q");
    let e = Policy::load(&d.join("q.toml"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("q.toml") && e.contains("nope.toml"), "{e}");
    // Depth: a chain of MAX_CHAIN + 1 files.
    for i in 0..=super::extends::MAX_CHAIN {
        let body = if i == 0 {
            BASE.to_string()
        } else {
            project("").replace("base.toml", &format!("c{}.toml", i - 1))
        };
        std::fs::write(d.join(format!("c{i}.toml")), body).expect("c");
    }
    let last = d.join(format!("c{}.toml", super::extends::MAX_CHAIN));
    let e = Policy::load(&last)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("at most"), "{e}");
}

#[test]
fn errors_in_a_base_name_the_base_and_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = BASE.replace(
        "ops = [\"read\"]\npaths = [\"tools/**\"]",
        "ops = [\"reed\"]\npaths = [\"tools/**\"]",
    );
    std::fs::write(dir.path().join("base.toml"), bad).expect("base");
    let path = dir.path().join("project.toml");
    std::fs::write(&path, project("")).expect("project");
    let e = Policy::load(&path)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("base.toml") && e.contains("line 23") && e.contains("reed"),
        "{e}"
    );
}

#[test]
fn the_policy_hash_covers_the_base() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("project.toml");
    std::fs::write(&path, project("")).expect("project");
    std::fs::write(dir.path().join("base.toml"), BASE).expect("base");
    let first = Policy::load(&path).expect("load").sha256().to_string();
    std::fs::write(dir.path().join("base.toml"), format!("{BASE}\n# changed\n")).expect("base");
    let second = Policy::load(&path).expect("load").sha256().to_string();
    assert_ne!(first, second);
    // A single file keeps the plain hash of its text.
    let single = load(SETS);
    assert_eq!(
        single.sha256(),
        hex::encode(fsgate_base::sha256::Sha256::digest(SETS))
    );
}

#[test]
fn a_project_uses_the_base_s_sets_but_cannot_redefine_them() {
    let pol = extend(&project(
        "[[rule]]\nid = \"no-infra-read\"\neffect = \"deny\"\nops = [\"read\"]\npaths = [\"@infra\"]\n",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rule_of(&pol, OpClass::Read, "infra/a"), "no-infra-read");
    assert_eq!(pol.rule_sets("no-infra").collect::<Vec<_>>(), ["infra"]);
    assert_eq!(
        pol.rule_sets("no-infra-read").collect::<Vec<_>>(),
        ["infra"]
    );
    let e = refused(&project("[sets]\ninfra = [\"x\"]\n"));
    assert!(e.contains("defined by the base"), "{e}");
}

#[test]
fn secrets_and_content_rules_add_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = format!("{BASE}\n[content]\nops = [\"read\"]\n");
    std::fs::write(dir.path().join("base.toml"), base).expect("base");
    let path = dir.path().join("project.toml");
    let rest = r#"
[secrets]
patterns = [{ id = "tfstate", regex = '\.tfstate$' }]

[content]
builtin = true
ops = ["write"]

[[content.rules]]
id = "internal-token"
regex = 'itok_[a-z0-9]{16}'
"#;
    std::fs::write(&path, project(rest)).expect("project");
    let pol = Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rule_of(&pol, OpClass::Read, "src/x.tfstate"),
        "secrets:tfstate"
    );
    assert_eq!(rule_of(&pol, OpClass::Read, "src/.env"), "secrets:dotenv");
    let sc = pol.content_scanner().expect("content rules");
    let ids: Vec<&str> = sc.rule_ids().collect();
    assert!(ids.contains(&"content:private-key"), "{ids:?}");
    assert!(ids.contains(&"content:internal-token"), "{ids:?}");
    assert!(sc.applies_to(OpClass::Read) && sc.applies_to(OpClass::Write));
}

#[test]
fn a_replacement_keeps_within_the_base_rules_size_range() {
    let rules = |extra: &str| {
        let text = format!(
            "version = 1\n[[rule]]\nid = \"r\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"src/**\"]\n{extra}"
        );
        load(&text).rules()[0].clone()
    };
    let base = rules("min_size = 10\nmax_size = 1000\n");
    let narrower = |p: &crate::Rule| super::narrower::narrower(p, &base);
    assert!(narrower(&rules("min_size = 20\nmax_size = 500\n")).is_ok());
    let none = narrower(&rules("")).expect_err("no size range");
    assert!(none.contains("min_size 10"), "{none}");
    let larger = narrower(&rules("min_size = 10\nmax_size = 2000\n")).expect_err("larger");
    assert!(larger.contains("max_size 1000"), "{larger}");
    let smaller = narrower(&rules("min_size = 1\nmax_size = 1000\n")).expect_err("smaller");
    assert!(smaller.contains("min_size 10"), "{smaller}");
}

/// Loads `project` extending `base` (both written into a fresh directory).
fn extend_on(base: &str, project: &str) -> Result<Policy, PolicyError> {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("base.toml"), base).expect("base");
    let path = dir.path().join("project.toml");
    std::fs::write(&path, project).expect("project");
    Policy::load(&path)
}

fn effect_of(pol: &Policy, op: OpClass, path: &str) -> (crate::Effect, String) {
    let d = pol.decide(op, &p(path), EntryKind::File);
    (d.effect, d.rule.to_string())
}

#[test]
fn a_project_may_turn_a_base_allow_into_ask_but_not_ask_where_the_base_allows_nothing() {
    use crate::Effect;
    let pol = extend(&project(
        "[[rule]]\nid = \"ask-gen\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\"src/gen/**\"]\n",
    ))
    .expect("an ask within a base allow tightens");
    assert_eq!(
        effect_of(&pol, OpClass::Write, "src/gen/a.rs"),
        (Effect::Ask, "ask-gen".into())
    );
    assert_eq!(
        effect_of(&pol, OpClass::Write, "src/a.rs"),
        (Effect::Allow, "src".into())
    );
    // The base's own allow rule, replaced by an ask over the same paths.
    let pol = extend(&project(
        "[[rule]]\nid = \"src\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\"src/**\"]\n",
    ))
    .expect("an ask replacing an allow over its paths tightens");
    assert_eq!(
        effect_of(&pol, OpClass::Write, "src/a.rs"),
        (Effect::Ask, "src".into())
    );
    let e = refused(&project(
        "[[rule]]\nid = \"ask-etc\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\"etc/**\"]\n",
    ));
    assert!(
        e.contains("rule `ask-etc` is a new ask rule that no allow or ask rule of the base covers"),
        "{e}"
    );
}

const ASK_BASE: &str = r#"version = 1
[[rule]]
id = "ci"
effect = "ask"
ops = ["write", "delete"]
paths = [".github/**"]

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]

[ask]
timeout_secs = 60
"#;

#[test]
fn a_base_ask_is_never_loosened_by_the_project() {
    use crate::Effect;
    let e = extend_on(
        ASK_BASE,
        &project("[[rule]]\nid = \"ci\"\neffect = \"allow\"\nops = [\"write\"]\npaths = [\".github/**\"]\n"),
    )
    .expect_err("an allow replacing an ask")
    .to_string();
    assert!(e.contains("nobody would be asked"), "{e}");
    // A project allow within the base's `all` loads, but the base's ask still decides.
    let pol = extend_on(
        ASK_BASE,
        &project("[[rule]]\nid = \"gh\"\neffect = \"allow\"\nops = [\"write\"]\npaths = [\".github/**\"]\n"),
    )
    .expect("an allow within a base allow");
    assert_eq!(
        effect_of(&pol, OpClass::Write, ".github/workflows/ci.yml"),
        (Effect::Ask, "ci".into())
    );
    // The base's [ask] is inherited and cannot be changed; [vcs] it lacks can be set.
    let e = extend_on(ASK_BASE, &project("[ask]\ntimeout_secs = 3600\n"))
        .expect_err("[ask] changed")
        .to_string();
    assert!(e.contains("[ask] is set by the base policy"), "{e}");
    let pol = extend_on(ASK_BASE, &project("[vcs]\nstage = true\n")).expect("[vcs] added");
    assert!(pol.vcs_stage());
    assert_eq!(pol.ask_timeout().as_secs(), 60);
}
