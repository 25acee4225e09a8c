//! A listing's entry filter against `decide_entry`, over policies loaded from files.
use crate::Policy;
use fsgate_base::path::RelPath;
use fsgate_decide::floor::{FixedFloor, FloorEntry, FloorKind};
use fsgate_decide::{Access, EntryFilter, EntryKind, PathFacts};

fn rel(s: &str) -> RelPath {
    RelPath::parse_rooted(s).unwrap()
}

/// Policies whose rules cover the cases the filter shortens: `**`, literal and
/// `L/**` globs, globs it must still match, case-folded denies, extension and
/// size conditions, asks, list-only and read-only rules, no rules at all.
fn policies() -> Vec<Policy> {
    let mut out = vec![
        Policy::builtin_default().unwrap(),
        Policy::from_toml(include_str!("../../../policies/strict.toml"), "strict").unwrap(),
        Policy::from_toml(include_str!("../../../policies/readonly.toml"), "ro").unwrap(),
        Policy::from_toml("version = 1\n", "empty").unwrap(),
    ];
    let text = r#"version = 1
[secrets]
patterns = [{ id = "tok", regex = "^tok" }, { id = "ca", regex = "^cacert" }]
disabled_patterns = ["secret"]
[[rule]]
id = "no-logs"
effect = "deny"
ops = ["list"]
paths = ["**/*.log", "Build/**"]
[[rule]]
id = "ask-prod"
effect = "ask"
ops = ["read", "list"]
paths = ["src/prod"]
[[rule]]
id = "big"
effect = "deny"
ops = ["read"]
paths = ["**"]
min_size = 100
[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**", "docs"]
[[rule]]
id = "md"
effect = "allow"
ops = ["list", "read"]
extensions = ["md"]
[[rule]]
id = "top"
effect = "allow"
ops = ["list"]
paths = ["*", "deep/a/b"]
"#;
    out.push(Policy::from_toml(text, "mixed").unwrap());
    let waived = "version = 1\n[secrets]\ndisabled_patterns = [\"key-material\"]\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"list\", \"read\"]\npaths = [\"**\"]\n";
    out.push(Policy::from_toml(waived, "waived").unwrap());
    let mut floored = Policy::builtin_default().unwrap();
    floored.set_floor(FixedFloor::from_entries(vec![FloorEntry {
        kind: FloorKind::AuditLog,
        path: rel("state/audit.jsonl"),
    }]));
    out.push(floored);
    out
}

#[test]
fn the_filter_decides_every_entry_as_decide_entry_does() {
    let dirs = [
        "",
        "src",
        "src/prod",
        "src/lib",
        "docs",
        "docs/x",
        "build",
        "Build",
        "deep",
        "deep/a",
        "deep/a/b",
        "state",
        ".git",
        "a/secret/b",
        "SRC",
        "cacert.pem",
        "v/CACERT.PEM",
    ];
    let names = [
        "a.rs",
        "README.md",
        "x.LOG",
        "x.log",
        ".env",
        "tok.txt",
        "prod",
        "b",
        "id_rsa",
        "key.pem",
        "cacert.pem",
        "CACERT.pem",
        "my-cacert.pem",
        "secret.txt",
        "audit.jsonl",
        "audit.jsonl.checkpoint",
        "lib",
        "a",
    ];
    let kinds = [
        PathFacts::kind(EntryKind::Dir),
        PathFacts::kind(EntryKind::File),
        PathFacts::file(5),
        PathFacts::file(500),
    ];
    let ops = [
        Access::Ls,
        Access::Tree,
        Access::Glob,
        Access::Grep,
        Access::Stat,
    ];
    let mut checked = 0;
    for pol in policies() {
        // Each op's filter is carried from directory to directory, as walks do.
        let mut carried: Vec<Option<EntryFilter<'_>>> = ops.iter().map(|_| None).collect();
        for dir in dirs.iter().map(|d| rel(&format!("/{d}"))) {
            for (op, slot) in ops.into_iter().zip(carried.iter_mut()) {
                let filter = match slot.take() {
                    Some(f) => f.for_dir(&dir),
                    None => pol.entry_filter(op, &dir),
                };
                for name in names {
                    let path = dir.join(name);
                    for facts in &kinds {
                        let want = pol.decide_entry(op, &path, facts).allowed();
                        assert_eq!(
                            filter.allows(&path, name, facts),
                            want,
                            "{} {op:?} {path} {facts:?}",
                            pol.origin()
                        );
                        checked += 1;
                    }
                }
                *slot = Some(filter);
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

/// One generated rule: effect, ops, globs, an extension and a size condition.
fn rule_toml(
    i: usize,
    (effect, ops, globs, ext, size): &(usize, usize, Vec<String>, bool, usize),
) -> String {
    let effect = ["deny", "ask", "allow"][*effect];
    let ops = [r#"["list"]"#, r#"["read"]"#, r#"["list", "read"]"#][*ops];
    let globs: Vec<String> = globs.iter().map(|g| format!("'{g}'")).collect();
    let mut r = format!("[[rule]]\nid = \"r{i}\"\neffect = \"{effect}\"\nops = {ops}\n");
    if !globs.is_empty() {
        r.push_str(&format!("paths = [{}]\n", globs.join(", ")));
    }
    if *ext || globs.is_empty() {
        r.push_str("extensions = [\"log\"]\n");
    }
    match size {
        1 => r.push_str("min_size = 100\n"),
        2 => r.push_str("max_size = 100\n"),
        _ => {}
    }
    r
}

use proptest::prelude::*;

proptest::proptest! {
    /// Generated policies (globs of literals, `*`, `**`, classes, braces, dotfiles and
    /// case variants; secret patterns with anchors, classes and non-ASCII), entries
    /// of generated directories: the filter answers as `decide_entry`.
    #[test]
    fn generated_policies_filter_as_decide_entry(
        rules in proptest::collection::vec((
            0usize..3,
            0usize..3,
            proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![
                    "src", "SRC", "a", "b", ".env", "*", "**", "*.log", "[ab]", "{a,b}",
                    "{a,src/b}", "x y", "é", "?", "A",
                ]), 1..4).prop_map(|c| c.join("/")),
                0..3,
            ),
            proptest::bool::ANY,
            0usize..3,
        ), 0..5),
        secrets in proptest::collection::vec(proptest::sample::select(vec![
            "^tok", "^\\.e", "^[a-b]$", "é", "s$", "^SRC/", "x y",
        ]), 0..3),
        dirs in proptest::collection::vec(proptest::collection::vec(
            proptest::sample::select(vec!["src", "SRC", "a", "b", ".env", "x y", "é", "A"]),
            0..3,
        ), 1..4),
    ) {
        let mut text = String::from("version = 1\n[secrets]\npatterns = [");
        let pats: Vec<String> = secrets
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{{ id = \"s{i}\", regex = '{p}' }}"))
            .collect();
        text.push_str(&pats.join(", "));
        text.push_str("]\n");
        for (i, r) in rules.iter().enumerate() {
            text.push_str(&rule_toml(i, r));
        }
        let pol = Policy::from_toml(&text, "gen");
        prop_assume!(pol.is_ok());
        let pol = pol.unwrap();
        let names = ["a", "b", "A", "src", "SRC", "x.log", "X.LOG", ".env", "tok", "é", "s", "x y"];
        let kinds = [
            PathFacts::kind(EntryKind::Dir),
            PathFacts::file(5),
            PathFacts::file(500),
            PathFacts::kind(EntryKind::File),
        ];
        for op in [Access::Ls, Access::Grep] {
            let mut carried: Option<EntryFilter<'_>> = None;
            for d in &dirs {
                let dir = rel(&format!("/{}", d.join("/")));
                let filter = match carried.take() {
                    Some(f) => f.for_dir(&dir),
                    None => pol.entry_filter(op, &dir),
                };
                for name in names {
                    let path = dir.join(name);
                    for facts in &kinds {
                        let want = pol.decide_entry(op, &path, facts).allowed();
                        prop_assert_eq!(
                            filter.allows(&path, name, facts),
                            want,
                            "{}\n{:?} {} {:?}",
                            text,
                            op,
                            path,
                            facts
                        );
                    }
                }
                carried = Some(filter);
            }
        }
    }
}
