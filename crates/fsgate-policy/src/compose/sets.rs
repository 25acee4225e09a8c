//! `[sets]`: named lists of globs, checked, and each `"@name"` in a rule's `paths`
//! replaced by its set's globs (a base file's sets included).

use std::collections::BTreeMap;

use toml::Spanned;

use crate::error::PolicyError;
use crate::position;
use crate::position::line_col;
use crate::raw::RawPolicy;

/// Replaces every `"@name"` entry of a rule's `paths` by the set's globs, keeping the
/// entry's position so that errors in them point at `@name`. `inherited`: the sets of
/// the files this one extends. Returns the (rule id, set name) pairs expanded.
pub(crate) fn expand_sets(
    raw: &mut RawPolicy,
    src: &str,
    inherited: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<(String, String)>, PolicyError> {
    check_sets(raw, src, inherited)?;
    let mut refs = Vec::new();
    for (i, rule) in raw.rules.iter_mut().enumerate() {
        if !rule.paths.iter().any(|p| p.get_ref().starts_with('@')) {
            continue;
        }
        let mut out = Vec::with_capacity(rule.paths.len());
        for entry in std::mem::take(&mut rule.paths) {
            let Some(name) = entry.get_ref().strip_prefix('@') else {
                out.push(entry);
                continue;
            };
            let globs: Vec<String> = match raw.sets.get(name) {
                Some(own) => own.iter().map(|g| g.get_ref().clone()).collect(),
                None => match inherited.get(name) {
                    Some(globs) => globs.clone(),
                    None => {
                        return Err(at(
                            src,
                            &entry,
                            format!("rule[{i}].paths"),
                            format!("unknown set `@{name}`: define it under [sets]"),
                        ));
                    }
                },
            };
            out.extend(globs.into_iter().map(|g| Spanned::new(entry.span(), g)));
            refs.push((rule.id.get_ref().trim().to_string(), name.to_string()));
        }
        rule.paths = out;
    }
    Ok(refs)
}

/// A set is a non-empty list of globs; it names no other set and does not redefine a set
/// of a base (a set naming a set is refused rather than expanded: no cycles to chase).
fn check_sets(
    raw: &RawPolicy,
    src: &str,
    inherited: &BTreeMap<String, Vec<String>>,
) -> Result<(), PolicyError> {
    for (name, globs) in &raw.sets {
        let key = format!("sets.{name}");
        let line = match position::key_line(src, "sets", name) {
            0 => position::section_line(src, "sets"),
            n => n,
        };
        let invalid = |message: String| PolicyError::Invalid {
            key: key.clone(),
            line,
            message,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(invalid(format!(
                "set name `{name}`: use letters, digits, `-` and `_`"
            )));
        }
        if inherited.contains_key(name) {
            return Err(invalid(format!(
                "set `{name}` is defined by the base policy already; use another name"
            )));
        }
        if globs.is_empty() {
            return Err(invalid(format!(
                "set `{name}` is empty: a rule naming it would lose its paths"
            )));
        }
        if let Some(g) = globs.iter().find(|g| g.get_ref().starts_with('@')) {
            return Err(at(
                src,
                g,
                key.clone(),
                format!(
                    "a set cannot name another set (`{}`): list the globs",
                    g.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

fn at(src: &str, s: &Spanned<String>, key: String, message: String) -> PolicyError {
    let (line, col) = line_col(src, s.span().start);
    PolicyError::Located {
        key,
        line,
        col,
        message,
    }
}
