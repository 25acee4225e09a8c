//! Step 2 of verification (FORMAT.md section 9): walking the chain through a series,
//! file by file, in fixed-size chunks (memory stays bounded whatever the log's size),
//! checking the lines of each chunk on all cores.
//!
//! This file holds the walk through the series; `file`: one file, chunk by chunk, and
//! its torn tail; `links`: one record linked into the chain (or why it does not fit,
//! tombstones and missing files considered); `chunks`: reading chunks and checking
//! their lines on all cores.

pub(crate) mod chunks;
mod file;
mod links;

use super::series::{self, Series};
use super::tombstone::Tombstone;
use super::verify_run::Run;

/// Where the walk is in the series.
struct Walk<'t> {
    /// The series walked (its files, to name one that is missing).
    series: &'t Series,
    /// Seq and hash of the last record that passed.
    expected: Option<(u64, [u8; 32])>,
    /// The previous file's name, for messages.
    prev_file: Option<String>,
    /// The tombstones that parsed.
    tombs: Vec<&'t Tombstone>,
    /// Write-ahead intents not yet closed by an outcome or a reconciliation.
    intents: super::intents::Unclosed,
}

/// Walks the chain through every file of the series (FORMAT.md section 9, step 2).
pub(crate) fn walk(run: &mut Run<'_>, s: &Series, tombs: &[(u64, Result<Tombstone, String>)]) {
    let mut w = Walk {
        series: s,
        expected: None,
        prev_file: None,
        tombs: tombs.iter().filter_map(|(_, t)| t.as_ref().ok()).collect(),
        intents: super::intents::Unclosed::default(),
    };
    let last_index = s.files.len().saturating_sub(1);
    let mut buf: Vec<u8> = Vec::new();
    for (fi, path) in s.files.iter().enumerate() {
        if !w.file(run, path, fi == last_index, &mut buf) {
            return;
        }
        w.prev_file = Some(series::file_name(path));
    }
    if run.rep.records == 0 {
        run.rep.warnings.push("the log holds no records".into());
    }
    run.rep.warnings.extend(w.intents.warnings());
    run.rep.open_intents = w.intents.report();
}
