//! Whether a rule an extending file adds or substitutes stays inside what its base
//! allows (or asks about): effect, ops, conditions and paths.

use fsgate_decide::{Effect, OpClass, Rule};

/// None if some allow (or, for a new ask rule, ask) rule of the base covers `rule`, else
/// why not.
pub(super) fn uncovered(rule: &Rule, base_allows: &[Rule]) -> Option<String> {
    if rule.effect == Effect::Deny {
        return Some("is not an allow or ask rule".into());
    }
    let kind = rule.effect.as_str();
    let mut whys = Vec::new();
    for b in base_allows {
        match narrower(rule, b) {
            Ok(()) => return None,
            Err(why) => whys.push(format!("not within `{}`: {why}", b.id)),
        }
    }
    if whys.is_empty() {
        return Some(format!("is a new {kind} rule, and the base allows nothing"));
    }
    Some(format!(
        "is a new {kind} rule that no {} rule of the base covers ({})",
        if rule.effect == Effect::Ask {
            "allow or ask"
        } else {
            "allow"
        },
        whys.join("; ")
    ))
}

/// Ok if `p` allows nothing `b` does not: both allow, `p`'s ops and extensions are among
/// `b`'s, and every glob of `p` starts with a literal directory `b` already covers (a glob
/// covers its match's subtree, so `b` then covers everything the glob can reach), or
/// has a wildcard after it and `b` has the glob `<directory>/**`.
///
/// An ask rule may narrow an allow rule (a person is then asked where the base allowed)
/// or an ask rule; an allow rule only an allow rule (never an ask: nobody would be asked).
pub(crate) fn narrower(p: &Rule, b: &Rule) -> Result<(), String> {
    narrower_effect(p, b)?;
    narrower_scope(p, b)?;
    narrower_paths(p, b)
}

/// An allow rule may narrow an allow rule; an ask rule an allow or ask rule.
fn narrower_effect(p: &Rule, b: &Rule) -> Result<(), String> {
    match (p.effect, b.effect) {
        (Effect::Allow, Effect::Allow) | (Effect::Ask, Effect::Allow | Effect::Ask) => {}
        (Effect::Allow, Effect::Ask) => {
            return Err(
                "an allow rule cannot replace or widen an ask rule: nobody would be asked".into(),
            );
        }
        _ => return Err("only an allow rule (or an ask rule) can narrow an allow rule".into()),
    }
    Ok(())
}

/// `p` covers no op `b` does not, nor anything beyond one of `b`'s conditions.
fn narrower_scope(p: &Rule, b: &Rule) -> Result<(), String> {
    if let Some(op) = OpClass::ALL
        .iter()
        .find(|op| p.ops[**op as usize] && !b.ops[**op as usize])
    {
        return Err(format!(
            "it covers {}, which the base rule does not",
            op.as_str()
        ));
    }
    // Within each of the base's conditions: a replacement without one would reach
    // files the base rule never allowed.
    for bc in &b.conditions {
        bc.within(p.conditions.iter().find(|pc| pc.same_kind(bc)))?;
    }
    Ok(())
}

/// `p`'s globs reach nothing beyond `b`'s paths, nor let the agent list an ancestor
/// `b` does not.
fn narrower_paths(p: &Rule, b: &Rule) -> Result<(), String> {
    let Some(bset) = &b.paths else {
        return Ok(());
    };
    // `**` matches every path: whatever `p` matches lies within it.
    if b.globs.iter().any(|g| g.trim_matches('/') == "**") {
        return Ok(());
    }
    if p.paths.is_none() {
        return Err("it matches any path".into());
    }
    let lists = p.ops[OpClass::List as usize];
    for (glob, base) in p.globs.iter().zip(&p.bases) {
        if base.is_root() {
            return Err(format!(
                "glob `{glob}` has no literal directory to start from"
            ));
        }
        // `src/**` matches what lies beneath `src`, not `src`: a glob with a wildcard
        // after its literal directory reaches only beneath it too.
        let beneath = glob.contains(['*', '?', '[', '{', '\\'])
            && b.globs
                .iter()
                .any(|g| g.trim_matches('/') == format!("{base}/**"));
        if !beneath && !bset.is_match(base.as_str()) {
            return Err(format!(
                "glob `{glob}` reaches beyond the base rule's paths {:?}",
                b.globs
            ));
        }
        // Listing the ancestors of an allowed subtree is allowed: they must be listable
        // under the base rule too.
        let mut anc = base.parent();
        while let Some(a) = anc.filter(|_| lists) {
            if !bset.is_match(a.as_str()) && !b.bases.iter().any(|bb| bb.starts_with(&a)) {
                return Err(format!(
                    "glob `{glob}` lets the agent list `{a}`, which the base rule does not"
                ));
            }
            anc = a.parent();
        }
    }
    Ok(())
}
