//! Unit and property tests of policy decisions.

use proptest::prelude::*;

use super::*;
use fsgate_base::path::RelPath;
use fsgate_decide::{BinaryMode, Secrets, Waivers};

fn p(s: &str) -> RelPath {
    RelPath::parse_rooted(s).unwrap()
}

fn default() -> Policy {
    Policy::builtin_default().unwrap()
}

const READONLY_SRC: &str = r#"
version = 1
[[rule]]
id = "src-read"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]
extensions = ["rs", "toml"]

[[rule]]
id = "no-generated"
effect = "deny"
ops = ["*"]
paths = ["src/generated"]
reason = "generated code is off limits"
"#;

#[test]
fn default_allows_workspace_and_names_rule() {
    let pol = default();
    let d = pol.decide(OpClass::Read, &p("src/main.rs"), EntryKind::File);
    assert!(d.allowed());
    assert_eq!(d.rule, "workspace-read");
    let d = pol.decide(OpClass::Write, &p("notes.md"), EntryKind::File);
    assert_eq!(d.rule, "workspace-write");
}

#[test]
fn secrets_deny_every_op_in_any_case() {
    let pol = default();
    for path in [
        ".env",
        ".ENV",
        "config/.env.local",
        "Id_Rsa",
        "home/.ssh/known_hosts",
        "certs/server.PEM",
        "credentials.json",
        "my-Secret-notes.txt",
        ".git/config",
        ".git",
        "sub/.git/HEAD",
        ".netrc",
        ".env-prod",
        "deploy/.env_local",
        "prod.env",
        "Docker.ENV",
    ] {
        for op in OpClass::ALL {
            let d = pol.decide(op, &p(path), EntryKind::Unknown);
            assert!(!d.allowed(), "{op:?} {path} should be denied");
            assert!(d.rule.starts_with("secrets:"), "{path}: {}", d.rule);
        }
    }
    for ok in [
        ".gitignore",
        "environment.md",
        ".environment",
        ".venv",
        "env.py",
        "src/dotenv.rs",
        "prod.env.md",
        ".flaskenv",
        "src/keyboard.rs",
        "id_rsa.pub.md",
    ] {
        assert!(
            pol.decide(OpClass::Read, &p(ok), EntryKind::File).allowed(),
            "{ok} should be allowed"
        );
    }
}

#[test]
fn default_deny_when_nothing_matches() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    let d = pol.decide(OpClass::Write, &p("src/a.rs"), EntryKind::File);
    assert_eq!(d.rule, DEFAULT_DENY);
    let d = pol.decide(OpClass::Read, &p("README.md"), EntryKind::File);
    assert_eq!(d.rule, DEFAULT_DENY);
}

#[test]
fn extensions_limit_allow_rules_to_files() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    assert!(
        pol.decide(OpClass::Read, &p("src/a.rs"), EntryKind::File)
            .allowed()
    );
    assert!(
        pol.decide(OpClass::Read, &p("src/A.RS"), EntryKind::File)
            .allowed()
    );
    assert!(
        !pol.decide(OpClass::Read, &p("src/a.py"), EntryKind::File)
            .allowed()
    );
    // Directories are governed by paths alone.
    assert!(
        pol.decide(OpClass::List, &p("src/sub"), EntryKind::Dir)
            .allowed()
    );
}

#[test]
fn deny_wins_and_covers_beneath() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    let d = pol.decide(OpClass::Read, &p("src/generated/x.rs"), EntryKind::File);
    assert_eq!(d.rule, "no-generated");
    assert_eq!(d.reason, "generated code is off limits");
    assert!(
        !pol.decide(OpClass::List, &p("src/generated"), EntryKind::Dir)
            .allowed()
    );
}

#[test]
fn listing_ancestors_of_allowed_subtrees() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    assert!(
        pol.decide(OpClass::List, &RelPath::root(), EntryKind::Dir)
            .allowed()
    );
    assert!(
        !pol.decide(OpClass::List, &p("docs"), EntryKind::Dir)
            .allowed()
    );
    // Ancestor expansion is for listing only.
    assert!(
        !pol.decide(OpClass::Read, &RelPath::root(), EntryKind::Dir)
            .allowed()
    );
}

#[test]
fn capabilities_follow_rules() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    assert!(pol.can_ever(OpClass::Read));
    assert!(!pol.can_ever(OpClass::Write));
    assert!(default().can_ever(OpClass::Write));
}

#[test]
fn binary_modes_parse_and_the_default_reads_media_only() {
    assert_eq!(default().limits().binary, BinaryMode::Media);
    let media = Policy::from_toml("version = 1\n[limits]\nbinary = \"media\"\n", "t").unwrap();
    assert_eq!(media.limits().binary, BinaryMode::Media);
    // A policy that does not say keeps binary reads denied.
    let unset = Policy::from_toml("version = 1\n", "t").unwrap();
    assert_eq!(unset.limits().binary, BinaryMode::Deny);
}

#[test]
fn load_errors_name_key_and_line() {
    let cases = [
        ("version = 1\nbogus = 3\n", "bogus"),
        (
            "version = 1\n[limits]\nmax_read_byte = 3\n",
            "max_read_byte",
        ),
        (
            "version = 1\n[[rule]]\nid = \"x\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"a/[\"]\n",
            "rule[0].paths (line 6)",
        ),
        (
            "version = 1\n[secrets]\npatterns = [{ id = \"x\", regex = \"(\" }]\n",
            "secrets.patterns[0].regex (line 3)",
        ),
        (
            "version = 1\n[[rule]]\nid = \"x\"\neffect = \"allow\"\nops = [\"reed\"]\npaths = [\"**\"]\n",
            "unknown op `reed`",
        ),
        ("version = 2\n", "unsupported version 2"),
        ("version = 1\n[limits]\nbinary = \"maybe\"\n", "line 3"),
        (
            "version = 1\n[[rule]]\nid = \"x\"\neffect = \"allow\"\nops = [\"read\"]\npaths = [\"../**\"]\n",
            "contains `..`",
        ),
    ];
    for (text, needle) in cases {
        let err = Policy::from_toml(text, "t.toml").unwrap_err().to_string();
        assert!(err.contains(needle), "{err:?} should contain {needle:?}");
    }
}

/// `cacert.pem`, the CA bundle pip, certifi and curl ship, is left out of the built-in
/// `key-material` pattern alone: every other `*.pem` stays a secret, a policy's own
/// pattern still takes it, and `policy explain` says why it did not match.
#[test]
fn a_ca_bundle_named_cacert_pem_is_no_secret_by_its_name() {
    let pol = default();
    for path in [
        "cacert.pem",
        "CACert.PEM",
        "v/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem",
    ] {
        for op in OpClass::ALL {
            let d = pol.decide(op, &p(path), EntryKind::File);
            assert!(d.allowed(), "{op:?} {path}: {} {}", d.rule, d.reason);
        }
    }
    for (path, rule) in [
        ("my-cacert.pem", "secrets:key-material"),
        ("cacert.pem.d/server.pem", "secrets:key-material"),
        ("cacert.key", "secrets:key-material"),
        ("secret/cacert.pem", "secrets:secret"),
    ] {
        let d = pol.decide(OpClass::Read, &p(path), EntryKind::File);
        assert_eq!(d.rule, rule, "{path}");
    }
    let own = Policy::from_toml(
        "version = 1\n[secrets]\npatterns = [{ id = \"ca\", regex = '^cacert' }]\n",
        "own",
    )
    .unwrap();
    let d = own.decide(OpClass::Read, &p("cacert.pem"), EntryKind::File);
    assert_eq!(d.rule, "secrets:ca");
    // A waiver of the pattern lets through what it would have denied, and says so only
    // there.
    let waived = Policy::from_toml(
        "version = 1\n[secrets]\ndisabled_patterns = [\"key-material\"]\n",
        "waived",
    )
    .unwrap();
    let facts = PathFacts::kind(EntryKind::File);
    let (d, _) = waived.explain(OpClass::Read, &p("certs/server.pem"), &facts);
    assert_eq!(d.waived, ["secrets:key-material"]);
    let (d, _) = waived.explain(OpClass::Read, &p("certs/cacert.pem"), &facts);
    assert!(d.waived.is_empty(), "{:?}", d.waived);
    let (_, trace) = pol.explain(
        OpClass::Read,
        &p("cacert.pem"),
        &PathFacts::kind(EntryKind::File),
    );
    let step = trace.iter().find(|s| s.rule == "secrets:key-material");
    assert!(
        step.is_some_and(|s| !s.matched && s.note.ends_with(", except `cacert.pem`")),
        "{step:?}"
    );
}

/// Processes through the view get their own file limit: 256 MiB unless the policy says.
#[test]
fn the_process_file_limit_defaults_to_256_mib() {
    assert_eq!(default().limits().max_process_file_bytes, 256 << 20);
    assert_eq!(default().limits().max_write_bytes, 10 << 20);
    let own = Policy::from_toml(
        "version = 1\n[limits]\nmax_process_file_bytes = 1048576\n",
        "own",
    )
    .unwrap();
    assert_eq!(own.limits().max_process_file_bytes, 1 << 20);
    // Held whole in one read: 4 GiB and more is refused at load.
    let huge = Policy::from_toml(
        "version = 1\n[limits]\nmax_process_file_bytes = 4294967296\n",
        "huge",
    );
    let e = huge.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("max_process_file_bytes"), "{e}");
}

#[test]
fn explain_lists_rules_in_order() {
    let pol = Policy::from_toml(READONLY_SRC, "t").unwrap();
    let (d, trace) = pol.explain(
        OpClass::Read,
        &p("src/a.rs"),
        &PathFacts::kind(EntryKind::File),
    );
    assert!(d.allowed());
    let ids: Vec<_> = trace.iter().map(|s| s.rule.as_str()).collect();
    let deny_pos = ids.iter().position(|r| *r == "no-generated").unwrap();
    let allow_pos = ids.iter().position(|r| *r == "src-read").unwrap();
    assert!(deny_pos < allow_pos);
    assert!(trace[allow_pos].matched && !trace[deny_pos].matched);
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_-]{1,8}(\\.[a-z]{1,3})?",
        Just(".env".to_string()),
        Just(".git".to_string()),
        Just("id_rsa".to_string()),
        Just("src".to_string()),
    ]
}

proptest! {
    /// Under the default policy, a path is allowed iff no component is a secret name,
    /// and a denial by a secret always names a `secrets:` rule.
    #[test]
    fn default_policy_secret_invariant(comps in proptest::collection::vec(component(), 1..6), op in 0usize..4) {
        let pol = default();
        let path = p(&comps.join("/"));
        let op = OpClass::ALL[op];
        let d = pol.decide(op, &path, EntryKind::File);
        let secret = comps.iter().any(|c| pol.secrets().is_match(c));
        prop_assert_eq!(d.allowed(), !secret);
        if secret { prop_assert!(d.rule.starts_with("secrets:")); }
    }

    /// Adding a deny rule never turns a denial into an allow (deny wins).
    #[test]
    fn adding_deny_never_widens(comps in proptest::collection::vec(component(), 1..5), glob in "[a-z*]{1,4}(/\\*\\*)?") {
        let base = Policy::from_toml(READONLY_SRC, "t").unwrap();
        let with_deny = format!("{READONLY_SRC}\n[[rule]]\nid = \"extra\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [\"{glob}\"]\n");
        let Ok(stricter) = Policy::from_toml(&with_deny, "t") else { return Ok(()); };
        let path = p(&comps.join("/"));
        for op in OpClass::ALL {
            if stricter.decide(op, &path, EntryKind::File).allowed() {
                prop_assert!(base.decide(op, &path, EntryKind::File).allowed());
            }
        }
    }
}

#[test]
fn fixed_floor_beats_every_allow() {
    use fsgate_decide::floor::{FixedFloor, FloorEntry, FloorKind};
    let mut pol = default();
    pol.set_floor(FixedFloor::from_entries(vec![
        FloorEntry {
            kind: FloorKind::AuditLog,
            path: p("logs/audit.jsonl"),
        },
        FloorEntry {
            kind: FloorKind::PolicyFile,
            path: p("fsgate.toml"),
        },
    ]));
    for op in OpClass::ALL {
        for (path, rule) in [
            ("logs/audit.jsonl", "floor:audit-log"),
            ("logs/audit.jsonl.checkpoint", "floor:audit-log"),
            ("logs/audit.jsonl.000000000001", "floor:audit-log"),
            ("fsgate.toml", "floor:policy-file"),
        ] {
            let d = pol.decide(op, &p(path), EntryKind::File);
            assert_eq!(d.rule, rule, "{op:?} {path}");
            assert!(!d.allowed());
        }
    }
    // Only the log and its sidecars: its directory's other files stay the policy's.
    for op in OpClass::ALL {
        assert!(
            pol.decide(op, &p("logs/notes.txt"), EntryKind::File)
                .allowed(),
            "{op:?}"
        );
    }
    assert!(
        pol.decide(OpClass::List, &p("logs"), EntryKind::Dir)
            .allowed()
    );
    // Removing or renaming the directory would take the log with it.
    assert_eq!(
        pol.decide(OpClass::Delete, &p("logs"), EntryKind::Dir).rule,
        "floor:audit-log"
    );
}

#[test]
fn ask_rules_fold_case_like_deny_rules_and_win_over_allow() {
    let text = r#"
version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]

[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = [".github/**"]
"#;
    let pol = Policy::from_toml(text, "t").unwrap();
    for path in [
        ".github/workflows/ci.yml",
        ".GitHub/workflows/ci.yml",
        ".GITHUB/x",
    ] {
        let d = pol.decide(OpClass::Write, &p(path), EntryKind::File);
        assert!(d.asks(), "{path}: {d:?}");
        assert_eq!(d.rule, "ask-ci");
    }
    let d = pol.decide(OpClass::Read, &p(".GitHub/x"), EntryKind::File);
    assert!(d.allowed(), "{d:?}");
}

/// The secret-name set is compiled on first use: one that cannot be compiled then refuses
/// every path and hides every entry (fail closed), and `compile_deferred` (what `policy
/// check` runs) reports it.
#[test]
fn a_secret_set_that_cannot_be_compiled_refuses_everything() {
    let mut pol = default();
    let broken = Secrets::deferred(vec![SecretPattern {
        id: "secrets:broken".into(),
        source: "(".into(),
        builtin: false,
    }]);
    pol.engine = Engine::new(
        pol.rules().to_vec(),
        broken,
        Waivers::default(),
        *pol.limits(),
    );
    let d = pol.decide(OpClass::Read, &p("src/main.rs"), EntryKind::File);
    assert!(!d.allowed());
    assert_eq!(d.rule, "secrets:broken");
    assert!(d.reason.contains("cannot be compiled"), "{}", d.reason);
    let filter = pol.entry_filter(Access::Ls, &RelPath::root());
    assert!(!filter.allows(&p("a.txt"), "a.txt", &PathFacts::file(1)));
    let e = pol.compile_deferred().expect_err("reported");
    assert!(e.to_string().contains("secrets.patterns"), "{e}");
    assert!(default().compile_deferred().is_ok());
}
