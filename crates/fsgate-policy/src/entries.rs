//! Deciding a directory's entries as a listing shows them, once per directory instead of
//! once per path: what is the same for every entry of one directory (its own
//! components' secret names, which rules' globs match everything beneath it) is worked
//! out when the directory is entered, so that each entry costs a secret-name match on
//! its own name and the rules whose globs still need a match.
//!
//! [`EntryFilter::allows`] answers exactly as `decide_entry(op, path, facts).allowed()`
//! (tests compare the two).

use std::cell::RefCell;

use regex_automata::{Input, meta};

use super::access::Access;
use super::decide::{PathFacts, rule_misses_known};
use super::raw::Effect;
use super::{OpClass, Policy, Rule};
use fsgate_base::path::RelPath;

/// The rules one op class consults for entries of one directory, in decision order
/// (deny, ask, allow), each with whether its globs are known to match every entry;
/// cut after the first that applies to every entry whatever its name, kind or size.
type Plan<'p> = Vec<(&'p Rule, bool)>;

/// The decision of `op` on the entries of one directory.
#[derive(Debug)]
pub struct EntryFilter<'p> {
    pol: &'p Policy,
    op: Access,
    /// The secret-name patterns, and this filter's cache for searching with them.
    names: Option<(&'p meta::Regex, RefCell<meta::Cache>)>,
    /// Per op class (`OpClass as usize`); None for all: decide each entry in full (a
    /// component of the directory is a secret name, or the op is not a listing's).
    plans: Option<[Plan<'p>; 4]>,
}

impl Policy {
    /// The filter deciding `op` on entries directly inside `dir` (the directories above
    /// them already allowed, as [`Policy::decide_entry`] assumes).
    pub fn entry_filter(&self, op: Access, dir: &RelPath) -> EntryFilter<'_> {
        self.entry_filter_with(op, dir, None)
    }

    fn entry_filter_with(
        &self,
        op: Access,
        dir: &RelPath,
        cache: Option<meta::Cache>,
    ) -> EntryFilter<'_> {
        let listing = matches!(
            op,
            Access::Ls | Access::Tree | Access::Glob | Access::Grep | Access::Stat
        );
        let secret_dir = dir.components().any(|c| self.secrets.is_match(c));
        let plans = (listing && !secret_dir).then(|| {
            let mut plans: [Plan<'_>; 4] = Default::default();
            for class in [OpClass::List, OpClass::Read] {
                plans[class as usize] = self.plan(class, dir);
            }
            plans
        });
        let names = self
            .secrets
            .names()
            .map(|re| (re, RefCell::new(cache.unwrap_or_else(|| re.create_cache()))));
        EntryFilter {
            pol: self,
            op,
            names,
            plans,
        }
    }

    fn plan(&self, class: OpClass, dir: &RelPath) -> Plan<'_> {
        let mut plan = Vec::new();
        for effect in [Effect::Deny, Effect::Ask, Effect::Allow] {
            for rule in self.rules.iter().filter(|r| r.effect == effect) {
                if !rule.ops[class as usize] {
                    continue;
                }
                let all = rule.paths.is_none() || rule.whole.iter().any(|w| dir.starts_with(w));
                plan.push((rule, all));
                let unconditional =
                    rule.extensions.is_none() && rule.min_size.is_none() && rule.max_size.is_none();
                if all && unconditional {
                    return plan;
                }
            }
        }
        plan
    }
}

impl<'p> EntryFilter<'p> {
    /// The filter for the same op in another directory, keeping this one's search
    /// cache (what it learnt about names carries over).
    pub fn for_dir(self, dir: &RelPath) -> EntryFilter<'p> {
        let cache = self.names.map(|(_, c)| c.into_inner());
        self.pol.entry_filter_with(self.op, dir, cache)
    }

    /// True if `op` is allowed on `path`, the entry `name` of the filter's directory:
    /// the same answer as `decide_entry(op, path, facts).allowed()`.
    pub fn allows(&self, path: &RelPath, name: &str, facts: &PathFacts) -> bool {
        debug_assert_eq!(path.file_name(), Some(name));
        let Some(plans) = &self.plans else {
            return self.pol.decide_entry(self.op, path, facts).allowed();
        };
        // The directory's components were checked when the filter was made.
        if self.secret_name(name) {
            return false;
        }
        let (first, second) = self.op.own(facts.kind);
        std::iter::once(first)
            .chain(second)
            .all(|class| self.class_allows(&plans[class as usize], class, path, facts))
    }

    /// Whether `name` matches a secret-name pattern.
    fn secret_name(&self, name: &str) -> bool {
        match &self.names {
            Some((re, cache)) => {
                let input = Input::new(name).earliest(true);
                re.search_half_with(&mut cache.borrow_mut(), &input)
                    .is_some()
            }
            None => self.pol.secrets.is_match(name),
        }
    }

    /// Whether the first rule that applies (after the fixed floor) allows `class`.
    fn class_allows(&self, plan: &Plan<'_>, class: OpClass, path: &RelPath, f: &PathFacts) -> bool {
        if self.pol.floor.touches(class, path).is_some() {
            return false;
        }
        plan.iter()
            .find(|(rule, all)| rule_misses_known(rule, class, path, f, *all).is_none())
            .is_some_and(|(rule, _)| rule.effect == Effect::Allow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EntryKind;

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
patterns = [{ id = "tok", regex = "^tok" }]
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
        let mut floored = Policy::builtin_default().unwrap();
        floored.set_floor(super::super::floor::FixedFloor::from_entries(vec![
            super::super::floor::FloorEntry {
                kind: super::super::floor::FloorKind::AuditLog,
                path: rel("state/audit.jsonl"),
            },
        ]));
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

    #[test]
    fn the_name_search_matches_what_the_secret_set_matches() {
        let names = [
            "entry-00001.txt",
            ".env",
            ".ENV.local",
            ".envrc",
            "id_rsa",
            "ID_ED25519_SK",
            "a.PEM",
            "x.pem.bak",
            "SECRET",
            "my-secrets",
            "\u{17f}ecret",
            ".netrc",
            "_netrc",
            ".git",
            ".gitignore",
            ".Kube",
            "credentials.json",
            ".git-credentials",
            "",
            "é",
            "tok",
            "a\nsecret",
        ];
        for pol in policies() {
            let f = pol.entry_filter(Access::Ls, &RelPath::root());
            assert!(f.names.is_some(), "{}", pol.origin());
            for n in names {
                assert_eq!(f.secret_name(n), pol.secrets.is_match(n), "{n:?}");
            }
        }
    }

    #[test]
    fn whole_directories_skip_the_glob_match() {
        let pol = Policy::builtin_default().unwrap();
        let f = pol.entry_filter(Access::Ls, &rel("list"));
        let plan = &f.plans.as_ref().unwrap()[OpClass::List as usize];
        // `workspace-read` (`**`) decides every entry without matching its path.
        assert_eq!(plan.len(), 1);
        assert_eq!((plan[0].0.id.as_str(), plan[0].1), ("workspace-read", true));
        // Below a secret name, each entry is decided in full.
        assert!(pol.entry_filter(Access::Ls, &rel(".git")).plans.is_none());
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
}
