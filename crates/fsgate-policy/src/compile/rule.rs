//! One `[[rule]]` compiled: its id, ops, paths and conditions, each mistake at its line.

use super::globs::{Invalid, compile_paths};
use crate::error::PolicyError;
use crate::position::at;
use crate::raw::RawRule;
use fsgate_decide::{Condition, OpClass, Rule};

pub(super) fn compile_rule(i: usize, r: &RawRule, src: &str) -> Result<Rule, PolicyError> {
    let id = r.id.get_ref().trim().to_string();
    let invalid = |key: &str, line: usize, message: String| PolicyError::Invalid {
        key: format!("rule[{i}].{key}"),
        line,
        message,
    };
    if id.is_empty() || id.starts_with("secrets:") || id == fsgate_decide::DEFAULT_DENY {
        return Err(invalid(
            "id",
            at(src, &r.id),
            format!("`{id}` is not a usable rule id (empty or reserved)"),
        ));
    }
    let mut ops = [false; 4];
    if r.ops.is_empty() {
        return Err(invalid(
            "ops",
            at(src, &r.id),
            "a rule needs at least one op (read, write, delete, list or \"*\")".into(),
        ));
    }
    for op in &r.ops {
        match op.get_ref().as_str() {
            "*" => ops = [true; 4],
            name => match OpClass::parse(name) {
                Some(c) => ops[c as usize] = true,
                None => {
                    return Err(invalid(
                        "ops",
                        at(src, op),
                        format!("unknown op `{name}`: expected read, write, delete, list or \"*\""),
                    ));
                }
            },
        }
    }
    if r.paths.is_empty() && r.extensions.is_none() {
        return Err(invalid(
            "paths",
            at(src, &r.id),
            "a rule needs `paths` (globs) or `extensions`".into(),
        ));
    }
    let (paths, bases, globs, whole) = compile_paths(r, src, &invalid)?;
    if let (Some(min), Some(max)) = (&r.min_size, &r.max_size)
        && min.get_ref() > max.get_ref()
    {
        return Err(invalid(
            "min_size",
            at(src, min),
            format!(
                "min_size {} is larger than max_size {}: the rule could never apply",
                min.get_ref(),
                max.get_ref()
            ),
        ));
    }
    let mut conditions = Vec::new();
    if let Some(exts) = &r.extensions {
        let exts = exts.iter();
        let lower = exts.map(|e| e.trim_start_matches('.').to_ascii_lowercase());
        conditions.push(Condition::Extension(lower.collect()));
    }
    let (min, max) = (r.min_size.as_ref(), r.max_size.as_ref());
    if min.is_some() || max.is_some() {
        let (min, max) = (min.map(|s| *s.get_ref()), max.map(|s| *s.get_ref()));
        conditions.push(Condition::Size { min, max });
    }
    Ok(Rule {
        id,
        effect: r.effect,
        ops,
        globs,
        paths,
        bases,
        whole,
        conditions,
        reason: r.reason.clone(),
        line: at(src, &r.id),
        workspaces: rule_workspaces(r, src, &invalid)?,
    })
}

/// A rule's `workspaces`: valid names, at least one.
fn rule_workspaces(
    r: &RawRule,
    src: &str,
    invalid: &Invalid<'_>,
) -> Result<Option<Vec<String>>, PolicyError> {
    let Some(names) = &r.workspaces else {
        return Ok(None);
    };
    if names.is_empty() {
        return Err(invalid(
            "workspaces",
            at(src, &r.id),
            "an empty `workspaces` list would apply nowhere; leave it out to apply everywhere"
                .into(),
        ));
    }
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        if !fsgate_base::state::valid_workspace_name(n.get_ref()) {
            return Err(invalid(
                "workspaces",
                at(src, n),
                format!(
                    "`{}` is no workspace name (letters, digits, `.`, `_`, `-`)",
                    n.get_ref()
                ),
            ));
        }
        out.push(n.get_ref().clone());
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use crate::error::PolicyError;

    #[test]
    fn size_bounds_must_leave_room() {
        let text = "version = 1\n[[rule]]\nid = \"r\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"**\"]\nmin_size = 10\nmax_size = 5\n";
        match Policy::from_toml(text, "t") {
            Err(PolicyError::Invalid { key, line, .. }) => {
                assert_eq!((key.as_str(), line), ("rule[0].min_size", 7));
            }
            other => panic!("{:?}", other.err()),
        }
    }
}
