//! Refusals by rule.

use std::fmt::Write as _;

use super::cells::ts_html;
use crate::digest::Digest;
use crate::rows::esc;

pub(super) fn refusals_section(o: &mut String, d: &Digest) {
    let total: u64 = d.refusals.values().map(|r| r.count).sum::<u64>() + d.refusals_omitted;
    let _ = writeln!(
        o,
        "<section id=\"refusals\"><h2>Refusals by rule ({total})</h2>"
    );
    if d.refusals.is_empty() {
        o.push_str("<p>Nothing was refused.</p></section>\n");
        return;
    }
    o.push_str(
        "<table><thead><tr><th>rule</th><th class=\"n\">count</th><th>operations</th>\
         <th>paths (first few)</th><th>reason (first)</th><th>first</th><th>last</th></tr></thead><tbody>\n",
    );
    let mut rules: Vec<_> = d.refusals.iter().collect();
    rules.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    for (rule, r) in rules {
        let ops: Vec<String> = r
            .ops
            .iter()
            .map(|(op, n)| format!("{}&nbsp;\u{d7}{n}", esc(op)))
            .collect();
        let paths: Vec<String> = r
            .paths
            .iter()
            .map(|p| format!("<code>{}</code>", esc(p)))
            .collect();
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td class=\"n hot\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td></tr>",
            esc(rule),
            r.count,
            ops.join(", "),
            paths.join("<br>"),
            esc(&r.reason),
            ts_html(&r.first_ts),
            ts_html(&r.last_ts)
        );
    }
    o.push_str("</tbody></table>\n");
    if d.refusals_omitted > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} refusals by further rules are counted above but not listed.</p>",
            d.refusals_omitted
        );
    }
    o.push_str("</section>\n");
}
