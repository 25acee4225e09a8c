//! The period the logs cover and the sessions they record.

use std::fmt::Write as _;

use super::cells::{opt, span, ts_html};
use super::contents::Report;
use crate::digest::Digest;
use crate::digest::items::Counts;
use crate::rows::{MAX_ROWS, esc};

pub(super) fn period_section(o: &mut String, r: &Report) {
    let d = &r.digest;
    let first = d.first_ts.as_deref().unwrap_or_default();
    let last = d.last_ts.as_deref().unwrap_or_default();
    let requests: u64 = d.timeline.values().map(Counts::total).sum();
    let _ = write!(
        o,
        "<section id=\"period\"><h2>Period</h2>\n<table class=\"kv\">\n\
         <tr><th>first record</th><td>{}</td></tr>\n<tr><th>last record</th><td>{}</td></tr>\n\
         <tr><th>span</th><td>{}</td></tr>\n\
         <tr><th>records</th><td>{} ({requests} requests){}</td></tr>\n\
         <tr><th>starts / stops</th><td>{} / {}</td></tr>\n",
        opt(d.first_ts.as_deref()),
        opt(d.last_ts.as_deref()),
        span(first, last),
        d.records,
        if d.skipped > 0 {
            format!(", and {} lines that are not records", d.skipped)
        } else {
            String::new()
        },
        d.starts,
        d.stops,
    );
    for (i, s) in r.verify.series.iter().enumerate() {
        let _ = writeln!(
            o,
            "<tr><th>log {}</th><td><code>{}</code></td></tr>",
            i + 1,
            esc(&s.log)
        );
    }
    o.push_str("</table></section>\n");
}

pub(super) fn sessions_section(o: &mut String, d: &Digest) {
    let _ = writeln!(
        o,
        "<section id=\"sessions\"><h2>Sessions ({})</h2>",
        d.sessions.len() as u64 + d.sessions_omitted
    );
    if d.sessions.is_empty() {
        o.push_str("<p>No agent session made a request.</p></section>\n");
        return;
    }
    o.push_str(
        "<table><thead><tr><th>session</th><th>via</th><th>peer</th><th>first</th><th>last</th>\
         <th class=\"n\">requests</th><th class=\"n\">refused</th><th class=\"n\">failed</th>\
         <th class=\"n\">changes</th></tr></thead><tbody>\n",
    );
    for (id, s) in &d.sessions {
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(id),
            esc(&s.transport),
            esc(&s.peer),
            ts_html(&s.first_ts),
            ts_html(&s.last_ts),
            s.counts.total(),
            if s.counts.refused > 0 { " hot" } else { "" },
            s.counts.refused,
            s.counts.failed,
            s.changes
        );
    }
    o.push_str("</tbody></table>\n");
    if d.sessions_omitted > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} requests of further sessions are not listed (at most {} sessions are).</p>",
            d.sessions_omitted, MAX_ROWS
        );
    }
    o.push_str("</section>\n");
}
