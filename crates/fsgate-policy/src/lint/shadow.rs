//! Rules that never decide (`shadowed-rule`), and `[[test]]` suggestions that are known
//! to pass: both by sampling paths a rule matches and asking the real decision function
//! which rule decides them.

use toml::Spanned;

use super::findings::{Severity, Sink, only};
use super::globs::glob_samples;
use crate::raw::RawPolicy;
use crate::testrun::run_case;
use crate::{EntryKind, OpClass, PathFacts, Policy, Rule};
use fsgate_base::path::RelPath;

/// The rule's ops, in the order suggestions prefer them.
pub(super) fn ops_of(r: &Rule) -> Vec<OpClass> {
    OpClass::ALL
        .into_iter()
        .filter(|o| r.ops[*o as usize])
        .collect()
}

/// Representative paths `r` could match, from its globs and extensions.
pub(super) fn rule_samples(r: &Rule) -> Vec<RelPath> {
    let exts = r.extensions();
    let texts: Vec<String> = if r.globs.is_empty() {
        let mut v = Vec::new();
        for e in exts.unwrap_or_default().iter().take(4) {
            v.push(format!("x.{e}"));
            v.push(format!("sample/x.{e}"));
        }
        v
    } else {
        r.globs.iter().flat_map(|g| glob_samples(g, exts)).collect()
    };
    let mut out: Vec<RelPath> = Vec::new();
    for t in texts {
        if let Ok(p) = RelPath::parse_rooted(&format!("/{t}"))
            && !p.is_root()
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

/// A file size within `r`'s size condition (None if it has none): without one, a
/// size-conditioned deny would never match a sample, and its cases would not pass.
fn sample_size(r: &Rule) -> Option<u64> {
    r.min_size().or(r.max_size())
}

/// What a sample path of `r` is: a file, of a size `r`'s condition accepts.
fn sample_facts(r: &Rule) -> PathFacts {
    PathFacts {
        kind: EntryKind::File,
        size: sample_size(r),
    }
}

/// The ops of `r` that `r` alone decides on `path` as `facts` say it is (so `r`
/// matches it). Reading a directory is moot.
fn matched_ops(alone: &Policy, r: &Rule, path: &RelPath, facts: &PathFacts) -> Vec<OpClass> {
    ops_of(r)
        .into_iter()
        .filter(|op| facts.kind != EntryKind::Dir || *op != OpClass::Read)
        .filter(|op| alone.decide_with(*op, path, facts).rule == r.id)
        .collect()
}

/// What sampling says about one rule.
pub(super) struct Sampled {
    /// Some sample matched the rule on its own.
    pub matched: bool,
    /// Some sample is decided by this rule in the full policy.
    pub decides: bool,
    /// The rules that decided the matched samples instead, most frequent first.
    pub deciders: Vec<String>,
}

pub(super) fn sample(policy: &Policy, r: &Rule) -> Sampled {
    let alone = only(policy, vec![r.clone()]);
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut matched = false;
    // As files, and as directories (an allow's extensions do not limit it there).
    let samples = rule_samples(r);
    let as_kinds = [sample_facts(r), PathFacts::kind(EntryKind::Dir)];
    for (s, facts) in as_kinds
        .iter()
        .flat_map(|f| samples.iter().map(move |s| (s, f)))
    {
        for op in matched_ops(&alone, r, s, facts) {
            matched = true;
            let d = policy.decide_with(op, s, facts);
            if d.rule == r.id {
                return Sampled {
                    matched,
                    decides: true,
                    deciders: Vec::new(),
                };
            }
            match counts.iter_mut().find(|(id, _)| id == d.rule) {
                Some((_, n)) => *n += 1,
                None => counts.push((d.rule.to_string(), 1)),
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    Sampled {
        matched,
        decides: false,
        deciders: counts.into_iter().map(|(id, _)| id).collect(),
    }
}

/// `shadowed-rule`: a rule that some sample matches but no sample lets decide. Allow
/// rules `dead-rule` or `secret-glob` already reported are left to them.
pub(super) fn shadowed(policy: &Policy, sink: &mut Sink<'_>) {
    for r in policy.rules() {
        let at = sink.rule_pos(r);
        let reported = sink.out.iter().any(|f| {
            matches!(f.code, "dead-rule" | "secret-glob")
                && (f.file.as_str(), f.line, f.col) == (at.0.as_str(), at.1, at.2)
        });
        if reported {
            continue;
        }
        let s = sample(policy, r);
        if !s.matched || s.decides {
            continue;
        }
        let by = s
            .deciders
            .iter()
            .take(3)
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let effect = r.effect.as_str();
        let hint = if s.deciders.iter().any(|d| d.starts_with("secrets:")) {
            "remove the rule: the secret-name pattern already denies these paths (or waive the pattern if the paths are not secret)"
        } else {
            "remove the rule, or narrow the rule that decides first if this one was meant"
        };
        sink.at_rule(
            r,
            Severity::Warning,
            "shadowed-rule",
            format!(
                "{effect} rule `{}` never decides: {by} decides first on every path it matches",
                r.id
            ),
            hint,
        );
    }
}

/// A `[[test]]` case (one line, as `policy check` hints print it) that `r` decides,
/// checked by running it as `policy test` would after pasting it in. None if no sample
/// path passes.
pub(super) fn suggest(policy: &Policy, r: &Rule) -> Option<String> {
    let expect = r.effect.as_str();
    for path in rule_samples(r).iter().take(64) {
        for op in ops_of(r) {
            // Cheap first: only a path this rule decides is worth running as a case.
            if policy.decide_with(op, path, &sample_facts(r)).rule != r.id {
                continue;
            }
            let mut fields: Vec<String> = [
                ("op", op.as_str()),
                ("path", path.as_str()),
                ("expect", expect),
                ("rule", r.id.as_str()),
            ]
            .map(|(k, v)| format!("{k} = {}", toml::Value::String(v.to_string())))
            .into();
            if let Some(size) = sample_size(r) {
                fields.insert(2, format!("size = {size}"));
            }
            let case = format!("[[test]]\n{}\n", fields.join("\n"));
            if passes(policy, &case) {
                return Some(format!("add [[test]] {}", fields.join(", ")));
            }
        }
    }
    None
}

/// True if `case` (TOML text of one `[[test]]`) passes against `policy`.
fn passes(policy: &Policy, case: &str) -> bool {
    let text = format!("version = 1\n{case}");
    let Ok(raw) = toml::from_str::<RawPolicy>(&text) else {
        return false;
    };
    match raw.tests.as_slice() {
        [one] => run_case(policy, &text, 0, one).passed,
        _ => false,
    }
}

/// The rule of `policy` at raw index `i`, compiled with only its `j`th glob and every op:
/// lets the real compiler and decision function answer what one glob matches.
pub(super) fn one_glob(policy: &Policy, src: &str, i: usize, j: usize) -> Option<Rule> {
    let mut raw = policy.raw().clone();
    let mut r = raw.rules.get(i)?.clone();
    r.paths = vec![r.paths.get(j)?.clone()];
    r.ops = vec![Spanned::new(0..0, "*".to_string())];
    raw.rules = vec![r];
    raw.tests.clear();
    raw.content = None;
    raw.agent = None;
    raw.sandbox = None;
    let compiled = crate::compile::compile(&raw, src, None).ok()?;
    compiled.rules.into_iter().next()
}
