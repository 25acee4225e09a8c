//! `audit verify` and `audit report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::exit::{fail, output_failed};
use crate::keys;
use crate::verify::{VerifyOptions, verify_paths};

pub(super) fn verify_cmd(
    paths: &[PathBuf],
    json: bool,
    trusted: Option<PathBuf>,
    pubkey: Option<&str>,
    checkpoints: Vec<PathBuf>,
    out: &mut dyn Write,
) -> i32 {
    let pinned = match pubkey.map(keys::parse_public_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail("verify", &e.to_string()),
    };
    let opts = VerifyOptions {
        pinned,
        checkpoints,
        trusted,
    };
    let report = verify_paths(paths, &opts);
    let printed = if json {
        serde_json::to_string_pretty(&report)
            .map_err(std::io::Error::other)
            .and_then(|s| writeln!(out, "{s}"))
    } else {
        write!(out, "{}", report.render())
    };
    match printed {
        Ok(()) => report.exit_code(),
        Err(e) => output_failed("verify", &e),
    }
}

pub(super) fn report_cmd(
    paths: &[PathBuf],
    html: &Path,
    pubkey: Option<&str>,
    out: &mut dyn Write,
) -> i32 {
    let pinned = match pubkey.map(keys::parse_public_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail("report", &e.to_string()),
    };
    let opts = VerifyOptions {
        pinned,
        ..Default::default()
    };
    let report = crate::html::collect(paths, &opts);
    let page = crate::html::render(&report, &crate::canonical::now_ts());
    let written = if html == Path::new("-") {
        out.write_all(page.as_bytes())
    } else {
        std::fs::write(html, page.as_bytes())
    };
    match written {
        Err(e) if html == Path::new("-") => return output_failed("report", &e),
        Err(e) => return fail("report", &format!("{}: {e}", html.display())),
        Ok(()) => {}
    }
    fsgate_base::text::eprint_line(&format!(
        "fsgate audit report: wrote {}: {}",
        if html == Path::new("-") {
            "standard output".into()
        } else {
            html.display().to_string()
        },
        report.verify.summary_line()
    ));
    report.verify.exit_code()
}
