//! What was read: per file, per session, and the secrets refused.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cells::{omitted_note, ts_html};
use super::contents::Report;
use crate::reads::{ReadCounts, SecretRefusal};
use crate::rows::esc;

pub(super) fn reads_section(o: &mut String, r: &Report) {
    let reads = &r.digest.reads;
    let total: u64 = reads.by_file.values().map(|c| c.count).sum::<u64>() + reads.files_omitted;
    let _ = write!(
        o,
        "<section id=\"reads\"><h2>What was read ({total} read{} of {} file{})</h2>\n\
         <p class=\"note\">Every file whose content an agent was given (<code>read_text_file</code>, \
         <code>read_file</code>; a window counts as a read), how often, how many bytes and when; \
         then the same per session. Requests refused because the path or its content is a secret \
         (a lookup, a read, a write: whatever the operation) are listed apart.</p>\n",
        if total == 1 { "" } else { "s" },
        reads.by_file.len().to_string() + if reads.files_omitted > 0 { "+" } else { "" },
        if reads.by_file.len() == 1 { "" } else { "s" },
    );
    if reads.by_file.is_empty() {
        o.push_str("<p>No file was read.</p>\n");
    } else {
        read_table(o, "file", &reads.by_file);
        omitted_note(o, reads.files_omitted, "reads of further files");
        read_table(o, "session", &reads.by_session);
        omitted_note(o, reads.sessions_omitted, "reads of further sessions");
    }
    secrets_table(o, &reads.secrets, r.verify.series.len() > 1);
    omitted_note(o, reads.secrets_omitted, "further refused secret reads");
    o.push_str("</section>\n");
}

/// Read counts by `what` (file or session), one row each.
pub(super) fn read_table(o: &mut String, what: &str, rows: &BTreeMap<String, ReadCounts>) {
    let _ = write!(
        o,
        "<h3>By {what}</h3>\n<table class=\"reads\"><thead><tr><th>{what}</th><th class=\"n\">reads</th>\
         <th class=\"n\">bytes</th><th>first</th><th>last</th></tr></thead><tbody>\n"
    );
    for (key, c) in rows {
        let (class, mark) = if c.unverified > 0 {
            (" class=\"unverified\"", "\u{26a0}&nbsp;")
        } else {
            ("", "")
        };
        let _ = writeln!(
            o,
            "<tr{class}><td>{mark}<code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"t\">{}</td><td class=\"t\">{}</td></tr>",
            esc(key),
            c.count,
            c.bytes,
            ts_html(&c.first_ts),
            ts_html(&c.last_ts)
        );
    }
    o.push_str("</tbody></table>\n");
}

pub(super) fn secrets_table(o: &mut String, secrets: &[SecretRefusal], several: bool) {
    let _ = writeln!(
        o,
        "<h3 id=\"secrets\">Secrets refused ({})</h3>",
        secrets.len()
    );
    if secrets.is_empty() {
        o.push_str("<p>No request for a secret was refused.</p>\n");
        return;
    }
    o.push_str(
        "<table class=\"secrets\"><thead><tr><th>seq</th><th>time</th><th>session</th><th>operation</th>\
         <th>path</th><th>rule</th></tr></thead><tbody>\n",
    );
    for s in secrets {
        let seq = if several {
            format!("{}:{}", s.log + 1, s.seq)
        } else {
            s.seq.to_string()
        };
        let (class, mark) = if s.verified {
            ("", "")
        } else {
            (" class=\"unverified\"", "\u{26a0}&nbsp;")
        };
        let _ = writeln!(
            o,
            "<tr{class}><td>{mark}{seq}</td><td class=\"t\">{}</td><td><code>{}</code></td><td>{}</td>\
             <td><code>{}</code></td><td class=\"hot\"><code>{}</code></td></tr>",
            ts_html(&s.ts),
            esc(&s.session),
            esc(&s.op),
            esc(&s.path),
            esc(&s.rule)
        );
    }
    o.push_str("</tbody></table>\n");
}
