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
//!
//! This file gathers a report and lays out the page; each section is a file of its own
//! under `html/` (`verdict`, `overview`, `reads`, `timeline`, `refusals`, `changes`,
//! `policies`), with `contents` (what a report is made of) and `cells` (small pieces of
//! text the sections share).

use std::fmt::Write as _;
use std::path::PathBuf;

use base64::Engine as _;
use fsgate_base::sha256::Sha256;
use serde_json::Value;

mod cells;
mod changes;
mod contents;
mod overview;
mod policies;
mod reads;
mod refusals;
mod timeline;
mod verdict;

use super::digest::Digest;
use super::report::{Verdict, VerifyReport};
use super::rows::esc;
use super::series;
use super::verify::{VerifyOptions, verify_series};
use changes::{changes_section, undo_section};
use contents::Report;
use overview::{period_section, sessions_section};
use policies::{footer, policies_section};
use reads::reads_section;
use refusals::refusals_section;
use timeline::timeline_section;
use verdict::{verdict_section, verdict_word};

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
