//! `policy explain`'s text: the decision, each step's evaluation rule by rule, the rules
//! not reached, and the content rules in order.

use std::io::Write;

use super::Explained;
use crate::cli::columns::shown_len;
use crate::full_decision::effect_name;
use crate::{Access, DEFAULT_DENY, Effect, EntryKind, TraceStep};
use fsgate_base::text::Esc;

impl Explained<'_> {
    pub(super) fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        print_explain(out, self)?;
        if let Some(note) = &self.content_note {
            writeln!(out, "\ncontent: {}", Esc(note))?;
        }
        let final_d = &self.final_d;
        if !self.content_trace.is_empty() {
            writeln!(out, "\ncontent rules, in order (first finding decides):")?;
            let width = self
                .content_trace
                .iter()
                .map(|t| shown_len(&t.rule))
                .max()
                .unwrap_or(0);
            for t in &self.content_trace {
                let mark = if t.hit && t.rule == final_d.rule {
                    "  <= decides"
                } else {
                    ""
                };
                writeln!(out, "  {:width$}  {}{mark}", Esc(&t.rule), Esc(&t.note))?;
            }
        }
        writeln!(
            out,
            "\ndecision: {} by {} ({})",
            effect_name(final_d.effect).to_uppercase(),
            Esc(&final_d.rule),
            Esc(&final_d.reason)
        )
    }
}

fn print_explain(out: &mut dyn Write, x: &Explained<'_>) -> std::io::Result<()> {
    let shown = if x.rel.is_root() { "/" } else { x.rel.as_str() };
    let size = x
        .facts
        .size
        .map(|s| format!(", {s} bytes"))
        .unwrap_or_default();
    writeln!(
        out,
        "{} {} ({}{size}) under {} (sha256 {}):",
        x.op.as_str(),
        Esc(shown),
        if x.facts.kind == EntryKind::Dir {
            "directory"
        } else {
            "file"
        },
        Esc(x.policy.origin()),
        x.policy.sha256().get(..12).unwrap_or("")
    )?;
    let d = &x.final_d;
    writeln!(
        out,
        "  {} by {}: {}",
        effect_name(d.effect).to_uppercase(),
        Esc(&d.rule),
        Esc(&d.reason)
    )?;
    if d.effect == Effect::Ask {
        writeln!(
            out,
            "  (a person is asked when the request comes; no answer within {} s means deny)",
            x.policy.ask_timeout().as_secs()
        )?;
    }
    let decider = x.path_decision.rule;
    let composite = x.steps.len() > 1 || x.op != Access::Class(x.op.primary());
    for (step, trace) in &x.steps {
        if composite {
            let p = if step.path.is_root() {
                "/"
            } else {
                step.path.as_str()
            };
            writeln!(
                out,
                "\nstep: {} on {} ({}{}):",
                step.class.as_str(),
                Esc(p),
                step.why,
                if step.dir { ", as a directory" } else { "" }
            )?;
        }
        print_trace(out, trace, decider, d.rule == decider)?;
    }
    if decider != DEFAULT_DENY && !x.not_reached.is_empty() {
        writeln!(
            out,
            "\nalso matching, but not reached (an earlier rule decided):"
        )?;
        for r in &x.not_reached {
            writeln!(out, "       {}", Esc(r))?;
        }
    }
    Ok(())
}

/// One evaluation, rule by rule.
fn print_trace(
    out: &mut dyn Write,
    trace: &[TraceStep],
    decider: &str,
    path_decides: bool,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nevaluation order (secret names, then deny rules, then ask rules, then allow rules; the first match decides):"
    )?;
    let width = trace.iter().map(|t| shown_len(&t.rule)).max().unwrap_or(0);
    for (i, t) in trace.iter().enumerate() {
        let matched = if t.matched { "MATCH" } else { "-" };
        let mark = match (t.matched && t.rule == decider, path_decides) {
            (true, true) => "  <= decides",
            (true, false) => "  <= decides the path; the content rules below refuse",
            _ => "",
        };
        writeln!(
            out,
            "  {:>3}  {:width$}  {:5}  {:5}  {}{mark}",
            i + 1,
            Esc(&t.rule),
            effect_name(t.effect),
            matched,
            Esc(&t.note)
        )?;
    }
    Ok(())
}
