//! Offline verification of a log or a rotated series: the chain, the files' continuity,
//! tombstones, checkpoints and their signatures, and a remembered trusted state.
//! The algorithm (and its order of checks) is the one audit/FORMAT.md specifies.
//!
//! This file holds the entry points and the sidecars (tombstones, checkpoints, trusted
//! state) as read; `checkpoints`: each checkpoint compared with the chain (signature,
//! log, seq, hash, Merkle root); `trusted`: the remembered head of an earlier run.

mod checkpoints;
mod trusted;

use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoint;
pub use super::report::{
    CheckpointReport, Failure, FailureKind, FileReport, SeriesReport, Verdict, VerifyReport,
};
use super::series::{self, Series};
use super::signed::{SigStatus, check_signature};
use super::tombstone::Tombstone;
use super::verify_run::Run;
pub use super::verify_run::VerifyOptions;
use checkpoints::{CheckpointLine, check_checkpoints};
use trusted::{Trusted, check_trusted, read_trusted};

/// Verifies every log found in `paths`.
pub fn verify_paths(paths: &[PathBuf], opts: &VerifyOptions) -> VerifyReport {
    let all = match series::discover(paths) {
        Ok(s) => s,
        Err(e) => {
            return VerifyReport {
                verdict: Verdict::Unreadable,
                series: Vec::new(),
                error: Some(e),
            };
        }
    };
    if opts.trusted.is_some() && all.len() > 1 {
        return VerifyReport {
            verdict: Verdict::Unreadable,
            series: Vec::new(),
            error: Some("--trusted needs exactly one log, but several were given".into()),
        };
    }
    let series: Vec<SeriesReport> = all.iter().map(|s| verify_series(s, opts)).collect();
    let verdict = series
        .iter()
        .map(|s| s.verdict)
        .max()
        .unwrap_or(Verdict::Unreadable);
    VerifyReport {
        verdict,
        series,
        error: None,
    }
}

/// Verifies one series (see FORMAT.md, "Verifying").
pub fn verify_series(s: &Series, opts: &VerifyOptions) -> SeriesReport {
    let mut run = Run::new(s, opts);
    // 1. Read the sidecars (an unreadable one stops everything; a malformed one is
    //    reported after the chain).
    let (tombstones, checkpoints, trusted) = match read_sidecars(&mut run, s) {
        Ok(read) => read,
        Err(e) => {
            run.fail(FailureKind::Unreadable, None, None, e);
            return run.rep;
        }
    };
    // 2. The chain, file by file.
    let tombs: Vec<(u64, Result<Tombstone, String>)> = tombstones
        .into_iter()
        .map(|(n, l)| (n, Tombstone::parse(&l)))
        .collect();
    super::chain::walk(&mut run, s, &tombs);
    if run.failed() {
        return run.rep;
    }
    // 3. Tombstones must at least be well formed and signed as required.
    check_tombstones(&mut run, &s.tombstones_path(), &tombs);
    if run.failed() {
        return run.rep;
    }
    // 4. Checkpoints.
    check_checkpoints(&mut run, &checkpoints);
    if run.failed() {
        return run.rep;
    }
    // 5. The trusted state.
    if let Some(p) = &opts.trusted {
        check_trusted(&mut run, p, trusted);
    }
    run.rep
}

/// The tombstone lines (numbered), the checkpoints and the trusted state, as read.
type Sidecars = (Vec<(u64, String)>, Vec<CheckpointLine>, Option<Trusted>);

/// The sidecars' lines, in order: the tombstones, the checkpoints (the series' own,
/// then those given), and the trusted state. The seqs (and tree sizes) they need are
/// marked wanted in `run` as they are read; the first that cannot be read is the error.
fn read_sidecars(run: &mut Run<'_>, s: &Series) -> Result<Sidecars, String> {
    let tombstones = read_sidecar_lines(&s.tombstones_path(), false)?;
    let mut cp_files = vec![(s.checkpoint_path(), false)];
    cp_files.extend(run.opts.checkpoints.iter().map(|p| (p.clone(), true)));
    let mut checkpoints = Vec::new();
    for (p, explicit) in &cp_files {
        for (n, l) in read_sidecar_lines(p, *explicit)? {
            let parsed = Checkpoint::parse(&l);
            if let Ok(cp) = &parsed {
                run.wanted.insert(cp.seq, None);
                if cp.tree().is_some() {
                    run.roots.insert(cp.seq, None);
                }
            }
            checkpoints.push((p.clone(), n, parsed));
        }
    }
    let trusted = match &run.opts.trusted {
        Some(p) => read_trusted(p)?,
        None => None,
    };
    if let Some(t) = &trusted {
        run.wanted.insert(t.seq, None);
    }
    Ok((tombstones, checkpoints, trusted))
}

/// Fails the run at the first tombstone that is malformed or badly signed.
fn check_tombstones(run: &mut Run<'_>, path: &Path, tombs: &[(u64, Result<Tombstone, String>)]) {
    for (n, t) in tombs {
        let at = Some((path, *n));
        match t {
            Err(m) => {
                run.fail(FailureKind::Malformed, None, at, format!("tombstone: {m}"));
                return;
            }
            Ok(t) => {
                if let SigStatus::Invalid(m) = check_signature(&t.obj, run.opts.pinned.as_ref()) {
                    run.fail(
                        FailureKind::BadSignature,
                        Some(t.last_seq),
                        at,
                        format!("tombstone signature: {m}"),
                    );
                    return;
                }
            }
        }
    }
}

/// Reads a sidecar's non-empty lines (1-based numbers); a missing file has none, unless
/// it was named explicitly.
fn read_sidecar_lines(p: &Path, must_exist: bool) -> Result<Vec<(u64, String)>, String> {
    match std::fs::read(p) {
        Ok(b) => Ok(String::from_utf8_lossy(&b)
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i as u64 + 1, l.to_owned()))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}
