//! Each checkpoint of a series compared with the chain, in FORMAT.md's order: its
//! signature, its log, its seq within the log, its hash, its Merkle root; and what the
//! latest one leaves open.

use std::path::{Path, PathBuf};

use crate::checkpoint::Checkpoint;
use crate::report::{CheckpointReport, FailureKind};
use crate::signed::{SigStatus, check_signature};
use crate::verify_run::Run;

/// A checkpoint as read: the file it is in, its line, and what it parsed to.
pub(super) type CheckpointLine = (PathBuf, u64, Result<Checkpoint, String>);

pub(super) fn check_checkpoints(run: &mut Run<'_>, cps: &[CheckpointLine]) {
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
pub(super) enum Compared {
    /// It holds; its signature is pinned, unpinned or unsigned.
    Holds(&'static str),
    /// It lies in pruned records: not compared.
    Pruned,
    /// It does not hold: the failure is recorded.
    Failed,
}

/// Compares one checkpoint, in order: its signature, its log, its seq within the log
/// (`first` to `last`), the hash of the record at its seq, its Merkle root.
pub(super) fn check_checkpoint(
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
pub(super) fn warn_of_latest(run: &mut Run<'_>, l: &CheckpointReport, last_seq: u64) {
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
pub(super) fn tree_matches(run: &mut Run<'_>, cp: &Checkpoint, at: Option<(&Path, u64)>) -> bool {
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
