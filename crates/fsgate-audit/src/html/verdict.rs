//! The verdict section: whether each log verified, and what failed where, in words a
//! reader who has not read FORMAT.md follows.

use std::fmt::Write as _;

use super::cells::{opt, ts_html};
use crate::report::{FailureKind, SeriesReport, Verdict, VerifyReport};
use crate::rows::esc;

pub(super) fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Intact => "INTACT",
        Verdict::Tampered => "TAMPERED",
        Verdict::Unreadable => "UNREADABLE",
    }
}

pub(super) fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Intact => "intact",
        Verdict::Tampered => "tampered",
        Verdict::Unreadable => "unreadable",
    }
}

/// What a failure kind means, for a reader who has not read FORMAT.md.
pub(super) fn failure_meaning(k: FailureKind) -> &'static str {
    match k {
        FailureKind::Malformed => "a line is not a well-formed record",
        FailureKind::Modified => {
            "a record's content does not match its hash, or does not chain on the record before it"
        }
        FailureKind::Missing => "records are missing",
        FailureKind::Reordered => "records are out of order",
        FailureKind::Truncated => "the log was cut short",
        FailureKind::Gap => "a file does not continue the one before it",
        FailureKind::Replaced => "the log differs from a checkpoint: it was rewritten",
        FailureKind::BadSignature => "a signature is missing, foreign or wrong",
        FailureKind::Unreadable => "a file could not be read",
    }
}

pub(super) fn verdict_section(o: &mut String, v: &VerifyReport) {
    let class = verdict_class(v.verdict);
    let _ = write!(
        o,
        "<section id=\"verdict\" class=\"verdict {class}\">\n<h2>Verification: <span class=\"word\">{}</span></h2>\n",
        verdict_word(v.verdict)
    );
    if let Some(e) = &v.error {
        let _ = writeln!(
            o,
            "<p>Nothing could be checked: <code>{}</code></p>",
            esc(e)
        );
    }
    let lead = match v.verdict {
        Verdict::Intact => "Every record chains on the one before it and matches its hash.",
        Verdict::Tampered => {
            "The log was changed after it was written. Records from the first bad one on are not vouched for: changes among them are marked \u{26a0} below."
        }
        Verdict::Unreadable => {
            "Part of the log could not be read: nothing can be concluded about it."
        }
    };
    if v.error.is_none() {
        let _ = writeln!(o, "<p class=\"lead\">{lead}</p>");
    }
    for s in &v.series {
        series_block(o, s);
    }
    o.push_str("</section>\n");
}

pub(super) fn series_block(o: &mut String, s: &SeriesReport) {
    let _ = write!(
        o,
        "<div class=\"series {}\"><h3>{} <code>{}</code></h3>\n<table class=\"kv\">\n",
        verdict_class(s.verdict),
        verdict_word(s.verdict),
        esc(&s.log)
    );
    if let Some(f) = &s.error {
        let _ = write!(
            o,
            "<tr class=\"bad\"><th>first bad record</th><td>seq {} in <code>{}</code>{}</td></tr>\n\
             <tr class=\"bad\"><th>what is wrong</th><td><b>{:?}</b>: {}<br><code>{}</code></td></tr>\n",
            opt(f.seq),
            opt(f.file.as_deref()),
            f.line.map(|l| format!(", line {l}")).unwrap_or_default(),
            f.kind,
            failure_meaning(f.kind),
            esc(&f.message)
        );
    }
    let label = if s.error.is_some() {
        "checked before it"
    } else {
        "checked"
    };
    let _ = write!(
        o,
        "<tr><th>{label}</th><td>{} records in {} file(s), seq {}..{}, {} .. {}</td></tr>\n\
         <tr><th>log id</th><td><code>{}</code></td></tr>\n",
        s.records,
        s.files.len(),
        opt(s.first_seq),
        opt(s.last_seq),
        opt(s.first_ts.as_deref()),
        opt(s.last_ts.as_deref()),
        opt(s.log_id.as_deref())
    );
    match &s.checkpoint {
        Some(c) => {
            let _ = writeln!(
                o,
                "<tr><th>checkpoint</th><td>seq {} ({}, {}), signature {}</td></tr>",
                c.seq,
                esc(&c.kind),
                ts_html(&c.ts),
                esc(&c.signature)
            );
        }
        None => o.push_str("<tr><th>checkpoint</th><td>none</td></tr>\n"),
    }
    for w in &s.warnings {
        let _ = writeln!(
            o,
            "<tr class=\"warn\"><th>warning</th><td>{}</td></tr>",
            esc(w)
        );
    }
    for i in &s.open_intents {
        let _ = writeln!(
            o,
            "<tr class=\"warn\"><th>open intent</th><td>seq {}: a change with no recorded outcome{}</td></tr>",
            i.seq,
            i.passed_start
                .map(|p| format!(", not reconciled by the start at seq {p}"))
                .unwrap_or_default()
        );
    }
    o.push_str("</table></div>\n");
}
