//! Offline verification of a log or a rotated series: the chain, the files' continuity,
//! tombstones, checkpoints and their signatures, and a remembered trusted state.
//! The algorithm (and its order of checks) is the one audit/FORMAT.md specifies.

use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use serde::Serialize;
use serde_json::{Value, json};

use super::canonical;
use super::checkpoint::{Checkpoint, SigStatus, check_signature};
use super::prune::Tombstone;
use super::record::{self, GENESIS_PREV, LineFault, LineInfo, check_line};
use super::series::{self, Series};

/// What verify concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Everything checked out.
    Intact,
    /// A file could not be read: nothing can be concluded.
    Unreadable,
    /// Something was changed, removed, reordered or cut.
    Tampered,
}

/// The kinds of failure, as named in FORMAT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A line is not a canonical record (or a sidecar line is not well formed).
    Malformed,
    /// A record's content does not match its hash, or does not chain on its predecessor.
    Modified,
    /// Records are missing (a seq jump, or no genesis and no tombstone).
    Missing,
    /// Records are out of order.
    Reordered,
    /// The tail was cut: a torn last line, or a checkpoint beyond the last record.
    Truncated,
    /// A file does not continue the previous one.
    Gap,
    /// The log differs from a checkpoint or the trusted state: rewritten.
    Replaced,
    /// A checkpoint or tombstone signature is missing, foreign or wrong.
    BadSignature,
    /// A file could not be read.
    Unreadable,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// What is wrong.
    pub kind: FailureKind,
    /// The seq concerned (the offending line's seq, or the checkpoint's), if known.
    pub seq: Option<u64>,
    /// The file concerned.
    pub file: Option<String>,
    /// The line (1-based) concerned.
    pub line: Option<u64>,
    /// A sentence for people.
    pub message: String,
}

/// One log file's share of the series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Records in it that verified.
    pub records: u64,
    /// Seq range of those records.
    pub first_seq: Option<u64>,
    /// Last seq.
    pub last_seq: Option<u64>,
    /// First timestamp.
    pub first_ts: Option<String>,
    /// Last timestamp.
    pub last_ts: Option<String>,
    /// Hash of the last record.
    pub last_hash: Option<String>,
}

/// The latest checkpoint that verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointReport {
    /// Its seq.
    pub seq: u64,
    /// When it was taken.
    pub ts: String,
    /// `periodic`, `heartbeat`, `shutdown`, `start`.
    pub kind: String,
    /// `pinned`, `unpinned` or `unsigned`.
    pub signature: String,
}

/// The result for one series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeriesReport {
    /// The active file's path.
    pub log: String,
    /// The log id.
    pub log_id: Option<String>,
    /// The conclusion.
    pub verdict: Verdict,
    /// Records that verified (before the failure, if any).
    pub records: u64,
    /// Seq range validated.
    pub first_seq: Option<u64>,
    /// Last seq validated.
    pub last_seq: Option<u64>,
    /// Time range validated.
    pub first_ts: Option<String>,
    /// Last timestamp validated.
    pub last_ts: Option<String>,
    /// Per file.
    pub files: Vec<FileReport>,
    /// The latest checkpoint.
    pub checkpoint: Option<CheckpointReport>,
    /// The first failure.
    pub error: Option<Failure>,
    /// Things a reviewer should know that do not make the log tampered.
    pub warnings: Vec<String>,
}

/// The result for all the paths given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Worst verdict: tampered, else unreadable, else intact.
    pub verdict: Verdict,
    /// One entry per log found.
    pub series: Vec<SeriesReport>,
    /// Why nothing could be checked at all, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VerifyReport {
    /// The exit code: 0 intact, 1 tampered, 2 unreadable.
    pub fn exit_code(&self) -> i32 {
        match self.verdict {
            Verdict::Intact => 0,
            Verdict::Tampered => 1,
            Verdict::Unreadable => 2,
        }
    }
}

/// What verify is given besides the log files.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The public key that must have signed checkpoints and tombstones.
    pub pinned: Option<VerifyingKey>,
    /// More checkpoint files (e.g. the sink's history), besides `NAME.checkpoint`.
    pub checkpoints: Vec<PathBuf>,
    /// A state file remembering the last verified head (read, then updated if intact).
    pub trusted: Option<PathBuf>,
}

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

/// Per-series accumulator.
struct Run<'a> {
    opts: &'a VerifyOptions,
    rep: SeriesReport,
    /// Seqs whose hash the checkpoints and trusted state need.
    wanted: std::collections::HashMap<u64, Option<[u8; 32]>>,
    last_hash: Option<[u8; 32]>,
}

impl Run<'_> {
    fn fail(&mut self, kind: FailureKind, seq: Option<u64>, at: Option<(&Path, u64)>, msg: String) {
        if self.rep.error.is_none() {
            self.rep.verdict = if kind == FailureKind::Unreadable {
                Verdict::Unreadable
            } else {
                Verdict::Tampered
            };
            self.rep.error = Some(Failure {
                kind,
                seq,
                file: at.map(|(p, _)| p.display().to_string()),
                line: at.map(|(_, l)| l),
                message: msg,
            });
        }
    }

    fn failed(&self) -> bool {
        self.rep.error.is_some()
    }
}

/// Verifies one series (see FORMAT.md, "Verifying").
pub fn verify_series(s: &Series, opts: &VerifyOptions) -> SeriesReport {
    let mut run = Run {
        opts,
        rep: SeriesReport {
            log: s.display_name(),
            log_id: None,
            verdict: Verdict::Intact,
            records: 0,
            first_seq: None,
            last_seq: None,
            first_ts: None,
            last_ts: None,
            files: Vec::new(),
            checkpoint: None,
            error: None,
            warnings: Vec::new(),
        },
        wanted: Default::default(),
        last_hash: None,
    };
    // 1. Read the sidecars (an unreadable one stops everything; a malformed one is
    //    reported after the chain).
    let tombstones = match read_sidecar_lines(&s.tombstones_path()) {
        Ok(lines) => lines,
        Err(e) => {
            run.fail(FailureKind::Unreadable, None, None, e);
            return run.rep;
        }
    };
    let mut cp_files = Vec::new();
    let own = s.checkpoint_path();
    if own.exists() || opts.checkpoints.is_empty() {
        cp_files.push(own);
    }
    cp_files.extend(opts.checkpoints.iter().cloned());
    let mut checkpoints = Vec::new();
    for p in &cp_files {
        match read_sidecar_lines(p) {
            Ok(lines) => {
                for (n, l) in lines {
                    let parsed = Checkpoint::parse(&l);
                    if let Ok(cp) = &parsed {
                        run.wanted.insert(cp.seq, None);
                    }
                    checkpoints.push((p.clone(), n, parsed));
                }
            }
            Err(e) => {
                run.fail(FailureKind::Unreadable, None, None, e);
                return run.rep;
            }
        }
    }
    let trusted = match &opts.trusted {
        Some(p) => match read_trusted(p) {
            Ok(t) => {
                if let Some(t) = &t {
                    run.wanted.insert(t.seq, None);
                }
                t
            }
            Err(e) => {
                run.fail(FailureKind::Unreadable, None, None, e);
                return run.rep;
            }
        },
        None => None,
    };

    // 2. The chain, file by file.
    let tombs: Vec<(u64, Result<Tombstone, String>)> = tombstones
        .into_iter()
        .map(|(n, l)| (n, Tombstone::parse(&l)))
        .collect();
    chain(&mut run, s, &tombs);
    if run.failed() {
        return run.rep;
    }
    // 3. Tombstones must at least be well formed and signed as required.
    for (n, t) in &tombs {
        let at = Some((s.tombstones_path(), *n));
        match t {
            Err(m) => {
                let at = at.as_ref().map(|(p, n)| (p.as_path(), *n));
                run.fail(FailureKind::Malformed, None, at, format!("tombstone: {m}"));
                return run.rep;
            }
            Ok(t) => {
                if let SigStatus::Invalid(m) = check_signature(&t.obj, opts.pinned.as_ref()) {
                    let at = at.as_ref().map(|(p, n)| (p.as_path(), *n));
                    run.fail(
                        FailureKind::BadSignature,
                        Some(t.last_seq),
                        at,
                        format!("tombstone signature: {m}"),
                    );
                    return run.rep;
                }
            }
        }
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

/// Reads a sidecar's non-empty lines (1-based numbers); a missing file has none.
fn read_sidecar_lines(p: &Path) -> Result<Vec<(u64, String)>, String> {
    match std::fs::read(p) {
        Ok(b) => Ok(String::from_utf8_lossy(&b)
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i as u64 + 1, l.to_owned()))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}

/// Checks lines in parallel when there are many (each line checks on its own).
fn check_all(lines: &[(usize, &[u8])]) -> Vec<Result<LineInfo, LineFault>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || lines.len() < 4096 {
        let mut scratch = Vec::with_capacity(1024);
        return lines
            .iter()
            .map(|(_, l)| check_line(l, &mut scratch))
            .collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut scratch = Vec::with_capacity(1024);
                    part.iter()
                        .map(|(_, l)| check_line(l, &mut scratch))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err(LineFault::Malformed("checker panicked".into()))])
            })
            .collect()
    })
}

fn chain(run: &mut Run<'_>, s: &Series, tombs: &[(u64, Result<Tombstone, String>)]) {
    let mut expected: Option<(u64, [u8; 32])> = None;
    let mut prev_file: Option<String> = None;
    let last_index = s.files.len().saturating_sub(1);
    for (fi, path) in s.files.iter().enumerate() {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                run.fail(
                    FailureKind::Unreadable,
                    None,
                    None,
                    format!("{}: {e}", path.display()),
                );
                return;
            }
        };
        let fname = series::file_name(path);
        let lines: Vec<(usize, &[u8])> = record::lines(&bytes).collect();
        let infos = check_all(&lines);
        let mut fr = FileReport {
            path: path.clone(),
            records: 0,
            first_seq: None,
            last_seq: None,
            first_ts: None,
            last_ts: None,
            last_hash: None,
        };
        for (li, res) in infos.iter().enumerate() {
            let at = Some((path.as_path(), li as u64 + 1));
            let info = match res {
                Ok(i) => i,
                Err(LineFault::Malformed(m)) => {
                    run.fail(
                        FailureKind::Malformed,
                        None,
                        at,
                        format!("malformed record: {m}"),
                    );
                    break;
                }
                Err(LineFault::Modified { seq }) => {
                    run.fail(
                        FailureKind::Modified,
                        Some(*seq),
                        at,
                        format!(
                            "record seq {seq} was modified: its hash does not match its content"
                        ),
                    );
                    break;
                }
            };
            match expected {
                None => {
                    if info.prev != GENESIS_PREV {
                        let found = tombs.iter().find_map(|(_, t)| {
                            t.as_ref().ok().filter(|t| {
                                t.last_seq + 1 == info.seq && t.last_hash == hex::encode(info.prev)
                            })
                        });
                        match found {
                            Some(t) => run.rep.warnings.push(format!(
                                "records {}..{} were pruned on {} (tombstone{})",
                                t.first_seq,
                                t.last_seq,
                                t.ts,
                                match check_signature(&t.obj, run.opts.pinned.as_ref()) {
                                    SigStatus::ValidPinned => ", signed by the pinned key",
                                    SigStatus::ValidUnpinned(_) =>
                                        ", signed by a key nobody pinned: pass --pubkey",
                                    SigStatus::Unsigned =>
                                        ", UNSIGNED: a deletion could look the same",
                                    SigStatus::Invalid(_) => ", with a bad signature",
                                }
                            )),
                            None => {
                                run.fail(
                                    FailureKind::Missing,
                                    Some(info.seq),
                                    at,
                                    format!(
                                        "records before seq {} are missing: the series does not start at genesis and no tombstone covers them",
                                        info.seq
                                    ),
                                );
                                break;
                            }
                        }
                    }
                }
                Some((eseq, ehash)) => {
                    if info.seq != eseq + 1 || info.prev != ehash {
                        let (kind, msg) = if li == 0 {
                            (
                                FailureKind::Gap,
                                format!(
                                    "{fname} does not continue {}: it starts at seq {} but seq {} with the previous file's last hash was expected",
                                    prev_file.as_deref().unwrap_or("the previous file"),
                                    info.seq,
                                    eseq + 1
                                ),
                            )
                        } else if info.seq == eseq + 1 {
                            (
                                FailureKind::Modified,
                                format!(
                                    "record seq {} does not chain on seq {eseq}: one of the two was altered",
                                    info.seq
                                ),
                            )
                        } else if info.seq <= eseq
                            || infos[li + 1..]
                                .iter()
                                .any(|r| r.as_ref().is_ok_and(|i| i.seq == eseq + 1))
                        {
                            (
                                FailureKind::Reordered,
                                format!(
                                    "records out of order: seq {} where seq {} was expected",
                                    info.seq,
                                    eseq + 1
                                ),
                            )
                        } else {
                            (
                                FailureKind::Missing,
                                format!("records missing: seq {} follows seq {eseq}", info.seq),
                            )
                        };
                        run.fail(kind, Some(info.seq), at, msg);
                        break;
                    }
                }
            }
            if let Some(log) = &info.log {
                match &run.rep.log_id {
                    None => run.rep.log_id = Some(log.clone()),
                    Some(id) if id != log => {
                        run.fail(
                            FailureKind::Gap,
                            Some(info.seq),
                            at,
                            format!("record seq {} belongs to another log ({log})", info.seq),
                        );
                        break;
                    }
                    Some(_) => {}
                }
            }
            if let Some(kind) = &info.kind {
                run.rep.warnings.push(match kind.as_str() {
                    record::KIND_BREAK => format!(
                        "seq {} is a break: an operator started on a log that did not verify (see its details)",
                        info.seq
                    ),
                    _ => format!(
                        "seq {} records a crash recovery: a torn last line was cut off (see its details)",
                        info.seq
                    ),
                });
            }
            if let Some(slot) = run.wanted.get_mut(&info.seq) {
                *slot = Some(info.hash);
            }
            let ts = info.ts_str().to_owned();
            fr.records += 1;
            fr.first_seq.get_or_insert(info.seq);
            fr.first_ts.get_or_insert_with(|| ts.clone());
            fr.last_seq = Some(info.seq);
            fr.last_ts = Some(ts.clone());
            fr.last_hash = Some(hex::encode(info.hash));
            run.rep.records += 1;
            run.rep.first_seq.get_or_insert(info.seq);
            run.rep.first_ts.get_or_insert_with(|| ts.clone());
            run.rep.last_seq = Some(info.seq);
            run.rep.last_ts = Some(ts);
            run.last_hash = Some(info.hash);
            expected = Some((info.seq, info.hash));
        }
        run.rep.files.push(fr);
        if run.failed() {
            return;
        }
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if complete < bytes.len() {
            let torn = bytes.len() - complete;
            let at = Some((path.as_path(), lines.len() as u64 + 1));
            if fi == last_index {
                run.fail(
                    FailureKind::Truncated,
                    expected.map(|(s, _)| s + 1),
                    at,
                    format!(
                        "truncated tail: the last line of {fname} is torn ({torn} bytes without a newline)"
                    ),
                );
            } else {
                run.fail(
                    FailureKind::Malformed,
                    None,
                    at,
                    format!("{fname} ends with {torn} bytes without a newline"),
                );
            }
            return;
        }
        prev_file = Some(fname);
    }
    if run.rep.records == 0 {
        run.rep.warnings.push("the log holds no records".into());
    }
}

fn check_checkpoints(run: &mut Run<'_>, cps: &[(PathBuf, u64, Result<Checkpoint, String>)]) {
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
        let signature = match check_signature(&cp.obj, run.opts.pinned.as_ref()) {
            SigStatus::Invalid(m) => {
                run.fail(
                    FailureKind::BadSignature,
                    Some(cp.seq),
                    at,
                    format!("checkpoint taken at {}: {m}", cp.ts),
                );
                return;
            }
            SigStatus::ValidPinned => "pinned",
            SigStatus::ValidUnpinned(_) => "unpinned",
            SigStatus::Unsigned => "unsigned",
        };
        if let Some(id) = &run.rep.log_id
            && &cp.log != id
        {
            run.fail(
                FailureKind::Replaced,
                Some(cp.seq),
                at,
                format!(
                    "the checkpoint taken at {} belongs to log {}, but this log is {id}: it was replaced",
                    cp.ts, cp.log
                ),
            );
            return;
        }
        if cp.seq > last_seq {
            run.fail(
                FailureKind::Truncated,
                Some(cp.seq),
                at,
                format!(
                    "truncated: the checkpoint taken at {} covers seq {} but the log ends at seq {last_seq}",
                    cp.ts, cp.seq
                ),
            );
            return;
        }
        if cp.seq < first_seq {
            run.rep.warnings.push(format!(
                "checkpoint seq {} lies in pruned records; not compared",
                cp.seq
            ));
            continue;
        }
        let have = run.wanted.get(&cp.seq).copied().flatten();
        if have.map(hex::encode).as_deref() != Some(cp.hash.as_str()) {
            run.fail(
                FailureKind::Replaced,
                Some(cp.seq),
                at,
                format!(
                    "record seq {} differs from the checkpoint taken at {}: the log was rewritten",
                    cp.seq, cp.ts
                ),
            );
            return;
        }
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
    run.rep.checkpoint = latest;
}

/// The remembered head of an earlier verification.
struct Trusted {
    log: String,
    seq: u64,
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

impl SeriesReport {
    /// One line: verdict and the first failure, or what was validated.
    pub fn summary_line(&self) -> String {
        match &self.error {
            Some(f) => format!(
                "{}: {:?} at {}{}: {}",
                self.log,
                self.verdict,
                f.file.as_deref().unwrap_or("?"),
                f.line.map(|l| format!(" line {l}")).unwrap_or_default(),
                f.message
            ),
            None => format!(
                "{}: intact, {} records, seq {}..{}",
                self.log,
                self.records,
                self.first_seq.unwrap_or(0),
                self.last_seq.unwrap_or(0)
            ),
        }
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let word = match self.verdict {
            Verdict::Intact => "INTACT",
            Verdict::Tampered => "TAMPERED",
            Verdict::Unreadable => "UNREADABLE",
        };
        let _ = writeln!(out, "{word}  {}", self.log);
        if let Some(f) = &self.error {
            let _ = writeln!(
                out,
                "  first bad record: {}{}{}",
                f.seq.map(|s| format!("seq {s}, ")).unwrap_or_default(),
                f.file.clone().unwrap_or_default(),
                f.line.map(|l| format!(" line {l}")).unwrap_or_default()
            );
            let _ = writeln!(out, "  what is wrong: {:?}: {}", f.kind, f.message);
        }
        let _ = writeln!(
            out,
            "  {} {} records checked in {} file(s), seq {}..{}, {} .. {}",
            if self.error.is_some() {
                "before it:"
            } else {
                "validated:"
            },
            self.records,
            self.files.len(),
            self.first_seq.map_or("-".into(), |s| s.to_string()),
            self.last_seq.map_or("-".into(), |s| s.to_string()),
            self.first_ts.as_deref().unwrap_or("-"),
            self.last_ts.as_deref().unwrap_or("-"),
        );
        if let Some(c) = &self.checkpoint {
            let _ = writeln!(
                out,
                "  checkpoint: seq {} ({}, {}), signature {}",
                c.seq, c.kind, c.ts, c.signature
            );
        }
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        out
    }
}

impl VerifyReport {
    /// One line per series.
    pub fn summary_line(&self) -> String {
        match &self.error {
            Some(e) => e.clone(),
            None => self
                .series
                .iter()
                .map(SeriesReport::summary_line)
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    /// The human-readable report.
    pub fn render(&self) -> String {
        match &self.error {
            Some(e) => format!("UNREADABLE  {e}\n"),
            None => self.series.iter().map(SeriesReport::render).collect(),
        }
    }
}
