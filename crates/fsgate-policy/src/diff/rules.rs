//! Differences in the `[[rule]]`s, by id: added, removed, and what changed in each.

use std::collections::{BTreeSet, HashMap};

use super::item::{Direction, Item};
use crate::{OpClass, Policy, Rule};
use fsgate_decide::Effect;

/// A rule as one line: `allow read, list on docs/** (extensions md)`.
fn describe(r: &Rule) -> String {
    let mut s = format!(
        "{} {} on {}",
        crate::full_decision::effect_name(r.effect),
        ops_text(&r.ops),
        r.globs.join(", ")
    );
    if let Some(ext) = &r.extensions() {
        s.push_str(&format!(" (extensions {})", ext.join(", ")));
    }
    s
}

fn ops_text(ops: &[bool; 4]) -> String {
    let names: Vec<&str> = OpClass::ALL
        .iter()
        .filter(|o| ops[**o as usize])
        .map(|o| o.as_str())
        .collect();
    if names.is_empty() {
        "nothing".into()
    } else {
        names.join(", ")
    }
}

/// Rules added, removed or changed, by id: an allow that covers more loosens, a deny
/// that covers more tightens, an ask that covers less loosens (see [`more_of`]).
pub(super) fn rules(
    old: &Policy,
    old_text: &str,
    new: &Policy,
    new_text: &str,
    out: &mut Vec<Item>,
) {
    let (extra_a, extra_b) = (rule_tables(old_text), rule_tables(new_text));
    for r in old.rules() {
        match new.rules().iter().find(|n| n.id == r.id) {
            // A deny gone loosens, unless the new policy's denies still cover it.
            None if r.effect == Effect::Deny && covered(r, new.rules(), &extra_b) => {
                let now = "(removed; the new policy's deny rules still cover it)";
                out.push(Item::new(
                    Direction::Changes,
                    "rule",
                    &r.id,
                    describe(r),
                    now,
                ));
            }
            None => out.push(Item::new(
                less_of(r.effect),
                "rule",
                &r.id,
                describe(r),
                "(removed)",
            )),
            Some(n) => {
                rule_change(r, n, out);
                let empty = toml::Table::new();
                let ta = extra_a.get(&r.id).unwrap_or(&empty);
                let tb = extra_b.get(&r.id).unwrap_or(&empty);
                if r.effect == n.effect {
                    rule_extra_keys(&r.id, r.effect, ta, tb, out);
                }
            }
        }
    }
    for n in new.rules() {
        if old.rules().iter().any(|r| r.id == n.id) {
            continue;
        }
        // An allow added loosens, unless the old policy's allows already covered it.
        if n.effect == Effect::Allow && covered(n, old.rules(), &extra_a) {
            let now = format!("{} (the old policy's allow rules covered it)", describe(n));
            out.push(Item::new(
                Direction::Changes,
                "rule",
                &n.id,
                "(absent)",
                now,
            ));
        } else {
            out.push(Item::new(
                more_of(n.effect, true),
                "rule",
                &n.id,
                "(absent)",
                describe(n),
            ));
        }
    }
}

/// True if rules of `pool` with `r`'s effect and no conditions of their own cover `r`
/// on each of its ops and globs: the same glob (as written) or `**`, and every extension
/// `r` is limited to (or any). Conservative: textually different but equivalent globs
/// count as not covered.
fn covered(r: &Rule, pool: &[Rule], pool_tables: &HashMap<String, toml::Table>) -> bool {
    let plain = |p: &Rule| {
        pool_tables
            .get(&p.id)
            .is_none_or(|t| t.keys().all(|k| RULE_KEYS.contains(&k.as_str())))
    };
    let exts = |p: &Rule| match (&p.extensions(), &r.extensions()) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(pe), Some(re)) => re.iter().all(|e| pe.contains(e)),
    };
    let candidates: Vec<&Rule> = pool
        .iter()
        .filter(|p| p.effect == r.effect && plain(p) && exts(p))
        .collect();
    (0..4).filter(|i| r.ops[*i]).all(|i| {
        r.globs.iter().all(|g| {
            candidates
                .iter()
                .any(|p| p.ops[i] && p.globs.iter().any(|x| x == "**" || x == g))
        })
    })
}

/// Effect, ops, paths and extensions of a rule both policies have.
fn rule_change(r: &Rule, n: &Rule, out: &mut Vec<Item>) {
    if r.effect != n.effect {
        // Deny > ask > allow: allow -> ask tightens, ask -> allow and deny -> ask loosen.
        let d = Direction::wider(n.effect.weight() < r.effect.weight());
        out.push(Item::new(d, "rule", &r.id, describe(r), describe(n)));
        return;
    }
    let more = |more: bool| more_of(r.effect, more);
    // Ops one side has and the other lacks: gained ones cover more.
    let gained = (0..4).any(|i| n.ops[i] && !r.ops[i]);
    let lost = (0..4).any(|i| r.ops[i] && !n.ops[i]);
    for (changed, is_more) in [(gained, true), (lost, false)] {
        if changed {
            let (was, now) = (ops_text(&r.ops), ops_text(&n.ops));
            let subject = format!("{} ops", r.id);
            out.push(Item::new(more(is_more), "rule", subject, was, now));
        }
    }
    set_change(&r.id, "paths", &r.globs, &n.globs, &more, out);
    match (r.extensions(), n.extensions()) {
        (None, None) => {}
        (Some(a), Some(b)) => set_change(&r.id, "extensions", a, b, &more, out),
        (a, b) => {
            let text = |e: Option<&[String]>| e.map_or("any".into(), |v| v.join(", "));
            let subject = format!("{} extensions", r.id);
            out.push(Item::new(
                more(b.is_none()),
                "rule",
                subject,
                text(a),
                text(b),
            ));
        }
    }
}

/// A rule of `effect` covering more (`more`) or less: more of an allow loosens and more
/// of a deny tightens. An ask stands between: where it covers less, paths it covered
/// fall to an allow without a person (loosens) or to a deny; where it covers more, it
/// asks where an allow granted or where nothing did, so the direction is unclear (the
/// decision items over the compared paths say which).
fn more_of(effect: Effect, more: bool) -> Direction {
    match effect {
        Effect::Allow => Direction::wider(more),
        Effect::Deny => Direction::wider(!more),
        Effect::Ask if more => Direction::Changes,
        Effect::Ask => Direction::Loosens,
    }
}

/// A rule of `effect` removed.
fn less_of(effect: Effect) -> Direction {
    more_of(effect, false)
}

/// Entries added (more) and removed (less) from a list of a rule.
fn set_change(
    id: &str,
    key: &str,
    old: &[String],
    new: &[String],
    more: &dyn Fn(bool) -> Direction,
    out: &mut Vec<Item>,
) {
    let (a, b): (BTreeSet<&String>, BTreeSet<&String>) =
        (old.iter().collect(), new.iter().collect());
    for x in b.difference(&a) {
        let subject = format!("{id} {key}");
        out.push(Item::new(
            more(true),
            "rule",
            subject,
            "(absent)",
            x.as_str(),
        ));
    }
    for x in a.difference(&b) {
        let subject = format!("{id} {key}");
        out.push(Item::new(
            more(false),
            "rule",
            subject,
            x.as_str(),
            "(removed)",
        ));
    }
}

/// Keys the compiled rule already covers; every other key is compared as written.
const RULE_KEYS: [&str; 6] = ["id", "effect", "ops", "paths", "extensions", "reason"];

/// Each `[[rule]]` table of the text, by id.
fn rule_tables(text: &str) -> HashMap<String, toml::Table> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Default::default();
    };
    let Some(rules) = doc.get("rule").and_then(toml::Value::as_array) else {
        return Default::default();
    };
    rules
        .iter()
        .filter_map(toml::Value::as_table)
        .filter_map(|t| Some((t.get("id")?.as_str()?.to_string(), t.clone())))
        .collect()
}

/// Other keys of a rule (size conditions and whatever comes later): `min_size` lower
/// or `max_size` higher (or gone) covers more; anything else has no clear direction.
pub(super) fn rule_extra_keys(
    id: &str,
    effect: Effect,
    a: &toml::Table,
    b: &toml::Table,
    out: &mut Vec<Item>,
) {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys
        .into_iter()
        .filter(|k| !RULE_KEYS.contains(&k.as_str()))
    {
        let (va, vb) = (a.get(key), b.get(key));
        if va == vb {
            continue;
        }
        let num = |v: Option<&toml::Value>| v.and_then(toml::Value::as_integer);
        let covers_more = match key.as_str() {
            "min_size" => Some(num(vb).unwrap_or(i64::MIN) < num(va).unwrap_or(i64::MIN)),
            "max_size" => Some(num(vb).unwrap_or(i64::MAX) > num(va).unwrap_or(i64::MAX)),
            _ => None,
        };
        let flag = |v: Option<&toml::Value>| v.and_then(toml::Value::as_bool).unwrap_or(false);
        let d = if key == "overridable" {
            // An extending policy may then replace the rule with anything: a deny
            // dropped, an allow widened.
            Direction::wider(flag(vb) && !flag(va))
        } else {
            covers_more.map_or(Direction::Changes, |m| more_of(effect, m))
        };
        let text = |v: Option<&toml::Value>| v.map_or("(unset)".into(), |v| v.to_string());
        out.push(Item::new(
            d,
            "rule",
            format!("{id} {key}"),
            text(va),
            text(vb),
        ));
    }
}
