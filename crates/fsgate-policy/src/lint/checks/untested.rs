//! `untested-deny`, `untested-ask` and `unknown-test-rule`: safeguards no [[test]] case
//! decides, and cases that expect a rule the policy does not have.

use std::collections::HashSet;

use crate::Policy;
use crate::lint::findings::{Severity, Sink};
use crate::lint::shadow;
use crate::testrun::{own_rules, run_cases};
use fsgate_decide::Effect;

pub(super) fn untested(policy: &Policy, src: &str, sink: &mut Sink<'_>) {
    let run = run_cases(policy, src);
    let decided: HashSet<String> = run
        .cases
        .iter()
        .filter_map(|c| c.got.as_ref().map(|g| g.rule.clone()))
        .collect();
    for u in own_rules(policy, src) {
        if decided.contains(&u.rule) || u.rule.starts_with("content:") {
            continue;
        }
        let rule = policy.rules().iter().find(|r| r.id == u.rule);
        // Deny and ask rules are safeguards: one no case decides may not hold.
        if rule.is_some_and(|r| r.effect == Effect::Allow) {
            continue;
        }
        let effect = rule.map_or(Effect::Deny, |r| r.effect);
        // A suggestion is run as `policy test` would run it before it is offered; a
        // rule no sample lets decide is reported as `shadowed-rule` instead.
        if rule.is_some_and(|r| {
            let s = shadow::sample(policy, r);
            s.matched && !s.decides
        }) {
            continue;
        }
        let suggestion = rule.and_then(|r| shadow::suggest(policy, r));
        let hint = suggestion.unwrap_or_else(|| {
            format!(
                "add a [[test]] with a path this {} {}, expect = \"{}\", rule = \"{}\"",
                if rule.is_some() { "rule" } else { "pattern" },
                if effect == Effect::Ask {
                    "asks about"
                } else {
                    "denies"
                },
                effect.as_str(),
                u.rule
            )
        });
        // An inherited rule's tests live in the base that wrote it.
        if policy.rule_origin(&u.rule).is_some() {
            continue;
        }
        sink.at(
            sink.line_pos(u.line),
            Severity::Warning,
            if effect == Effect::Ask {
                "untested-ask"
            } else {
                "untested-deny"
            },
            format!(
                "{} rule `{}` has no [[test]] that it decides",
                effect.as_str(),
                u.rule
            ),
            &hint,
        );
    }
    let mut known: HashSet<String> = policy.rules().iter().map(|r| r.id.clone()).collect();
    known.extend(policy.secret_patterns().iter().map(|p| p.id.clone()));
    if let Some(sc) = policy.content_scanner() {
        known.extend(sc.rule_ids().map(str::to_string));
    }
    known.insert(crate::DEFAULT_DENY.to_string());
    for (t, c) in policy.raw().tests.iter().zip(&run.cases) {
        if let Some(r) = &t.rule
            && !known.contains(r)
        {
            sink.at(
                sink.line_pos(c.line),
                Severity::Warning,
                "unknown-test-rule",
                format!("[[test]] expects rule `{r}`, which this policy does not have"),
                "use a rule id, secrets:<id>, content:<id> or default-deny",
            );
        }
    }
}
