//! Differences in `[limits]`, secret-name patterns and content rules.

use super::item::{Direction, Item};
use crate::content::ContentRuleShape;
use crate::{ContentScanner, Limits, OpClass, Policy, SecretPattern};
use fsgate_decide::BinaryMode;

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
        (
            "max_process_file_bytes",
            old.max_process_file_bytes,
            new.max_process_file_bytes,
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
            // A new regex may miss names the old one caught: for a gate, it loosens.
            Some(q) if q.source != p.source => out.push(Item::new(
                Direction::Loosens,
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
            // Not scanning writes when nothing can be written lets nothing through.
            let d = if new.can_ever(op) {
                Direction::wider(!b.applies_to(op))
            } else {
                Direction::Changes
            };
            out.push(Item::new(
                d,
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
        .is_some_and(|c| c.disabled_rules.iter().any(|d| d.get_ref() == bare))
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
    // A new matcher may miss content the old one caught (a regex that never matches):
    // for a gate, it loosens.
    if r.matcher != s.matcher {
        out.push(Item::new(
            Direction::Loosens,
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
