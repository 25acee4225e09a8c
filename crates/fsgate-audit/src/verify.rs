//! Offline verification of a log or a rotated series: the chain, the files' continuity,
//! tombstones, checkpoints and their signatures, and a remembered trusted state.
//! The algorithm (and its order of checks) is the one audit/FORMAT.md specifies.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::canonical;
use super::checkpoint::Checkpoint;
pub use super::report::{
    CheckpointReport, Failure, FailureKind, FileReport, SeriesReport, Verdict, VerifyReport,
};
use super::series::{self, Series};
use super::signed::{SigStatus, check_signature};
use super::tombstone::Tombstone;
use super::verify_run::Run;
pub use super::verify_run::VerifyOptions;

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

/// A checkpoint as read: the file it is in, its line, and what it parsed to.
type CheckpointLine = (PathBuf, u64, Result<Checkpoint, String>);

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

fn check_checkpoints(run: &mut Run<'_>, cps: &[CheckpointLine]) {
    if cps.is_empty() {
        run.rep.warnings.push(
            "no checkpoint: a cut-off tail or a log rewritten from scratch cannot be detected"
                .into(),
        );
        return;
    }
    let last_seq = run.rep.last_seq.unwrap_or(0);
    let first_seq = run.rep.first_seq.unwrap_or(0);
    let mut latest: Option<CheckpointReport> = None;
    for (path, n, cp) in cps {
        let at = Some((path.as_path(), *n));
        let cp = match cp {
            Ok(cp) => cp,
            Err(m) => {
                run.fail(FailureKind::Malformed, None, at, format!("checkpoint: {m}"));
                return;
            }
        };
        let signature = match check_checkpoint(run, cp, at, (first_seq, last_seq)) {
            Compared::Holds(signature) => signature,
            Compared::Pruned => continue,
            Compared::Failed => return,
        };
        if latest.as_ref().is_none_or(|l| cp.seq >= l.seq) {
            latest = Some(CheckpointReport {
                seq: cp.seq,
                ts: cp.ts.clone(),
                kind: cp.kind.clone(),
                signature: signature.into(),
            });
        }
    }
    if let Some(l) = &latest {
        warn_of_latest(run, l, last_seq);
    }
    run.rep.checkpoint = latest;
}

/// What comparing one checkpoint with the chain found.
enum Compared {
    /// It holds; its signature is pinned, unpinned or unsigned.
    Holds(&'static str),
    /// It lies in pruned records: not compared.
    Pruned,
    /// It does not hold: the failure is recorded.
    Failed,
}

/// Compares one checkpoint, in order: its signature, its log, its seq within the log
/// (`first` to `last`), the hash of the record at its seq, its Merkle root.
fn check_checkpoint(
    run: &mut Run<'_>,
    cp: &Checkpoint,
    at: Option<(&Path, u64)>,
    (first_seq, last_seq): (u64, u64),
) -> Compared {
    let signature = match check_signature(&cp.obj, run.opts.pinned.as_ref()) {
        SigStatus::Invalid(m) => {
            run.fail(
                FailureKind::BadSignature,
                Some(cp.seq),
                at,
                format!("checkpoint taken at {}: {m}", cp.ts),
            );
            return Compared::Failed;
        }
        SigStatus::ValidPinned => "pinned",
        SigStatus::ValidUnpinned(_) => "unpinned",
        SigStatus::Unsigned => "unsigned",
    };
    if let Some(id) = &run.rep.log_id
        && &cp.log != id
    {
        let msg = format!(
            "the checkpoint taken at {} belongs to log {}, but this log is {id}: it was replaced",
            cp.ts, cp.log
        );
        run.fail(FailureKind::Replaced, Some(cp.seq), at, msg);
        return Compared::Failed;
    }
    if cp.seq > last_seq {
        let msg = format!(
            "truncated: the checkpoint taken at {} covers seq {} but the log ends at seq {last_seq}",
            cp.ts, cp.seq
        );
        run.fail(FailureKind::Truncated, Some(cp.seq), at, msg);
        return Compared::Failed;
    }
    if cp.seq < first_seq {
        run.rep.warnings.push(format!(
            "checkpoint seq {} lies in pruned records; not compared",
            cp.seq
        ));
        return Compared::Pruned;
    }
    let have = run.wanted.get(&cp.seq).copied().flatten();
    if have.map(hex::encode).as_deref() != Some(cp.hash.as_str()) {
        let msg = format!(
            "record seq {} differs from the checkpoint taken at {}: the log was rewritten",
            cp.seq, cp.ts
        );
        run.fail(FailureKind::Replaced, Some(cp.seq), at, msg);
        return Compared::Failed;
    }
    if !tree_matches(run, cp, at) {
        return Compared::Failed;
    }
    Compared::Holds(signature)
}

/// Warns of what the latest checkpoint leaves open: a signature that proves little,
/// records after it.
fn warn_of_latest(run: &mut Run<'_>, l: &CheckpointReport, last_seq: u64) {
    match l.signature.as_str() {
        "unsigned" => run.rep.warnings.push(
            "the checkpoint is unsigned: whoever can write the directory can forge it".into(),
        ),
        "unpinned" => run
            .rep
            .warnings
            .push("the checkpoint is signed, but by a key nobody pinned: pass --pubkey".into()),
        _ => {}
    }
    if l.seq < last_seq {
        run.rep.warnings.push(format!(
            "records {}..{last_seq} come after the latest checkpoint: only the chain covers them",
            l.seq + 1
        ));
    }
}

/// A checkpoint's Merkle root must be the root of the records it covers, where they are
/// all at hand (not pruned). `false` (with the failure recorded) if it is not.
fn tree_matches(run: &mut Run<'_>, cp: &Checkpoint, at: Option<(&Path, u64)>) -> bool {
    let Some((range, _)) = cp.tree() else {
        return true;
    };
    match run.roots.get(&cp.seq).copied().flatten() {
        Some(root) if root == range.root() => true,
        Some(_) => {
            let msg = format!(
                "the Merkle root of the checkpoint taken at {} is not the root of records 1..{}",
                cp.ts, cp.seq
            );
            run.fail(FailureKind::Replaced, Some(cp.seq), at, msg);
            false
        }
        None => {
            run.rep.warnings.push(format!(
                "the Merkle root of checkpoint seq {} was not recomputed: records before it were pruned",
                cp.seq
            ));
            true
        }
    }
}

/// The remembered head of an earlier verification.
struct Trusted {
    /// Its log id.
    log: String,
    /// The head seq it saw.
    seq: u64,
    /// The head hash it saw.
    hash: String,
}

fn read_trusted(p: &Path) -> Result<Option<Trusted>, String> {
    let text = match std::fs::read_to_string(p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a trusted-state file: {e}", p.display()))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match (s("log"), v.get("seq").and_then(Value::as_u64), s("hash")) {
        (Some(log), Some(seq), Some(hash)) if s("type").as_deref() == Some("trusted") => {
            Ok(Some(Trusted { log, seq, hash }))
        }
        _ => Err(format!("{}: not a trusted-state file", p.display())),
    }
}

fn check_trusted(run: &mut Run<'_>, p: &Path, trusted: Option<Trusted>) {
    let at = Some((p, 1));
    match trusted {
        None => run.rep.warnings.push(format!(
            "no earlier trusted state in {}: this run cannot prove the log extends an earlier verification; it is recorded now",
            p.display()
        )),
        Some(t) => {
            if run.rep.log_id.as_deref().is_some_and(|id| id != t.log) {
                run.fail(
                    FailureKind::Replaced,
                    Some(t.seq),
                    at,
                    format!("the trusted state is for log {}: this log was replaced", t.log),
                );
                return;
            }
            let last = run.rep.last_seq.unwrap_or(0);
            if t.seq > last {
                run.fail(
                    FailureKind::Truncated,
                    Some(t.seq),
                    at,
                    format!(
                        "truncated: an earlier verification saw seq {} but the log now ends at seq {last}",
                        t.seq
                    ),
                );
                return;
            }
            if t.seq < run.rep.first_seq.unwrap_or(0) {
                run.rep.warnings.push(format!(
                    "the trusted seq {} lies in pruned records; not compared",
                    t.seq
                ));
            } else if run.wanted.get(&t.seq).copied().flatten().map(hex::encode).as_deref()
                != Some(t.hash.as_str())
            {
                run.fail(
                    FailureKind::Replaced,
                    Some(t.seq),
                    at,
                    format!(
                        "record seq {} differs from the one an earlier verification saw: the log was rewritten",
                        t.seq
                    ),
                );
                return;
            }
        }
    }
    // Remember this head for next time.
    let (Some(id), Some(seq), Some(hash)) = (&run.rep.log_id, run.rep.last_seq, run.last_hash)
    else {
        return;
    };
    let state = json!({
        "type": "trusted", "v": 1, "log": id, "seq": seq, "hash": hex::encode(hash),
        "ts": run.rep.last_ts, "verified_at": canonical::now_ts(),
    });
    let mut text = canonical::to_vec(&state);
    text.push(b'\n');
    let tmp = p.with_extension("tmp");
    let written = std::fs::write(&tmp, &text)
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, p));
    if let Err(e) = written {
        run.rep.warnings.push(format!(
            "could not update the trusted state {}: {e}",
            p.display()
        ));
    }
}
