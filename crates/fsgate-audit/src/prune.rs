//! Retention: `fsgate audit prune --before DATE` removes the oldest rotated files and
//! leaves a (signed) tombstone, so that a pruned start is told apart from a deleted one.

use std::io::Write;
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::canonical;
use super::series::{self, Series};
pub use super::tombstone::Tombstone;
pub(crate) use super::tombstone::tombstone_object;
use super::verify::{self, Verdict, VerifyOptions};

/// Why prune did nothing.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// The log could not be read or the files could not be changed (exit 2).
    #[error("{0}")]
    Unreadable(String),
    /// The log does not verify; nothing is removed from a suspect chain (exit 1).
    #[error("refusing to prune: {0}")]
    Refused(String),
}

/// What prune did (or would do, with `dry_run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneOutcome {
    /// The removed files.
    pub removed: Vec<PathBuf>,
    /// The tombstone written, if anything was removed.
    pub tombstone: Option<Tombstone>,
}

/// Parses a `--before` date: RFC 3339, or `YYYY-MM-DD` (midnight UTC).
pub fn parse_date(s: &str) -> Option<OffsetDateTime> {
    if let Some(t) = canonical::parse_ts(s) {
        return Some(t);
    }
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(s, &fmt)
        .ok()
        .map(|d| d.midnight().assume_utc())
}

/// Removes the rotated files of the log at `path` (a log file or its directory) whose
/// records are all older than `before`, oldest first, never the active file. The chain
/// must verify first. The tombstone is appended (and synced) before any file goes.
pub fn prune(
    path: &Path,
    before: OffsetDateTime,
    key: Option<&SigningKey>,
    dry_run: bool,
) -> Result<PruneOutcome, PruneError> {
    let series = whole_series(path)?;
    let report = verify::verify_series(&series, &VerifyOptions::default());
    match report.verdict {
        Verdict::Intact => {}
        Verdict::Unreadable => {
            return Err(PruneError::Unreadable(report.summary_line()));
        }
        Verdict::Tampered => return Err(PruneError::Refused(report.summary_line())),
    }
    let cutoff = canonical::format_ts(before);
    let Pruned {
        removed,
        files_json,
        range,
    } = prunable(&report, &series, &cutoff)?;
    let Some((first_seq, last_seq, last_hash)) = range else {
        return Ok(PruneOutcome {
            removed,
            tombstone: None,
        });
    };
    let obj = tombstone_object(
        report.log_id.as_deref().unwrap_or_default(),
        (first_seq, last_seq, &last_hash),
        &canonical::now_ts(),
        &cutoff,
        files_json,
        key,
    );
    let line = String::from_utf8_lossy(&canonical::to_vec(&Value::Object(obj))).into_owned();
    let tombstone = Tombstone::parse(&line).map_err(PruneError::Unreadable)?;
    if !dry_run {
        write_and_remove(&series, &line, &removed)?;
    }
    Ok(PruneOutcome {
        removed,
        tombstone: Some(tombstone),
    })
}

/// The series `path` names (a log file, or a directory holding one log), with every
/// file of it: the whole series is verified, not just the file named.
fn whole_series(path: &Path) -> Result<Series, PruneError> {
    let mut all = series::discover(&[path.to_path_buf()]).map_err(PruneError::Unreadable)?;
    let series = match (all.len(), path.is_dir()) {
        (1, _) => all.remove(0),
        (_, false) => {
            let name = series::file_name(path);
            let base = series::split_name(&name).0.to_owned();
            all.into_iter()
                .find(|s| s.base == base)
                .ok_or_else(|| PruneError::Unreadable("no log found".into()))?
        }
        _ => {
            return Err(PruneError::Unreadable(format!(
                "{} holds several logs; name the active log file",
                path.display()
            )));
        }
    };
    Ok(Series {
        files: series::discover(std::slice::from_ref(&series.dir))
            .map_err(PruneError::Unreadable)?
            .into_iter()
            .find(|s| s.base == series.base)
            .map(|s| s.files)
            .unwrap_or(series.files),
        ..series
    })
}

/// The rotated files to remove, their entries in the tombstone, and the seq range
/// (first, last, last hash) they hold.
struct Pruned {
    removed: Vec<PathBuf>,
    files_json: Vec<Value>,
    range: Option<(u64, u64, String)>,
}

/// The oldest rotated files whose last record is older than `cutoff`, up to the first
/// that is not (never the active file), each read to hash it.
fn prunable(
    report: &super::report::SeriesReport,
    series: &Series,
    cutoff: &str,
) -> Result<Pruned, PruneError> {
    let mut removed = Vec::new();
    let mut files_json = Vec::new();
    let mut range: Option<(u64, u64, String)> = None;
    for f in &report.files {
        let is_active = series::file_name(&f.path) == series.base;
        let (Some(first), Some(last), Some(last_ts)) = (f.first_seq, f.last_seq, &f.last_ts) else {
            break;
        };
        if is_active || last_ts.as_str() >= cutoff {
            break;
        }
        let bytes = std::fs::read(&f.path)
            .map_err(|e| PruneError::Unreadable(format!("{}: {e}", f.path.display())))?;
        files_json.push(json!({
            "name": series::file_name(&f.path), "first_seq": first, "last_seq": last,
            "sha256": hex::encode(fsgate_base::sha256::Sha256::digest(&bytes)),
        }));
        let start = range.as_ref().map_or(first, |r| r.0);
        range = Some((start, last, f.last_hash.clone().unwrap_or_default()));
        removed.push(f.path.clone());
    }
    Ok(Pruned {
        removed,
        files_json,
        range,
    })
}

/// Appends the tombstone `line` durably (file and directory synced) before removing
/// the files it covers; the directory is synced again after.
fn write_and_remove(series: &Series, line: &str, removed: &[PathBuf]) -> Result<(), PruneError> {
    let ts_path = series.tombstones_path();
    let io_err =
        |p: &Path, e: std::io::Error| PruneError::Unreadable(format!("{}: {e}", p.display()));
    let mut opts = std::fs::OpenOptions::new();
    opts.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&ts_path).map_err(|e| io_err(&ts_path, e))?;
    f.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| io_err(&ts_path, e))?;
    sync_dir(&series.dir).map_err(|e| io_err(&series.dir, e))?;
    for p in removed {
        std::fs::remove_file(p).map_err(|e| io_err(p, e))?;
    }
    sync_dir(&series.dir).map_err(|e| io_err(&series.dir, e))?;
    Ok(())
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
