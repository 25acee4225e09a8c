//! The `[[test]]` runner behind `fsgate policy test`: each case decided against its own
//! policy, located by line, plus which rules no case exercised (coverage).

pub use super::full_decision::FullDecision;
use super::full_decision::{decide_access_with_content, effect_name};
use super::position::line_col;
use super::{Access, EntryKind, PathFacts, Policy};
use fsgate_base::path::RelPath;
use fsgate_decide::Effect;

/// The outcome of one `[[test]]` case.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CaseOutcome {
    /// 0-based index among the policy's cases.
    pub index: usize,
    /// 1-based line of the case's `[[test]]` header.
    pub line: usize,
    /// The op as written.
    pub op: String,
    /// The path as written.
    pub path: String,
    /// The expected effect.
    pub expect: Effect,
    /// The expected deciding rule, if the case names one.
    pub expect_rule: Option<String>,
    /// What the policy decided (None if the case itself is malformed).
    pub got: Option<FullDecision>,
    /// Whether the case passed.
    pub passed: bool,
    /// Why it failed, in one line.
    pub failure: Option<String>,
}

/// A rule no case exercised (decided).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Uncovered {
    /// Rule id as decisions name it.
    pub rule: String,
    /// Its line in the policy (0 if unknown).
    pub line: usize,
}

/// All cases of one policy, and its coverage.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestRun {
    /// One per `[[test]]`, in file order.
    pub cases: Vec<CaseOutcome>,
    /// Rules of this policy (`[[rule]]`, custom secret patterns, inline content rules)
    /// that decided no case.
    pub uncovered: Vec<Uncovered>,
    /// Every content rule in force (built-in, gitleaks and inline), `content:<id>`.
    pub content_rules: Vec<String>,
    /// Those that decided some case.
    pub content_exercised: Vec<String>,
}

impl TestRun {
    /// Number of passed cases.
    pub(crate) fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.passed).count()
    }

    /// Number of failed cases.
    pub(crate) fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }
}

/// The line of the `[[test]]` header at or above `line` (1-based).
fn header_line(src: &str, line: usize) -> usize {
    let lines: Vec<&str> = src.lines().collect();
    (1..=line.min(lines.len()))
        .rev()
        .find(|&l| lines[l - 1].trim_start().starts_with("[[test]]"))
        .unwrap_or(line)
}

/// Runs every `[[test]]` case of `policy`, whose text is `src` (for line numbers).
pub fn run_cases(policy: &Policy, src: &str) -> TestRun {
    let cases: Vec<CaseOutcome> = policy
        .raw()
        .tests
        .iter()
        .enumerate()
        .map(|(index, t)| run_case(policy, src, index, t))
        .collect();
    let decided: std::collections::HashSet<&str> = cases
        .iter()
        .filter_map(|c| c.got.as_ref().map(|g| g.rule.as_str()))
        .collect();
    let uncovered = own_rules(policy, src)
        .into_iter()
        .filter(|u| !decided.contains(u.rule.as_str()))
        .collect();
    let content_rules: Vec<String> = policy
        .content_scanner()
        .map(|sc| sc.rule_ids().map(str::to_string).collect())
        .unwrap_or_default();
    let content_exercised = content_rules
        .iter()
        .filter(|id| decided.contains(id.as_str()))
        .cloned()
        .collect();
    TestRun {
        cases,
        uncovered,
        content_rules,
        content_exercised,
    }
}

/// One `[[test]]` case (the `index`th) decided: its outcome, or why it could not be.
pub(crate) fn run_case(
    policy: &Policy,
    src: &str,
    index: usize,
    t: &super::raw::RawTest,
) -> CaseOutcome {
    let line = header_line(src, line_col(src, t.op.span().start).0);
    let mut case = CaseOutcome {
        index,
        line,
        op: t.op.get_ref().clone(),
        path: t.path.clone(),
        expect: t.expect,
        expect_rule: t.rule.clone(),
        got: None,
        passed: false,
        failure: None,
    };
    let Some(op) = Access::parse(t.op.get_ref()) else {
        case.failure = Some(format!(
            "unknown op `{}` (expected one of {})",
            t.op.get_ref(),
            fsgate_decide::ACCESS_NAMES.join(", ")
        ));
        return case;
    };
    let path = match RelPath::parse_rooted(&t.path) {
        Ok(p) => p,
        Err(e) => {
            case.failure = Some(format!("path `{}`: {e}", t.path));
            return case;
        }
    };
    let kind = if t.dir {
        EntryKind::Dir
    } else {
        EntryKind::File
    };
    let facts = PathFacts { kind, size: t.size };
    // A case naming a workspace is decided by the rules that apply there.
    let scoped = t.workspace.as_deref().map(|w| policy.for_workspace(w));
    let got = decide_access_with_content(
        scoped.as_ref().unwrap_or(policy),
        op,
        &path,
        &facts,
        t.content.as_deref().map(str::as_bytes),
    );
    let effect_ok = got.effect == t.expect;
    let rule_ok = t.rule.as_ref().is_none_or(|r| *r == got.rule);
    case.passed = effect_ok && rule_ok;
    if !case.passed {
        let want = match &t.rule {
            Some(r) => format!("{} by {r}", effect_name(t.expect)),
            None => effect_name(t.expect).to_string(),
        };
        case.failure = Some(format!(
            "expected {want}, got {} by {} ({})",
            effect_name(got.effect),
            got.rule,
            got.reason
        ));
    }
    case.got = Some(got);
    case
}

/// The rules a policy author wrote (built-in secret names and content rules are fsgate's
/// own, tested by fsgate): `[[rule]]`s, custom secret patterns, inline content rules.
pub(crate) fn own_rules(policy: &Policy, src: &str) -> Vec<Uncovered> {
    let raw = policy.raw();
    let mut out: Vec<Uncovered> = policy
        .rules()
        .iter()
        .map(|r| Uncovered {
            rule: r.id.clone(),
            line: r.line,
        })
        .collect();
    for p in &raw.secrets.patterns {
        out.push(Uncovered {
            rule: format!("secrets:{}", p.id),
            line: line_col(src, p.regex.span().start).0,
        });
    }
    if let (Some(c), Some(sc)) = (&raw.content, policy.content_scanner()) {
        for r in &c.rules {
            let id = format!("content:{}", r.id.get_ref().trim());
            if sc.rule_ids().any(|x| x == id) {
                out.push(Uncovered {
                    rule: id,
                    line: line_col(src, r.id.span().start).0,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"version = 1
[secrets]
patterns = [{ id = "vault", regex = '^\.vault-token$' }]

[[rule]]
id = "src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]

[[rule]]
id = "no-gen"
effect = "deny"
ops = ["*"]
paths = ["src/gen"]

[[test]]
op = "read"
path = "src/a.rs"
expect = "allow"
rule = "src"

[[test]]
op = "write"
path = "src/a.rs"
expect = "allow"

[[test]]
op = "read"
path = "src/gen/x.rs"
expect = "deny"
rule = "src"

[[test]]
op = "reed"
path = "a"
expect = "deny"
"#;

    #[test]
    fn cases_pass_fail_with_header_lines() {
        let pol = Policy::from_toml(POLICY, "t").unwrap();
        let run = run_cases(&pol, POLICY);
        assert_eq!((run.passed(), run.failed()), (1, 3));
        let lines: Vec<usize> = run.cases.iter().map(|c| c.line).collect();
        assert_eq!(lines, vec![17, 23, 28, 34]);
        let f = run.cases[1].failure.as_deref().unwrap();
        assert!(
            f.starts_with("expected allow, got deny by default-deny"),
            "{f}"
        );
        let f = run.cases[2].failure.as_deref().unwrap();
        assert!(
            f.starts_with("expected deny by src, got deny by no-gen"),
            "{f}"
        );
        assert!(
            run.cases[3]
                .failure
                .as_deref()
                .unwrap()
                .contains("unknown op `reed`")
        );
    }

    #[test]
    fn coverage_lists_undecided_own_rules() {
        let pol = Policy::from_toml(POLICY, "t").unwrap();
        let run = run_cases(&pol, POLICY);
        let ids: Vec<&str> = run.uncovered.iter().map(|u| u.rule.as_str()).collect();
        assert_eq!(ids, vec!["secrets:vault"]);
        assert_eq!(run.uncovered[0].line, 3);
    }

    #[test]
    fn content_cases_decide_by_content_rule() {
        let text = "version = 1\n[content]\nbuiltin = false\n[[content.rules]]\nid = \"k\"\nregex = 'KEY[0-9]{4}'\n\
[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n\
[[test]]\nop = \"write\"\npath = \"a.txt\"\ncontent = \"x KEY1234\"\nexpect = \"deny\"\nrule = \"content:k\"\n\
[[test]]\nop = \"list\"\npath = \"a.txt\"\ncontent = \"x KEY1234\"\nexpect = \"allow\"\n";
        let pol = Policy::from_toml(text, "t").unwrap();
        let run = run_cases(&pol, text);
        assert_eq!((run.passed(), run.failed()), (2, 0), "{:?}", run.cases);
        assert!(run.uncovered.is_empty(), "{:?}", run.uncovered);
    }

    /// `.ci/run` runs `fsgate policy test policies/*.toml policies/examples/*.toml`:
    /// every shipped policy's cases pass, and every rule it writes is exercised.
    #[test]
    fn every_shipped_policy_passes_its_tests_with_full_coverage() {
        let dir =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("policies");
        let mut n = 0;
        let entries = [dir.clone(), dir.join("examples")]
            .into_iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten());
        for e in entries {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let pol = Policy::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let run = run_cases(&pol, &text);
            let failures: Vec<String> = run
                .cases
                .iter()
                .filter_map(|c| c.failure.as_ref().map(|f| format!("line {}: {f}", c.line)))
                .collect();
            assert!(failures.is_empty(), "{}: {failures:#?}", path.display());
            assert!(
                run.uncovered.is_empty(),
                "{}: {:?}",
                path.display(),
                run.uncovered
            );
            assert!(run.passed() >= 5, "{}: too few cases", path.display());
            n += 1;
        }
        assert!(
            n >= 5,
            "the library has default, readonly, strict, ci-bot, monorepo-team"
        );
    }

    #[test]
    fn shipped_default_policy_passes_its_own_tests() {
        let pol = Policy::builtin_default().unwrap();
        let run = run_cases(&pol, super::super::DEFAULT_POLICY_TOML);
        let failures: Vec<_> = run.cases.iter().filter_map(|c| c.failure.clone()).collect();
        assert!(failures.is_empty(), "{failures:?}");
        assert!(run.passed() >= 10);
    }
}
