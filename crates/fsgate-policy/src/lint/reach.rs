//! What a glob reaches, as opposed to what it looks like: globs that match no possible
//! path (`no-match`), how a `./`, `/` or trailing `/` glob is read (`glob-form`), globs
//! broader than they look (`broad-glob`) and, with `--workspace`, globs matching
//! nothing in the real tree (`workspace-no-match`).

use std::path::Path;

use super::findings::{LintOptions, Severity, Sink, only};
use super::globs::{Form, fill, glob_samples, normal_form, wildcard_extensions};
use super::shadow::{ops_of, rule_samples};
use crate::{EntryKind, OpClass, Policy, Rule};
use fsgate_base::path::RelPath;
use fsgate_decide::Effect;
use fsgate_decide::floor::FixedFloor;

/// The `--workspace` walk stops after this many entries.
pub(super) const MAX_WORKSPACE_ENTRIES: usize = 200_000;

/// One glob of one rule, with where it is written.
struct Glob<'a> {
    rule: &'a Rule,
    /// Index of the rule in the raw file and of the glob in its `paths`.
    at: (usize, usize),
    text: &'a str,
    pos: (usize, usize),
}

fn globs<'a>(policy: &'a Policy, sink: &Sink<'_>) -> Vec<Glob<'a>> {
    let mut out = Vec::new();
    for (i, raw) in policy.raw().rules.iter().enumerate() {
        let id = raw.id.get_ref().trim();
        let Some(rule) = policy.rules().iter().find(|r| r.id == id) else {
            continue;
        };
        for (j, g) in raw.paths.iter().enumerate() {
            out.push(Glob {
                rule,
                at: (i, j),
                text: g.get_ref(),
                pos: sink.pos(g.span().start),
            });
        }
    }
    out
}

/// True if `r` alone decides `op` on the file `path`.
fn decides(alone: &Policy, r: &Rule, op: OpClass, path: &str) -> bool {
    RelPath::parse_rooted(&format!("/{path}"))
        .is_ok_and(|p| !p.is_root() && alone.decide(op, &p, EntryKind::File).rule == r.id)
}

pub(super) fn run(
    policy: &Policy,
    sink: &mut Sink<'_>,
    floor: Option<&FixedFloor>,
    options: &LintOptions,
) {
    let src = sink.src;
    for g in globs(policy, sink) {
        let Some(one) = super::shadow::one_glob(policy, src, g.at.0, g.at.1) else {
            continue;
        };
        let alone = only(policy, vec![one.clone()]);
        // A glob matching nothing is not also called broad, nor explained.
        if no_match(&g, &alone, &one, sink) {
            continue;
        }
        forms(&g, sink);
        if g.rule.effect == Effect::Allow {
            broad(&g, &alone, &one, sink);
        }
    }
    if let Some(fl) = floor {
        floor_only(policy, fl, sink);
    }
    if let Some(ws) = &options.workspace {
        workspace(policy, ws, sink);
    }
}

/// `glob-form`: a note saying how a `./x`, `/x` or `x/` glob is read.
fn forms(g: &Glob<'_>, sink: &mut Sink<'_>) {
    let (normal, forms) = normal_form(g.text);
    let Some(first) = forms.first() else { return };
    let whole = normal.is_empty() || normal == "**";
    let meaning = if whole {
        "the workspace root, i.e. the whole tree".to_string()
    } else {
        format!("`{normal}`: the path `{normal}` itself and everything beneath it")
    };
    let why = match first {
        Form::Dot => "policy paths are relative to the workspace root",
        Form::Leading => "a leading `/` is the workspace root, not the filesystem's",
        Form::Trailing => "a trailing `/` does not limit a glob to what lies beneath",
    };
    let shown = if normal.is_empty() {
        "**"
    } else {
        normal.as_str()
    };
    let hint = if *first == Form::Trailing && !whole && !normal.ends_with("/**") {
        format!("write `{normal}` (the same), or `{normal}/**` for what lies beneath only")
    } else {
        format!("write `{shown}`, which means the same")
    };
    sink.at(
        g.pos,
        Severity::Note,
        "glob-form",
        format!(
            "glob `{}` of rule `{}` is read as {meaning} ({why})",
            g.text, g.rule.id
        ),
        &hint,
    );
}

/// `no-match`: a glob whose extension contradicts the rule's `extensions`, or with a
/// component no path has (`.` or empty after normalisation, a NUL character).
/// Returns true if it reported the glob.
fn no_match(g: &Glob<'_>, alone: &Policy, one: &Rule, sink: &mut Sink<'_>) -> bool {
    let (normal, _) = normal_form(g.text);
    let severity = match g.rule.effect {
        Effect::Deny | Effect::Ask => Severity::Error,
        Effect::Allow => Severity::Warning,
    };
    if let (Some(named), Some(listed)) = (wildcard_extensions(&normal), &g.rule.extensions())
        && !named.iter().any(|e| listed.contains(e))
    {
        let stem = normal.rsplit_once('/').map_or("", |(d, _)| d);
        let wider = if stem.is_empty() {
            "*".to_string()
        } else {
            format!("{stem}/*")
        };
        sink.at(
            g.pos,
            severity,
            "no-match",
            format!(
                "glob `{}` of rule `{}` names .{} files, but the rule applies only to extensions [{}]: it matches no such file (only files beneath a directory named so)",
                g.text,
                g.rule.id,
                named.join(", ."),
                listed.join(", ")
            ),
            &format!(
                "add the extension to `extensions`, or write the glob without it (`{wider}`)"
            ),
        );
        return true;
    }
    let comps: Vec<&str> = normal.split('/').collect();
    let nul = normal.contains('\0');
    let odd = comps.iter().any(|c| *c == "." || c.is_empty());
    if !nul && !odd && normal == g.text {
        return false;
    }
    // The compiler may read such forms away: ask it with the paths the glob would mean.
    let meant: Vec<&str> = comps
        .into_iter()
        .filter(|c| *c != "." && !c.is_empty())
        .collect();
    // Nothing left is the workspace root: the whole tree, which `glob-form` explains.
    if !nul && (meant.is_empty() || reachable(alone, one, &meant.join("/"))) {
        return false;
    }
    let what = if nul {
        "it has a NUL character, which no path component can hold".to_string()
    } else if odd {
        "it has a `.` or empty component, which no normalised path has".to_string()
    } else {
        format!("as compiled, it does not match `{normal}`")
    };
    sink.at(
        g.pos,
        severity,
        "no-match",
        format!(
            "glob `{}` of rule `{}` matches no path: {what}",
            g.text.escape_default(),
            g.rule.id
        ),
        &if nul || odd || normal.is_empty() {
            "write the glob relative to the workspace root without `.` or empty components (`a/.` is `a`; `**` is the whole tree)".to_string()
        } else {
            format!("write `{normal}`")
        },
    );
    true
}

/// True if `one` alone decides some path `glob` (already normalised; empty for the
/// whole tree) stands for.
fn reachable(alone: &Policy, one: &Rule, glob: &str) -> bool {
    let glob = if glob.is_empty() { "**" } else { glob };
    glob_samples(glob, one.extensions())
        .iter()
        .any(|p| decides(alone, one, OpClass::Read, p))
}

/// `broad-glob`: on an allow rule covering write or delete, a top-level `*` (the whole
/// tree), `**/x` (also `x` at the top), or `x/*.ext` (also everything beneath a directory
/// named like `x/y.ext`); each confirmed by deciding an example path.
fn broad(g: &Glob<'_>, alone: &Policy, one: &Rule, sink: &mut Sink<'_>) {
    let r = g.rule;
    let Some(op) = [OpClass::Write, OpClass::Delete]
        .into_iter()
        .find(|o| r.ops[*o as usize])
    else {
        return;
    };
    let (normal, _) = normal_form(g.text);
    let ext = r
        .extensions()
        .and_then(|e| e.first().cloned())
        .unwrap_or_else(|| "sh".into());
    let (example, message, hint) = if normal == "*" {
        (
            format!("any/depth/file.{ext}"),
            "covers the whole tree like `**`: a top-level directory it matches covers everything beneath it".to_string(),
            "write `**` to say so, or name the directories meant (`src/**`)".to_string(),
        )
    } else if let Some(rest) = normal.strip_prefix("**/") {
        let top = if rest == "*.md" {
            "README.md".to_string()
        } else {
            fill(rest, "x")
        };
        (
            top.clone(),
            format!("also matches `{top}` at the top of the workspace, not only in subdirectories"),
            format!(
                "write `*/**/{rest}` to require a directory above it, or keep it if the top level is meant"
            ),
        )
    } else if let Some(named) = wildcard_extensions(&normal) {
        if r.extensions()
            .as_ref()
            .is_some_and(|l| named.iter().any(|e| l.contains(e)))
        {
            return;
        }
        (
            format!("{}/payload.{ext}", fill(&normal, "x")),
            format!(
                "also opens everything beneath a directory named like `{}` (a matched directory covers its subtree)",
                fill(&normal, "x")
            ),
            format!(
                "keep the glob and add `extensions = [\"{}\"]`, so that only such files match beneath it",
                named.join("\", \"")
            ),
        )
    } else {
        return;
    };
    if !decides(alone, one, op, &example) {
        return;
    }
    sink.at(
        g.pos,
        Severity::Warning,
        "broad-glob",
        format!(
            "glob `{}` of allow rule `{}` {message} ({} `{example}` is allowed)",
            g.text,
            r.id,
            op.as_str()
        ),
        &hint,
    );
}

/// `no-match` with `--workspace`: an allow rule every sample of which is one of fsgate's
/// own files, which the fixed floor refuses whatever the rule says.
fn floor_only(policy: &Policy, floor: &FixedFloor, sink: &mut Sink<'_>) {
    if floor.is_empty() {
        return;
    }
    let mut floored = policy.clone();
    floored.set_floor(floor.clone());
    for r in policy.rules().iter().filter(|r| r.effect != Effect::Deny) {
        let alone = only(policy, vec![r.clone()]);
        let mut matched = false;
        let mut all_floor = true;
        for s in rule_samples(r) {
            for op in ops_of(r) {
                if alone.decide(op, &s, EntryKind::File).rule != r.id {
                    continue;
                }
                matched = true;
                all_floor &= floored
                    .decide(op, &s, EntryKind::File)
                    .rule
                    .starts_with("floor:");
            }
        }
        if matched && all_floor {
            sink.at_rule(
 r,
                Severity::Warning,
                "no-match",
                format!(
                    "{} rule `{}` can allow nothing: every path it matches is one of fsgate's own files, which the fixed floor refuses",
                    r.effect.as_str(),
                    r.id
                ),
                "remove the rule; the policy file, audit log and backups are never the agent's",
            );
        }
    }
}

/// `workspace-no-match`: each glob that matches no entry of the real tree.
fn workspace(policy: &Policy, ws: &Path, sink: &mut Sink<'_>) {
    let Ok((entries, truncated)) = crate::diff::workspace_paths(ws, MAX_WORKSPACE_ENTRIES) else {
        return;
    };
    if truncated {
        sink.at(
            (1, 1),
            Severity::Note,
            "workspace-truncated",
            format!(
                "the workspace has more than {MAX_WORKSPACE_ENTRIES} entries: rules were not compared with the real tree"
            ),
            "pass a smaller directory to --workspace",
        );
        return;
    }
    let src = sink.src;
    for g in globs(policy, sink) {
        let known = sink
            .out
            .iter()
            .any(|f| f.code == "no-match" && (f.line, f.col) == g.pos);
        let Some(one) = super::shadow::one_glob(policy, src, g.at.0, g.at.1) else {
            continue;
        };
        if known {
            continue;
        }
        let alone = only(policy, vec![one.clone()]);
        let hit = entries.iter().any(|(p, _)| {
            !p.is_root() && alone.decide(OpClass::Read, p, EntryKind::File).rule == one.id
        });
        // A deny at any depth (`**/node_modules`) guards against what may appear later.
        let guard = g.rule.effect == Effect::Deny && normal_form(g.text).0.starts_with("**");
        if !hit {
            sink.at(
                g.pos,
                if guard {
                    Severity::Note
                } else {
                    Severity::Warning
                },
                "workspace-no-match",
                format!(
                    "glob `{}` of rule `{}` matches nothing in the workspace {}",
                    g.text,
                    g.rule.id,
                    ws.display()
                ),
                "check the spelling and the case against the tree; paths are relative to the workspace root",
            );
        }
    }
}
