//! Each content rule's own examples checked against it: true positives found, false
//! positives not.

use super::ContentScanner;
use super::rule::{At, Errs, Spec};
#[cfg(test)]
use super::rule::{BUILTIN_ERRS, builtin_set, builtin_specs};
use crate::error::PolicyError;

/// Checks that every built-in rule detects (or not) each example it carries, on its
/// own, without a policy's global allowlists.
#[cfg(test)]
pub(super) fn check_builtin_examples() -> Result<(), String> {
    let specs = builtin_specs();
    let scanner = ContentScanner {
        rules: builtin_set()?.to_vec(),
        global: Vec::new(),
        prefilter: super::Prefilter::default(),
        keyword_rules: Vec::new(),
        ops: [false; 4],
        sources: Vec::new(),
        clean: Default::default(),
    };
    check_examples(&scanner, &specs, &BUILTIN_ERRS, false).map_err(|e| e.to_string())
}

/// Every true-positive example must be found by its rule (keywords included, so the
/// prefilter cannot hide it), and no false-positive example may be.
pub(super) fn check_examples(
    scanner: &ContentScanner,
    specs: &[Spec],
    errs: &Errs<'_>,
    skip_builtin: bool,
) -> Result<(), PolicyError> {
    for (i, s) in specs.iter().enumerate() {
        if skip_builtin && matches!(s.at, At::Builtin) {
            continue; // checked once, on their own, in `builtin_rule`
        }
        let rule = &scanner.rules[i];
        let path_only = rule.regex.is_none();
        let found = |ex: &str| -> bool {
            if path_only {
                !scanner.detect(i, Some(ex), b"", None).is_empty()
            } else {
                let lower = ex.to_lowercase();
                let keyword_ok = rule.keywords.is_empty()
                    || rule.keywords.iter().any(|k| lower.contains(k.as_str()));
                keyword_ok && !scanner.detect(i, None, ex.as_bytes(), None).is_empty()
            }
        };
        for (n, tp) in s.tps.iter().enumerate() {
            if !found(tp) {
                return Err(errs.at(
                    &s.at,
                    &format!(".tps[{n}]"),
                    format!(
                        "rule `{}` does not detect its true-positive example {:?}",
                        s.id,
                        preview(tp)
                    ),
                ));
            }
        }
        for (n, fp) in s.fps.iter().enumerate() {
            if found(fp) {
                return Err(errs.at(
                    &s.at,
                    &format!(".fps[{n}]"),
                    format!(
                        "rule `{}` detects its false-positive example {:?}",
                        s.id,
                        preview(fp)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn preview(s: &str) -> String {
    let mut p: String = s.chars().take(48).collect();
    if p.len() < s.len() {
        p.push_str("...");
    }
    p
}
