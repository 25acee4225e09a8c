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
use super::decide::rule_misses_known;
use crate::effect::Effect;
use crate::engine::Engine;
use crate::facts::PathFacts;
use crate::rule::{OpClass, Rule};
use fsgate_base::path::RelPath;

/// The rules one op class consults for entries of one directory, in decision order
/// (deny, ask, allow), each with whether its globs are known to match every entry;
/// cut after the first that applies to every entry whatever its name, kind or size.
type Plan<'p> = Vec<(&'p Rule, bool)>;

/// The decision of `op` on the entries of one directory.
#[derive(Debug)]
pub struct EntryFilter<'p> {
    pol: &'p Engine,
    op: Access,
    /// The secret-name patterns, and this filter's cache for searching with them.
    names: Option<(&'p meta::Regex, RefCell<meta::Cache>)>,
    /// Per op class (`OpClass as usize`); None for all: decide each entry in full (a
    /// component of the directory is a secret name, or the op is not a listing's).
    plans: Option<[Plan<'p>; 4]>,
}

impl Engine {
    /// The filter deciding `op` on entries directly inside `dir` (the directories above
    /// them already allowed, as `Engine::decide_entry` assumes).
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
                if all && rule.conditions.is_empty() {
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
        // A non-ASCII path is decided in full, in each of its spellings (`decide`).
        let plans = match &self.plans {
            Some(plans) if path.as_str().is_ascii() => plans,
            _ => return self.pol.decide_entry(self.op, path, facts).allowed(),
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
                    && self.pol.secrets.confirmed(name)
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
    use crate::limits::{BinaryMode, Limits};
    use crate::secrets::{SecretPattern, Secrets, Waivers};

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    /// An allow rule on every path for `ops`, as compiling `paths = ["**"]` makes it.
    fn everywhere(id: &str, ops: [bool; 4]) -> Rule {
        Rule {
            id: id.into(),
            effect: Effect::Allow,
            ops,
            globs: vec!["**".into()],
            paths: None,
            bases: vec![RelPath::root()],
            whole: vec![RelPath::root()],
            conditions: Vec::new(),
            reason: None,
            line: 1,
            workspaces: None,
        }
    }

    fn engine(patterns: &[&str]) -> Engine {
        let secrets = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| SecretPattern {
                id: format!("secrets:{i}"),
                source: (*p).into(),
                builtin: true,
            })
            .collect();
        let limits = Limits {
            max_read_bytes: 1,
            max_write_bytes: 1,
            binary: BinaryMode::Deny,
            max_message_bytes: 1,
            max_process_file_bytes: 1,
        };
        let rules = vec![
            everywhere("workspace-read", [true, false, false, true]),
            everywhere("later", [true, true, true, true]),
        ];
        Engine::new(
            rules,
            Secrets::deferred(secrets),
            Waivers::default(),
            limits,
        )
    }

    #[test]
    fn the_name_search_matches_what_the_secret_set_matches() {
        let e = engine(&[r"^\.env($|\.)", r"^id_(rsa|ed25519)", r"secret", r"\.pem$"]);
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
            "",
            "é",
            "a\nsecret",
        ];
        let f = e.entry_filter(Access::Ls, &RelPath::root());
        assert!(f.names.is_some());
        for n in names {
            assert_eq!(f.secret_name(n), e.secrets.is_match(n), "{n:?}");
        }
    }

    #[test]
    fn whole_directories_skip_the_glob_match() {
        let e = engine(&[r"^\.git$"]);
        let f = e.entry_filter(Access::Ls, &rel("list"));
        let plan = &f.plans.as_ref().unwrap()[OpClass::List as usize];
        // `workspace-read` (`**`) decides every entry without matching its path.
        assert_eq!(plan.len(), 1);
        assert_eq!((plan[0].0.id.as_str(), plan[0].1), ("workspace-read", true));
        // Below a secret name, each entry is decided in full.
        assert!(e.entry_filter(Access::Ls, &rel(".git")).plans.is_none());
    }
}
