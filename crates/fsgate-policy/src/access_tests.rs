//! What each operation needs, decided over policies loaded from their files.
use crate::Policy;
use fsgate_base::path::RelPath;
use fsgate_decide::{ACCESS_NAMES, Access, EntryKind, OpClass, PathFacts};

fn rel(s: &str) -> RelPath {
    RelPath::parse_rooted(s).unwrap()
}

fn file() -> PathFacts {
    PathFacts::kind(EntryKind::File)
}

/// `reports` is list-only; `src` readable; `hidden` not even listable; files over
/// 1 MiB are read-only.
const POLICY: &str = r#"version = 1
[secrets]
builtin = false
[[rule]]
id = "list-reports"
effect = "allow"
ops = ["list"]
paths = ["reports"]
[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list", "write", "delete"]
paths = ["src"]
[[rule]]
id = "hidden"
effect = "deny"
ops = ["list"]
paths = ["src/hidden"]
[[rule]]
id = "big-read-only"
effect = "deny"
ops = ["write", "delete"]
paths = ["**"]
min_size = 1048577
"#;

fn pol() -> Policy {
    Policy::from_toml(POLICY, "t").unwrap()
}

#[test]
fn names_and_metadata_need_list_not_read() {
    let pol = pol();
    let lint = rel("reports/lint.json");
    for op in [Access::Stat, Access::Ls, Access::Glob, Access::Tree] {
        let d = pol.decide_access(op, &lint, &file());
        assert_eq!((d.allowed(), d.rule), (true, "list-reports"), "{op:?}");
    }
    let d = pol.decide_access(Access::Class(OpClass::Read), &lint, &file());
    assert!(!d.allowed());
    // grep needs read too: the list-only file shows no line.
    let d = pol.decide_access(Access::Grep, &lint, &file());
    assert_eq!(d.rule, fsgate_decide::DEFAULT_DENY);
    assert!(
        d.reason
            .starts_with("grep needs read on `reports/lint.json`")
    );
}

#[test]
fn composite_operations_name_the_first_refusal_or_the_primary_rule() {
    let pol = pol();
    // The entry is listable, its directory is not: ls, glob, tree and grep refuse
    // by the directory's rule.
    let inner = rel("src/hidden/x/a.rs");
    let d = pol.decide_access(Access::Ls, &inner, &file());
    assert_eq!((d.allowed(), d.rule), (false, "hidden"));
    assert!(d.reason.contains("list on `src/hidden/x`"), "{}", d.reason);
    let d = pol.decide_access(Access::Grep, &inner, &file());
    assert_eq!(d.rule, "hidden");
    let d = pol.decide_access(Access::Grep, &rel("src/a.rs"), &file());
    assert_eq!((d.allowed(), d.rule), (true, "src"));
    let d = pol.decide_access(Access::Mkdir, &rel("src/new"), &file());
    assert_eq!((d.allowed(), d.rule), (true, "src"));
    let d = pol.decide_access(Access::Rm, &rel("reports/lint.json"), &file());
    assert_eq!(d.rule, fsgate_decide::DEFAULT_DENY);
}

#[test]
fn steps_list_every_check_in_order() {
    let steps = Access::Grep.steps(&rel("a/b/c.txt"), &file());
    let shown: Vec<(OpClass, &str)> = steps.iter().map(|s| (s.class, s.path.as_str())).collect();
    assert_eq!(
        shown,
        vec![
            (OpClass::List, ""),
            (OpClass::List, "a"),
            (OpClass::List, "a/b"),
            (OpClass::List, "a/b/c.txt"),
            (OpClass::Read, "a/b/c.txt"),
        ]
    );
    let steps = Access::Ls.steps(&rel("a/b"), &file());
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].path.as_str(), "a");
    assert!(steps[0].dir);
}

#[test]
fn size_conditions_apply_with_the_size_and_defer_without() {
    let pol = pol();
    let a = rel("src/a.bin");
    let write = Access::Class(OpClass::Write);
    let big = PathFacts::file(2 * 1024 * 1024);
    let d = pol.decide_access(write, &a, &big);
    assert_eq!((d.allowed(), d.rule), (false, "big-read-only"));
    assert!(pol.decide_access(write, &a, &PathFacts::file(9)).allowed());
    assert!(
        pol.decide_access(Access::Rm, &a, &PathFacts::file(1048576))
            .allowed()
    );
    assert!(
        !pol.decide_access(Access::Rm, &a, &PathFacts::file(1048577))
            .allowed()
    );
    // Before the size is known the deny waits; directories never meet it.
    assert!(pol.decide_access(write, &a, &file()).allowed());
    let dir = PathFacts {
        kind: EntryKind::Dir,
        size: Some(u64::MAX),
    };
    assert!(pol.decide_access(write, &rel("src/d"), &dir).allowed());
    let (_, steps) = pol.explain_access(write, &a, &file());
    let note = &steps[0]
        .1
        .iter()
        .find(|t| t.rule == "big-read-only")
        .unwrap()
        .note;
    assert!(note.contains("size not known yet"), "{note}");
}

#[test]
fn a_file_never_leads_towards_an_allowed_subtree() {
    // Listing the ancestors of an allowed subtree is allowed so the agent can reach
    // it; a file named like one of them is no ancestor and stays hidden.
    let pol = Policy::from_toml(
        "version = 1\n[[rule]]\nid = \"deep\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"b.md/src\"]\n",
        "t",
    )
    .unwrap();
    let dir = PathFacts::kind(EntryKind::Dir);
    for op in [Access::Stat, Access::Ls, Access::Glob, Access::Tree] {
        assert!(
            pol.decide_access(op, &rel("b.md"), &dir).allowed(),
            "{op:?}"
        );
        let d = pol.decide_access(op, &rel("b.md"), &file());
        assert_eq!(d.rule, fsgate_decide::DEFAULT_DENY, "{op:?}");
    }
    assert!(
        pol.decide_access(Access::Ls, &rel("b.md/src/x.rs"), &file())
            .allowed()
    );
    let d = pol.decide(OpClass::List, &RelPath::root(), EntryKind::Dir);
    assert!(d.allowed());
}

#[test]
fn every_name_parses_back() {
    for name in ACCESS_NAMES {
        assert_eq!(Access::parse(name).map(Access::as_str), Some(*name));
    }
    assert_eq!(Access::parse("reed"), None);
}
