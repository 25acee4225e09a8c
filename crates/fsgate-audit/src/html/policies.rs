//! The policies in force, and the page's footer.

use std::fmt::Write as _;

use super::cells::ts_html;
use super::contents::Report;
use crate::rows::esc;

pub(super) fn policies_section(o: &mut String, r: &Report) {
    let d = &r.digest;
    o.push_str(
        "<section id=\"policies\"><h2>Policies in force</h2>\n<table><thead><tr><th>policy SHA-256</th>\
         <th>from</th><th>until</th><th class=\"n\">records</th></tr></thead><tbody>\n",
    );
    let several = r.verify.series.len() > 1;
    for p in &d.policies {
        let log = if several {
            format!("log {}, ", p.log + 1)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "<tr><td class=\"h\">{}</td><td>{log}seq {} {}</td><td>seq {} {}</td><td class=\"n\">{}</td></tr>",
            esc(&p.sha256),
            p.first_seq,
            esc(&p.first_ts),
            p.last_seq,
            esc(&p.last_ts),
            p.records
        );
    }
    o.push_str("</tbody></table>\n");
    if !d.policy_events.is_empty() {
        o.push_str(
            "<h3>Starts and reloads</h3><table><thead><tr><th>seq</th><th>time</th><th>event</th>\
             <th>policy</th><th>SHA-256</th><th>note</th></tr></thead><tbody>\n",
        );
        for e in &d.policy_events {
            let hashes = if e.old_sha256.is_empty() {
                esc(&e.new_sha256)
            } else {
                format!("{} \u{2192} {}", esc(&e.old_sha256), esc(&e.new_sha256))
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"h\">{hashes}</td><td>{}</td></tr>",
                e.seq,
                ts_html(&e.ts),
                esc(&e.kind),
                esc(&e.origin),
                esc(&e.note)
            );
        }
        o.push_str("</tbody></table>\n");
    }
    o.push_str("</section>\n");
}

pub(super) fn footer(o: &mut String, r: &Report) {
    let inputs: Vec<String> = r
        .inputs
        .iter()
        .map(|p| esc(&p.display().to_string()))
        .collect();
    let _ = writeln!(
        o,
        "<footer><p>To check this log yourself: <code>fsgate audit verify {}</code> \
         (the format is specified in fsgate's <code>audit/FORMAT.md</code>). \
         Everything a log holds is shown as text: characters that could hide or disguise \
         text are written as <code>\\u{{..}}</code>.</p></footer>",
        inputs.join(" ")
    );
}
