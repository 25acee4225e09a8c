//! `audit show`: its filter and its format from the flags.

use std::io::Write;
use std::path::PathBuf;

use super::exit::fail;
use crate::prune;
use crate::show::{self, ShowFilter, ShowFormat};

/// How `audit show` prints: JSON lines, CSV or a table (`width` columns wide, the
/// terminal's by default), with statistics, following the log.
pub(super) fn show_options(
    (json, csv): (bool, bool),
    width: Option<usize>,
    stats: bool,
    follow: bool,
) -> show::ShowOptions {
    let format = match (json, csv) {
        (true, _) => ShowFormat::Json,
        (_, true) => ShowFormat::Csv,
        _ => ShowFormat::Table,
    };
    show::ShowOptions {
        format,
        width: width.unwrap_or_else(show::terminal_width),
        stats,
        follow,
    }
}

/// The filter of `audit show`, from its flags.
pub(super) fn show_filter(
    since: Option<String>,
    until: Option<String>,
    op: Option<String>,
    decision: Option<String>,
    path: Option<String>,
    session: Option<String>,
) -> Result<ShowFilter, String> {
    let date = |s: Option<String>| -> Result<_, String> {
        s.map(|s| prune::parse_date(&s).ok_or(format!("not a date: {s}")))
            .transpose()
    };
    let path = path
        .map(|g| {
            globset::GlobBuilder::new(&g)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| e.to_string())
        })
        .transpose()?;
    Ok(ShowFilter {
        since: date(since)?,
        until: date(until)?,
        op,
        decision,
        path,
        session,
        ..ShowFilter::default()
    })
}

pub(super) fn show_cmd(
    paths: &[PathBuf],
    filter: &ShowFilter,
    opts: &show::ShowOptions,
    out: &mut dyn Write,
) -> i32 {
    match show::show_with(paths, filter, opts, out, &|| true) {
        Ok(stats) => {
            if stats.skipped > 0 {
                eprintln!(
                    "fsgate audit show: skipped {} lines that are not records (run `fsgate audit verify`)",
                    stats.skipped
                );
            }
            0
        }
        // A reader that stopped early (`| head`) needs no message; the exit still says
        // the output was not all written.
        Err(e) if e.ends_with(show::READER_GONE) => 2,
        Err(e) => fail("show", &e.to_string()),
    }
}
