//! `policy explain`: which rule decides an operation on a path, every rule considered,
//! the rules an earlier one shadows, and the content rules run on a given file.

mod print;

use std::io::Write;
use std::path::Path;

use super::exit::{EXIT_INVALID, EXIT_OK, Res};
use super::load::load;
use crate::content::ContentTraceStep;
use crate::full_decision::{FullDecision, decide_access_with_content};
use crate::lint::only;
use crate::{Access, Decision, Effect, EntryKind, PathFacts, Policy, TraceStep};
use fsgate_base::path::RelPath;
use fsgate_base::text::{Esc, EscPath};
use fsgate_decide::AccessStep;

#[allow(clippy::too_many_arguments)]
pub(super) fn explain(
    file: &Path,
    op: &str,
    (path, workspace): (&str, Option<&str>),
    facts: PathFacts,
    content: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Res {
    let Some((policy, _)) = load(file, err)? else {
        return Ok(EXIT_INVALID);
    };
    let policy = match workspace {
        Some(name) => policy.for_workspace(name),
        None => policy,
    };
    let Some(op) = Access::parse(op) else {
        writeln!(err, "fsgate policy explain: unknown op `{}`", Esc(op))?;
        return Ok(EXIT_INVALID);
    };
    let rel = match RelPath::parse_rooted(path) {
        Ok(p) => p,
        Err(e) => {
            writeln!(
                err,
                "fsgate policy explain: path `{}`: {}",
                Esc(path),
                Esc(&e.to_string())
            )?;
            return Ok(EXIT_INVALID);
        }
    };
    let bytes = match content.map(std::fs::read) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            writeln!(
                err,
                "fsgate policy explain: cannot read {}: {}",
                EscPath(content.unwrap_or(Path::new(""))),
                Esc(&e.to_string())
            )?;
            return Ok(EXIT_INVALID);
        }
    };
    let x = Explained::new(&policy, op, &rel, facts, bytes.as_deref());
    if json {
        writeln!(out, "{:#}", x.json(file))?;
        return Ok(EXIT_OK);
    }
    x.print(out)?;
    Ok(EXIT_OK)
}

/// Everything `explain` shows about one operation on one path.
struct Explained<'p> {
    policy: &'p Policy,
    op: Access,
    rel: &'p RelPath,
    facts: PathFacts,
    path_decision: Decision<'p>,
    steps: Vec<(AccessStep, Vec<TraceStep>)>,
    not_reached: Vec<&'p str>,
    final_d: FullDecision,
    content_note: Option<String>,
    content_trace: Vec<ContentTraceStep>,
}

impl<'p> Explained<'p> {
    fn new(
        policy: &'p Policy,
        op: Access,
        rel: &'p RelPath,
        facts: PathFacts,
        bytes: Option<&[u8]>,
    ) -> Self {
        let (d, steps) = policy.explain_access(op, rel, &facts);
        let not_reached = steps
            .iter()
            .rev()
            .find(|(s, _)| !d.allowed() || s.class == op.primary())
            .map(|(s, trace)| not_reached(policy, s, &facts, trace))
            .unwrap_or_default();
        let final_d = decide_access_with_content(policy, op, rel, &facts, bytes);
        let class = op.primary();
        let (content_note, content_trace) = match (bytes, policy.content_scanner()) {
            (None, _) => (None, Vec::new()),
            (Some(_), None) => (
                Some("the policy has no [content] section: content is not scanned".into()),
                Vec::new(),
            ),
            (Some(_), Some(sc)) if !sc.applies_to(class) => (
                Some(format!(
                    "content is not scanned for {} operations",
                    class.as_str()
                )),
                Vec::new(),
            ),
            (Some(_), Some(_)) if d.effect == Effect::Deny => (
                Some("content is not scanned: the path decision already denies".into()),
                Vec::new(),
            ),
            (Some(b), Some(sc)) => (None, sc.explain(rel, b)),
        };
        Explained {
            policy,
            op,
            rel,
            facts,
            path_decision: d,
            steps,
            not_reached,
            final_d,
            content_note,
            content_trace,
        }
    }

    fn json(&self, file: &Path) -> serde_json::Value {
        let d = &self.path_decision;
        let steps: Vec<_> = self
            .steps
            .iter()
            .map(|(s, trace)| {
                serde_json::json!({
                    "class": s.class, "path": s.path.as_str(), "dir": s.dir,
                    "why": s.why, "trace": trace,
                })
            })
            .collect();
        let trace = self
            .steps
            .last()
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
        serde_json::json!({
            "policy": file.display().to_string(),
            "op": self.op.as_str(),
            "path": self.rel.as_str(),
            "dir": self.facts.kind == EntryKind::Dir,
            "size": self.facts.size,
            "decision": self.final_d,
            "path_decision": { "effect": d.effect, "rule": d.rule, "reason": d.reason },
            "steps": steps,
            "trace": trace,
            "also_matching_not_reached": self.not_reached,
            "content_note": self.content_note,
            "content_trace": self.content_trace,
        })
    }
}

/// Rules the evaluation of `step` never reached that would also match: shadowed
/// alternatives.
fn not_reached<'p>(
    policy: &'p Policy,
    step: &AccessStep,
    facts: &PathFacts,
    trace: &[TraceStep],
) -> Vec<&'p str> {
    let facts = if step.dir {
        PathFacts::kind(EntryKind::Dir)
    } else {
        *facts
    };
    let reached: Vec<&str> = trace.iter().map(|t| t.rule.as_str()).collect();
    policy
        .rules()
        .iter()
        .filter(|r| !reached.contains(&r.id.as_str()))
        .filter(|r| {
            only(policy, vec![(*r).clone()])
                .decide_with(step.class, &step.path, &facts)
                .rule
                == r.id
        })
        .map(|r| r.id.as_str())
        .collect()
}
