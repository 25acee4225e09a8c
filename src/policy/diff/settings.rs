//! Differences in `[limits]`, secret-name patterns, content rules and `[[rule]]`s.

use std::collections::BTreeSet;

use super::{Direction, Item};
use crate::policy::content::ContentRuleShape;
use crate::policy::raw::{BinaryMode, Effect};
use crate::policy::{ContentScanner, Limits, OpClass, Policy, Rule, SecretPattern};

/// Larger limits loosen; binary handling orders deny < media < base64.
pub(super) fn limits(old: &Limits, new: &Limits, out: &mut Vec<Item>) {
    for (key, a, b) in [
        ("max_read_bytes", old.max_read_bytes, new.max_read_bytes),
        ("max_write_bytes", old.max_write_bytes, new.max_write_bytes),
        (
            "max_message_bytes",
            old.max_message_bytes,
            new.max_message_bytes,
        ),
    ] {
        if a != b {
            let d = Direction::wider(b > a);
            out.push(Item::new(d, "limits", key, a.to_string(), b.to_string()));
        }
    }
    let rank = |m: BinaryMode| match m {
        BinaryMode::Deny => 0,
        BinaryMode::Media => 1,
        BinaryMode::Base64 => 2,
    };
    if old.binary != new.binary {
        out.push(Item::new(
            Direction::wider(rank(new.binary) > rank(old.binary)),
            "limits",
            "binary",
            binary_name(old.binary),
            binary_name(new.binary),
        ));
    }
}

fn binary_name(m: BinaryMode) -> &'static str {
    match m {
        BinaryMode::Deny => "deny",
        BinaryMode::Media => "media",
        BinaryMode::Base64 => "base64",
    }
}

/// Compares the compiled pattern lists by id and source, so whatever changes the list
/// (the built-in switch, waivers, own patterns) shows. A pattern gone loosens.
pub(super) fn secrets(old: &[SecretPattern], new: &[SecretPattern], out: &mut Vec<Item>) {
    let (old_b, new_b) = (old.iter().any(|p| p.builtin), new.iter().any(|p| p.builtin));
    // The whole built-in list switched: one line instead of one per pattern.
    let whole_list = old_b != new_b;
    if whole_list {
        let onoff = |b: bool| if b { "on" } else { "off" };
        out.push(Item::new(
            Direction::wider(!new_b),
            "secrets",
            "built-in secret-name list",
            onoff(old_b),
            onoff(new_b),
        ));
    }
    for p in old {
        match new.iter().find(|q| q.id == p.id) {
            None if whole_list && p.builtin => {}
            None => out.push(Item::new(
                Direction::Loosens,
                "secrets",
                &p.id,
                format!("/{}/", p.source),
                "(removed)",
            )),
            Some(q) if q.source != p.source => out.push(Item::new(
                Direction::Changes,
                "secrets",
                &p.id,
                format!("/{}/", p.source),
                format!("/{}/", q.source),
            )),
            Some(_) => {}
        }
    }
    for q in new.iter().filter(|q| !old.iter().any(|p| p.id == q.id)) {
        if !(whole_list && q.builtin) {
            let src = format!("/{}/", q.source);
            out.push(Item::new(
                Direction::Tightens,
                "secrets",
                &q.id,
                "(absent)",
                src,
            ));
        }
    }
}

/// `[content]` present or not, built-in on/off, scanned ops, rules, allowlists.
pub(super) fn content(old: &Policy, new: &Policy, out: &mut Vec<Item>) {
    let (a, b) = match (old.content_scanner(), new.content_scanner()) {
        (None, None) => return,
        (Some(_), None) => {
            let msg = "absent: content is not scanned";
            out.push(Item::new(
                Direction::Loosens,
                "content",
                "[content]",
                "present",
                msg,
            ));
            return;
        }
        (None, Some(_)) => {
            let msg = "present: content is scanned";
            out.push(Item::new(
                Direction::Tightens,
                "content",
                "[content]",
                "absent",
                msg,
            ));
            return;
        }
        (Some(a), Some(b)) => (a, b),
    };
    let builtin = |p: &Policy| p.raw().content.as_ref().is_some_and(|c| c.builtin);
    if builtin(old) != builtin(new) {
        let onoff = |b: bool| if b { "on" } else { "off" };
        out.push(Item::new(
            Direction::wider(!builtin(new)),
            "content",
            "built-in content rules",
            onoff(builtin(old)),
            onoff(builtin(new)),
        ));
    }
    for op in [OpClass::Read, OpClass::Write] {
        if a.applies_to(op) != b.applies_to(op) {
            let word = |s: bool| if s { "scanned" } else { "not scanned" };
            out.push(Item::new(
                Direction::wider(!b.applies_to(op)),
                "content",
                format!("ops: {}", op.as_str()),
                word(a.applies_to(op)),
                word(b.applies_to(op)),
            ));
        }
    }
    content_rules(old, a, new, b, out);
    allowlists(
        "global allowlists",
        &a.global_allowlist_shapes(),
        &b.global_allowlist_shapes(),
        out,
    );
}

/// Whether `id` (`content:<id>`) is in the policy's `disabled_rules`.
fn disabled(p: &Policy, id: &str) -> bool {
    let bare = id.strip_prefix("content:").unwrap_or(id);
    p.raw()
        .content
        .as_ref()
        .is_some_and(|c| c.disabled_rules.iter().any(|d| d == bare))
}

fn content_rules(
    old: &Policy,
    a: &ContentScanner,
    new: &Policy,
    b: &ContentScanner,
    out: &mut Vec<Item>,
) {
    let (ra, rb) = (a.rule_shapes(), b.rule_shapes());
    let state = |p: &Policy, id: &str| {
        if disabled(p, id) {
            "disabled"
        } else {
            "(absent)"
        }
    };
    for r in &ra {
        match rb.iter().find(|s| s.id == r.id) {
            None => out.push(Item::new(
                Direction::Loosens,
                "content",
                &r.id,
                "on",
                state(new, &r.id),
            )),
            Some(s) => content_rule_change(r, s, out),
        }
    }
    for s in rb.iter().filter(|s| !ra.iter().any(|r| r.id == s.id)) {
        let was = state(old, &s.id);
        out.push(Item::new(Direction::Tightens, "content", &s.id, was, "on"));
    }
}

fn content_rule_change(r: &ContentRuleShape, s: &ContentRuleShape, out: &mut Vec<Item>) {
    if r.matcher != s.matcher {
        out.push(Item::new(
            Direction::Changes,
            "content",
            format!("{} definition", r.id),
            &r.matcher,
            &s.matcher,
        ));
    }
    allowlists(
        &format!("{} allowlists", r.id),
        &r.allowlists,
        &s.allowlists,
        out,
    );
}

/// An allowlist added loosens (more content passes); one removed tightens.
fn allowlists(subject: &str, old: &[String], new: &[String], out: &mut Vec<Item>) {
    for added in new.iter().filter(|x| !old.contains(x)) {
        out.push(Item::new(
            Direction::Loosens,
            "content",
            subject,
            "(absent)",
            added,
        ));
    }
    for removed in old.iter().filter(|x| !new.contains(x)) {
        out.push(Item::new(
            Direction::Tightens,
            "content",
            subject,
            removed,
            "(removed)",
        ));
    }
}

/// A rule as one line: `allow read, list on docs/** (extensions md)`.
fn describe(r: &Rule) -> String {
    let mut s = format!(
        "{} {} on {}",
        crate::policy::testrun::effect_name(r.effect),
        ops_text(&r.ops),
        r.globs.join(", ")
    );
    if let Some(ext) = &r.extensions {
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
/// that covers more tightens.
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
            None => out.push(Item::new(
                Direction::wider(r.effect == Effect::Deny),
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
        if !old.rules().iter().any(|r| r.id == n.id) {
            let d = Direction::wider(n.effect == Effect::Allow);
            out.push(Item::new(d, "rule", &n.id, "(absent)", describe(n)));
        }
    }
}

/// Effect, ops, paths and extensions of a rule both policies have.
fn rule_change(r: &Rule, n: &Rule, out: &mut Vec<Item>) {
    if r.effect != n.effect {
        let d = Direction::wider(n.effect == Effect::Allow);
        out.push(Item::new(d, "rule", &r.id, describe(r), describe(n)));
        return;
    }
    // "More" of a rule widens an allow and narrows access under a deny.
    let more = |more: bool| Direction::wider(more == (r.effect == Effect::Allow));
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
    match (&r.extensions, &n.extensions) {
        (None, None) => {}
        (Some(a), Some(b)) => set_change(&r.id, "extensions", a, b, &more, out),
        (a, b) => {
            let text = |e: &Option<Vec<String>>| e.as_ref().map_or("any".into(), |v| v.join(", "));
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
fn rule_tables(text: &str) -> std::collections::HashMap<String, toml::Table> {
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
        let d = covers_more.map_or(Direction::Changes, |m| {
            Direction::wider(m == (effect == Effect::Allow))
        });
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
