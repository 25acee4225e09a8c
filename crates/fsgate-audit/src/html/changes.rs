//! Every change per file, and the runs of `fsgate undo` (what each put back, and what
//! it left).

use std::fmt::Write as _;

use super::cells::{dash, opt, ts_html};
use super::contents::Report;
use crate::digest::Digest;
use crate::digest::items::Change;
use crate::rows::esc;

/// The runs of `fsgate undo`, if any: what each put back, and what it left.
pub(super) fn undo_section(o: &mut String, d: &Digest) {
    if d.undos.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<section id=\"undo\"><h2>Undo ({})</h2>\n\
         <p class=\"note\">Each run of <code>fsgate undo</code>: the session whose changes it put back \
         (its own changes are listed under each file, marked <em>undo of</em>), and the files it left \
         because someone changed them since.</p>\n\
         <table><thead><tr><th>seq</th><th>time</th><th>undid</th><th class=\"n\">undone</th>\
         <th class=\"n\">already</th><th class=\"n\">left</th><th class=\"n\">failed</th><th>left or failed</th>\
         </tr></thead><tbody>\n",
        d.undos.len()
    );
    for u in &d.undos {
        let mut what = format!("undo of <code>{}</code>", esc(&u.undo));
        if !u.range.is_empty() {
            let _ = write!(what, " in {}", esc(&u.range));
        }
        if u.force {
            what.push_str(" (forced)");
        }
        let left: Vec<String> = u
            .left
            .iter()
            .map(|(p, why)| format!("<code>{}</code>: {}", esc(p), esc(why)))
            .collect();
        let [undone, already, skipped, failed] = u.counts;
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"t\">{}</td><td>{what}</td><td class=\"n\">{undone}</td>\
             <td class=\"n\">{already}</td><td class=\"n\">{skipped}</td><td class=\"n\">{failed}</td>\
             <td>{}</td></tr>",
            u.seq,
            ts_html(&u.ts),
            if left.is_empty() {
                "-".to_owned()
            } else {
                left.join("<br>")
            },
        );
    }
    o.push_str("</tbody></table></section>\n");
}

pub(super) fn changes_section(o: &mut String, r: &Report) {
    let d = &r.digest;
    let listed: usize = d.changes.values().map(Vec::len).sum();
    let _ = write!(
        o,
        "<section id=\"changes\"><h2>Changes by file ({} files)</h2>\n\
         <p class=\"note\">Each change with the SHA-256 of the content it wrote and of the content it \
         replaced, and the backup that holds the previous version \
         (<code>fsgate backup restore</code> brings it back).</p>\n",
        d.changes.len()
    );
    if d.changes.is_empty() {
        o.push_str("<p>No file was changed.</p></section>\n");
        return;
    }
    let several = r.verify.series.len() > 1;
    for (path, changes) in &d.changes {
        let _ = write!(
            o,
            "<h3 class=\"file\"><code>{}</code> <span class=\"count\">{} change(s)</span></h3>\n\
             <table class=\"changes\"><thead><tr><th>seq</th><th>time</th><th>session</th><th>operation</th>\
             <th>outcome</th><th class=\"n\">bytes</th><th>SHA-256 written</th><th>SHA-256 before</th>\
             <th>backup of the previous version</th></tr></thead><tbody>\n",
            esc(path),
            changes.len()
        );
        let mut sorted: Vec<&Change> = changes.iter().collect();
        sorted.sort_by(|a, b| (&a.ts, a.log, a.seq).cmp(&(&b.ts, b.log, b.seq)));
        for c in sorted {
            change_row(o, c, several);
        }
        o.push_str("</tbody></table>\n");
    }
    if d.changes_omitted > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} further changes are not listed (at most {listed} are); \
             <code>fsgate audit show --path GLOB</code> lists them.</p>",
            d.changes_omitted
        );
    }
    o.push_str("</section>\n");
}

pub(super) fn change_row(o: &mut String, c: &Change, several: bool) {
    let seq = if several {
        format!("{}:{}", c.log + 1, c.seq)
    } else {
        c.seq.to_string()
    };
    let mut op = esc(&c.op);
    if let Some((other, target)) = &c.other {
        let dir = if *target { "from" } else { "to" };
        let _ = write!(op, " {dir} <code>{}</code>", esc(other));
    }
    if !c.restored_from.is_empty() {
        let _ = write!(op, " from backup <code>{}</code>", esc(&c.restored_from));
    }
    if !c.undo.is_empty() {
        let _ = write!(op, " <em>(undo of <code>{}</code>)</em>", esc(&c.undo));
    }
    let mut backup = esc(&c.backup);
    if c.backup_count > 1 {
        let _ = write!(backup, " (+{} more)", c.backup_count - 1);
    }
    let outcome_class = if matches!(c.outcome.as_str(), "ok" | "applied") {
        ""
    } else {
        " class=\"hot\""
    };
    let _ = writeln!(
        o,
        "<tr{}><td>{}{seq}</td><td class=\"t\">{}</td><td><code>{}</code></td><td>{op}</td><td{outcome_class}>{}</td>\
         <td class=\"n\">{}</td><td class=\"h\">{}</td><td class=\"h\">{}</td><td class=\"h\">{backup}</td></tr>",
        if c.verified {
            ""
        } else {
            " class=\"unverified\""
        },
        if c.verified { "" } else { "\u{26a0}&nbsp;" },
        ts_html(&c.ts),
        esc(&c.session),
        esc(&c.outcome),
        opt(c.bytes),
        dash(&c.sha256),
        dash(&c.old_sha256),
    );
}
