//! `fsgate audit report --html`: one self-contained HTML page a reviewer can hand on.
//! The verdict of verification comes first, then the period, sessions, what was read
//! (per file, per session, and the secrets refused), a timeline, refusals by rule, every
//! change per file and the policies in force.
//!
//! The page loads nothing: no script, no external style, font or image; its one inline
//! style sheet is allowed by hash in a Content-Security-Policy that refuses everything
//! else. Whatever a record holds is text an agent may have chosen: it is escaped for
//! people first (controls, bidi and invisible characters shown as `\u{..}`, see
//! [`fsgate_base::text`]), then for HTML.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use base64::Engine as _;
use fsgate_base::sha256::Sha256;
use serde_json::Value;

use super::digest::{self, Change, Counts, Digest};
use super::reads::{ReadCounts, SecretRefusal};
use super::report::{FailureKind, SeriesReport, Verdict, VerifyReport};
use super::rows::{MAX_ROWS, esc};
use super::series;
use super::verify::{VerifyOptions, verify_series};

/// What a report is made of.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// The verdict of verification, per log.
    pub verify: VerifyReport,
    /// What the records say.
    pub digest: Digest,
    /// The paths the report was asked for.
    pub inputs: Vec<PathBuf>,
}

/// Verifies the logs in `paths` and reads their records.
pub(crate) fn collect(paths: &[PathBuf], opts: &VerifyOptions) -> Report {
    let mut digest = Digest::new();
    let all = match series::discover(paths) {
        Ok(s) => s,
        Err(e) => {
            let verify = VerifyReport {
                verdict: Verdict::Unreadable,
                series: Vec::new(),
                error: Some(e),
            };
            let inputs = paths.to_vec();
            return Report {
                verify,
                digest,
                inputs,
            };
        }
    };
    let mut reports = Vec::new();
    for (i, s) in all.iter().enumerate() {
        let rep = verify_series(s, opts);
        let mut n = 0u64;
        for file in &s.files {
            // An unreadable file is what the verdict already reports.
            let Ok(bytes) = std::fs::read(file) else {
                continue;
            };
            for (_, line) in crate::line::lines(&bytes) {
                let verified = rep.verdict == Verdict::Intact || n < rep.records;
                n += 1;
                match serde_json::from_slice::<Value>(line) {
                    Ok(v @ Value::Object(_)) => digest.observe(i, &v, verified),
                    _ => digest.skipped += 1,
                }
            }
        }
        reports.push(rep);
    }
    let verdict = reports.iter().map(|s| s.verdict).max();
    let verify = VerifyReport {
        verdict: verdict.unwrap_or(Verdict::Unreadable),
        series: reports,
        error: None,
    };
    Report {
        verify,
        digest,
        inputs: paths.to_vec(),
    }
}

const CSS: &str = include_str!("report.css");

/// The Content-Security-Policy: nothing but the page's own style sheet.
fn csp() -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'none'; font-src 'none'; \
         connect-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'"
    )
}

/// The whole page; `generated` is the time to print as the report's date.
pub(crate) fn render(r: &Report, generated: &str) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let word = verdict_word(r.verify.verdict);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>fsgate audit report: {word}</title>\n<style>{CSS}</style></head>\n<body>\n\
         <header><h1>fsgate audit report</h1><p class=\"sub\">generated {} by fsgate {}</p></header>\n",
        csp(),
        esc(generated),
        env!("CARGO_PKG_VERSION"),
    );
    verdict_section(&mut o, &r.verify);
    period_section(&mut o, r);
    sessions_section(&mut o, &r.digest);
    reads_section(&mut o, r);
    super::procs::section(&mut o, &r.digest.procs);
    timeline_section(&mut o, &r.digest);
    refusals_section(&mut o, &r.digest);
    undo_section(&mut o, &r.digest);
    changes_section(&mut o, r);
    policies_section(&mut o, r);
    footer(&mut o, r);
    o.push_str("</body></html>\n");
    o
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Intact => "INTACT",
        Verdict::Tampered => "TAMPERED",
        Verdict::Unreadable => "UNREADABLE",
    }
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Intact => "intact",
        Verdict::Tampered => "tampered",
        Verdict::Unreadable => "unreadable",
    }
}

/// What a failure kind means, for a reader who has not read FORMAT.md.
fn failure_meaning(k: FailureKind) -> &'static str {
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

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| esc(&v.to_string()))
}

fn verdict_section(o: &mut String, v: &VerifyReport) {
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

fn series_block(o: &mut String, s: &SeriesReport) {
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

/// "3 h 5 min" between two timestamps.
fn span(first: &str, last: &str) -> String {
    let (Some(a), Some(b)) = (
        super::canonical::parse_ts(first),
        super::canonical::parse_ts(last),
    ) else {
        return "-".into();
    };
    let s = (b - a).whole_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

fn period_section(o: &mut String, r: &Report) {
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

fn sessions_section(o: &mut String, d: &Digest) {
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

fn reads_section(o: &mut String, r: &Report) {
    let reads = &r.digest.reads;
    let total: u64 = reads.by_file.values().map(|c| c.count).sum::<u64>() + reads.files_omitted;
    let _ = write!(
        o,
        "<section id=\"reads\"><h2>What was read ({total} read{} of {} file{})</h2>\n\
         <p class=\"note\">Every file whose content an agent was given (<code>read_text_file</code>, \
         <code>read_file</code>; a window counts as a read), how often, how many bytes and when; \
         then the same per session. Reads refused because the file is a secret are listed apart.</p>\n",
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
fn read_table(o: &mut String, what: &str, rows: &BTreeMap<String, ReadCounts>) {
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

fn secrets_table(o: &mut String, secrets: &[SecretRefusal], several: bool) {
    let _ = writeln!(
        o,
        "<h3 id=\"secrets\">Secrets refused ({})</h3>",
        secrets.len()
    );
    if secrets.is_empty() {
        o.push_str("<p>No read of a secret was asked for.</p>\n");
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

fn omitted_note(o: &mut String, n: u64, what: &str) {
    if n > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{n} {what} are counted but not listed (at most {} rows are).</p>",
            MAX_ROWS
        );
    }
}

/// The bucket width to draw: the narrowest on the ladder giving at most `max` bars.
fn draw_width(d: &Digest, max: i64) -> i64 {
    let (Some(&a), Some(&b)) = (d.timeline.keys().next(), d.timeline.keys().next_back()) else {
        return d.bucket;
    };
    digest::BUCKET_LADDER
        .iter()
        .copied()
        .filter(|&w| w >= d.bucket)
        .find(|&w| b.div_euclid(w) - a.div_euclid(w) < max)
        .unwrap_or(
            d.bucket
                .max(digest::BUCKET_LADDER[digest::BUCKET_LADDER.len() - 1]),
        )
}

fn bucket_label(t: i64, width: i64) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(t) else {
        return t.to_string();
    };
    let (date, hm) = (t.date(), (t.hour(), t.minute()));
    let name = match width {
        ..60 => return format!("{date} {:02}:{:02}:{:02} UTC", hm.0, hm.1, t.second()),
        60..3600 => "min",
        3600..86400 => "h",
        86400 => "day",
        _ => "week",
    };
    format!("{date} {:02}:{:02} UTC ({name})", hm.0, hm.1)
}

fn timeline_section(o: &mut String, d: &Digest) {
    o.push_str("<section id=\"timeline\"><h2>Timeline of requests</h2>\n");
    let width = draw_width(d, 120);
    let buckets = digest::rebucket(&d.timeline, width);
    let (Some(&a), Some(&b)) = (buckets.keys().next(), buckets.keys().next_back()) else {
        o.push_str("<p>No requests.</p></section>\n");
        return;
    };
    let n = (b - a) / width + 1;
    let max = buckets
        .values()
        .map(Counts::total)
        .max()
        .unwrap_or(1)
        .max(1);
    let (w, h, top, base) = (960.0_f64, 190.0_f64, 12.0_f64, 160.0_f64);
    // At least 24 slots, so that a short log does not draw one wall-wide bar.
    let slots = n.max(24);
    let bar = (w - 60.0) / slots as f64;
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-label=\"requests per {}\" class=\"chart\">\n\
         <line class=\"axis\" x1=\"50\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\n\
         <text x=\"44\" y=\"{}\" class=\"lbl\" text-anchor=\"end\">{max}</text>\n\
         <text x=\"44\" y=\"{base}\" class=\"lbl\" text-anchor=\"end\">0</text>\n",
        bucket_label(a, width),
        w - 10.0,
        top + 10.0
    );
    for (t, c) in &buckets {
        let x = 50.0 + ((t - a) / width) as f64 * bar;
        let _ = write!(
            o,
            "<g><title>{}: {} allowed, {} refused, {} failed</title>",
            bucket_label(*t, width),
            c.ok,
            c.refused,
            c.failed
        );
        let mut y = base;
        for (count, class) in [
            (c.ok, "b-ok"),
            (c.failed, "b-failed"),
            (c.refused, "b-refused"),
        ] {
            let bh = (base - top) * count as f64 / max as f64;
            if bh > 0.0 {
                y -= bh;
                let _ = write!(
                    o,
                    "<rect class=\"{class}\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{bh:.2}\"/>",
                    (bar * 0.85).max(0.5)
                );
            }
        }
        o.push_str("</g>\n");
    }
    let _ = write!(
        o,
        "<text x=\"50\" y=\"180\" class=\"lbl\">{}</text>\n\
         <text x=\"{}\" y=\"180\" class=\"lbl\" text-anchor=\"end\">{}</text>\n</svg>\n\
         <p class=\"legend\"><span class=\"k b-ok\"></span> allowed <span class=\"k b-failed\"></span> failed \
         <span class=\"k b-refused\"></span> refused, per {}</p></section>\n",
        bucket_label(a, width),
        w - 10.0,
        bucket_label(a + (slots - 1) * width, width),
        match width {
            ..60 => format!("{width} s"),
            60..3600 => format!("{} min", width / 60),
            3600..86400 => format!("{} h", width / 3600),
            86400 => "day".into(),
            _ => "week".into(),
        }
    );
}

fn refusals_section(o: &mut String, d: &Digest) {
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

/// The runs of `fsgate undo`, if any: what each put back, and what it left.
fn undo_section(o: &mut String, d: &Digest) {
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

fn changes_section(o: &mut String, r: &Report) {
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

fn change_row(o: &mut String, c: &Change, several: bool) {
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

/// A timestamp that may break between its date and its time.
fn ts_html(s: &str) -> String {
    esc(s).replacen('T', "T<wbr>", 1)
}

fn dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { esc(s) }
}

fn policies_section(o: &mut String, r: &Report) {
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

fn footer(o: &mut String, r: &Report) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_people_then_for_html() {
        assert_eq!(
            esc("<a href='x'>\"&\u{1b}[2J\n\u{202e}"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;\\u{1b}[2J\\n\\u{202e}"
        );
    }

    #[test]
    fn the_policy_allows_exactly_the_style_sheet() {
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(CSS));
        assert!(csp().starts_with(&format!("default-src 'none'; style-src 'sha256-{hash}';")));
        let page = render(&collect(&[], &VerifyOptions::default()), "now");
        assert!(page.contains(&format!("<style>{CSS}</style>")));
        assert!(page.contains("UNREADABLE"), "no log: unreadable");
    }
}
