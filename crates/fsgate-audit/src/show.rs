//! `fsgate audit show`: filter records and print them as a table, JSON lines or CSV.
//! Show reads; it does not verify (use `fsgate audit verify` for that).

mod cells;
mod lines;
mod merge;
mod select;
mod stats;
mod table;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::series;
use cells::{clean, csv_cell};
use lines::{LineReader, Next};
use select::{OnRecord, open, record_of};
pub(crate) use select::{ShowFilter, ShowStats};
pub(crate) use stats::Stats;
use table::{Row, Widths};

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ShowFormat {
    /// Aligned columns for a terminal (controls, bidi and invisible characters escaped).
    #[default]
    Table,
    /// The matching lines, unchanged (so they still verify).
    Json,
    /// RFC 4180 CSV with a header row; cells escaped as in the table, and those that a
    /// spreadsheet would run as a formula prefixed with `'`.
    Csv,
}

const CSV_COLUMNS: &[&str] = &[
    "seq",
    "ts",
    "kind",
    "session",
    "transport",
    "peer",
    "op",
    "path",
    "path2",
    "args",
    "decision",
    "rule",
    "reason",
    "outcome",
    "bytes",
    "sha256",
    "backup",
    "policy_sha256",
    "duration_us",
    "details",
    "hash",
];

/// How `show` runs beyond the format.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShowOptions {
    /// Table, JSON lines or CSV.
    pub format: ShowFormat,
    /// Terminal columns the table must fit (0: no limit).
    pub width: usize,
    /// Print counts instead of records (a table, or JSON with [`ShowFormat::Json`]).
    pub stats: bool,
    /// After the records so far, keep printing new ones as they are appended.
    pub follow: bool,
}

/// Prints the matching records (or their counts) of the logs in `paths`; with
/// `opts.follow`, goes on following the last log's active file while `keep_going()`.
pub(crate) fn show_with(
    paths: &[PathBuf],
    filter: &ShowFilter,
    opts: &ShowOptions,
    out: &mut dyn Write,
    keep_going: &dyn Fn() -> bool,
) -> Result<ShowStats, String> {
    let all = series::discover(paths)?;
    let files: Vec<&Path> = all
        .iter()
        .flat_map(|s| s.files.iter().map(|f| f.as_path()))
        .collect();
    let mut seen = ShowStats::default();
    if opts.stats {
        print_stats(&files, filter, opts.format, out, &mut seen)?;
        return Ok(seen);
    }
    // The last file is held open from the start: if the gateway rotates it meanwhile,
    // both passes still read the same file, and --follow sees the rotation.
    let (active_path, rotated) = match files.split_last() {
        Some((a, r)) => (Some(*a), r),
        None => (None, &files[..]),
    };
    let mut active = active_path.map(open).transpose()?;
    // Several chains (gateways that ran at once) are read interleaved by time.
    let mut merged = match all.len() > 1 && !opts.follow {
        true => Some(merge::Merged::open(&all)?),
        false => None,
    };
    let mut widths = Widths::default();
    if opts.format == ShowFormat::Table {
        let active = (active.as_mut(), active_path);
        widths = table_widths((merged.as_mut(), rotated), active, filter, opts)?;
        w(writeln!(out, "{}", widths.header()))?;
    }
    if opts.format == ShowFormat::Csv {
        w(writeln!(out, "{}", CSV_COLUMNS.join(",")))?;
    }
    let print = |out: &mut dyn Write, line: &[u8], v: &Value| -> Result<(), String> {
        match opts.format {
            ShowFormat::Json => {
                w(out.write_all(line))?;
                w(out.write_all(b"\n"))
            }
            ShowFormat::Table => w(writeln!(out, "{}", widths.line(&Row::of(v)))),
            ShowFormat::Csv => w(writeln!(out, "{}", csv_row(v))),
        }
    };
    pass(
        merged.as_mut(),
        rotated,
        active.as_mut(),
        filter,
        &mut seen,
        &mut |l, v| print(out, l, v),
    )?;
    if opts.follow
        && let (Some(reader), Some(path)) = (active, active_path)
    {
        let mut each = |line: Option<&[u8]>| match line {
            None => w(out.flush()),
            Some(l) => match record_of(l) {
                Some(v) if filter.matches(&v) => print(out, l, &v),
                _ => Ok(()),
            },
        };
        lines::follow(path, reader, seen.last_seq, &mut each, keep_going)?;
    }
    Ok(seen)
}

/// The table's column widths, from a first pass over the matching records (the
/// active file is read again after it), fitted to `opts.width`.
fn table_widths(
    (merged, rotated): (Option<&mut merge::Merged>, &[&Path]),
    (active, active_path): (Option<&mut LineReader>, Option<&Path>),
    filter: &ShowFilter,
    opts: &ShowOptions,
) -> Result<Widths, String> {
    let mut widths = Widths::default();
    let mut active = active;
    pass(
        merged,
        rotated,
        active.as_deref_mut(),
        filter,
        &mut ShowStats::default(),
        &mut |_, v| {
            widths.see(&Row::of(v));
            Ok(())
        },
    )?;
    if let (Some(r), Some(p)) = (active, active_path) {
        r.rewind()
            .map_err(|e| format!("{}: {e}", fsgate_base::text::EscPath(p)))?;
    }
    if opts.follow {
        widths = widths.following();
    }
    Ok(widths.fit(opts.width))
}

/// The error of an output whose reader stopped reading (`| head`): not worth a message.
pub(crate) const READER_GONE: &str = "output: its reader stopped reading";

/// An output error as text.
fn w(r: std::io::Result<()>) -> Result<(), String> {
    r.map_err(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => READER_GONE.to_owned(),
        _ => format!("output: {e}"),
    })
}

/// `--stats`: counts of the matching records, as a table or JSON.
fn print_stats(
    files: &[&Path],
    filter: &ShowFilter,
    format: ShowFormat,
    out: &mut dyn Write,
    seen: &mut ShowStats,
) -> Result<(), String> {
    let mut stats = Stats::default();
    each_record(files, None, filter, seen, &mut |_, v| {
        stats.add(v);
        Ok(())
    })?;
    let text = match format {
        ShowFormat::Json => serde_json::to_string_pretty(&stats).map_err(|e| e.to_string())? + "\n",
        _ => stats.render(),
    };
    w(out.write_all(text.as_bytes()))
}

/// One reading pass: over the merged chains if there are several, else over one.
fn pass(
    merged: Option<&mut merge::Merged>,
    files: &[&Path],
    active: Option<&mut LineReader>,
    filter: &ShowFilter,
    seen: &mut ShowStats,
    each: &mut OnRecord<'_>,
) -> Result<(), String> {
    match merged {
        Some(m) => m.each(filter, seen, each),
        None => each_record(files, active, filter, seen, each),
    }
}

/// Hands each matching record of `files`, then of `active` (read to its end, where
/// `--follow` goes on), to `each`.
fn each_record(
    files: &[&Path],
    active: Option<&mut LineReader>,
    filter: &ShowFilter,
    seen: &mut ShowStats,
    each: &mut OnRecord<'_>,
) -> Result<(), String> {
    for path in files {
        read_all(&mut open(path)?, path, filter, seen, each)?;
    }
    match active {
        Some(r) => {
            let path = r.path().to_path_buf();
            read_all(r, &path, filter, seen, each)
        }
        None => Ok(()),
    }
}

fn read_all(
    reader: &mut LineReader,
    path: &Path,
    filter: &ShowFilter,
    seen: &mut ShowStats,
    each: &mut OnRecord<'_>,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", fsgate_base::text::EscPath(path));
    loop {
        match reader.next().map_err(err)? {
            Next::Eof => return Ok(()),
            Next::Overlong => seen.skipped += 1,
            Next::Line => {
                let Some(v) = record_of(reader.line()) else {
                    seen.skipped += 1;
                    continue;
                };
                seen.last_seq = v.get("seq").and_then(Value::as_u64).or(seen.last_seq);
                if filter.matches(&v) {
                    seen.shown += 1;
                    each(reader.line(), &v)?;
                }
            }
        }
    }
}

fn csv_row(v: &Value) -> String {
    CSV_COLUMNS
        .iter()
        .map(|k| csv_cell(&clean(&cells::column(v, k))))
        .collect::<Vec<_>>()
        .join(",")
}

/// Terminal columns for the table: `COLUMNS`, else the size of the terminal on stdout,
/// else 160 (output to a file or a pipe).
pub(crate) fn terminal_width() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
    {
        return n;
    }
    let stdout = std::io::stdout();
    match rustix::termios::tcgetwinsize(&stdout) {
        Ok(ws) if ws.ws_col > 0 => usize::from(ws.ws_col),
        _ => 160,
    }
}
