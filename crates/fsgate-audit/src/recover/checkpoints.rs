//! The checkpoints that judge a log at start-up: the one beside it and the newest per
//! log in the sink, checked (signature, log id, hash at its seq, tombstones) against the
//! chain.

use super::rotated::{hash_in_rotated, read_or_empty};
use crate::checkpoint::Checkpoint;
use crate::error::AuditError;
use crate::io::Io;
use crate::line::LineInfo;
use crate::series::{self};
use crate::signed::{SigStatus, check_signature};
use crate::tombstone::Tombstone;

/// The checkpoint beside the log, and the newest checkpoint per log in the sink (which
/// keeps every one: deleting the file beside the log cannot hide a cut-off tail).
pub(super) fn checkpoints(
    io: &Io,
    problems: &mut Vec<String>,
) -> Result<(Option<Checkpoint>, Vec<Checkpoint>), AuditError> {
    let cp_name = series::checkpoint_name(&io.name);
    let cp_bytes = read_or_empty(io, &cp_name)?;
    let beside = if cp_bytes.is_empty() {
        None
    } else {
        match Checkpoint::parse(String::from_utf8_lossy(&cp_bytes).trim()) {
            Ok(cp) => Some(cp),
            Err(m) => {
                problems.push(format!("{cp_name}: {m}"));
                None
            }
        }
    };
    let sink = io
        .sink
        .as_ref()
        .and_then(|s| s.file_path())
        .and_then(|p| Checkpoint::read_all(p).ok())
        .map(|all| newest_per_log(all.into_iter().flatten()))
        .unwrap_or_default();
    Ok((beside, sink))
}

/// The checkpoint must be signed by our key (when we have one), name our log, and match
/// the chain at its seq.
pub(super) fn check_checkpoint(
    io: &Io,
    cp: &Checkpoint,
    head: &Option<LineInfo>,
    rotated: &[(u64, String)],
    seen: Option<[u8; 32]>,
    log_id: &Option<String>,
    problems: &mut Vec<String>,
) -> Result<(), AuditError> {
    let pinned = io.signer.as_ref().map(|k| k.verifying_key());
    if pinned.is_some()
        && let SigStatus::Invalid(m) = check_signature(&cp.obj, pinned.as_ref())
    {
        problems.push(format!("checkpoint signature: {m}"));
        return Ok(());
    }
    if let Some(id) = log_id
        && &cp.log != id
    {
        problems.push(format!("checkpoint belongs to another log ({})", cp.log));
        return Ok(());
    }
    let head_seq = head.as_ref().map_or(0, |h| h.seq);
    if cp.seq > head_seq {
        problems.push(format!(
            "truncated: the checkpoint covers seq {} but the log ends at seq {head_seq}",
            cp.seq
        ));
        return Ok(());
    }
    let found = match seen {
        Some(h) => Some(h),
        None => hash_in_rotated(io, rotated, cp.seq)?,
    };
    if let Some(h) = found
        && hex::encode(h) != cp.hash
    {
        problems.push(format!(
            "replaced: record seq {} differs from the checkpoint taken at {}",
            cp.seq, cp.ts
        ));
    }
    Ok(())
}

/// Whether a tombstone says records up to `seq` (ending with `hash`) were pruned.
pub(super) fn tombstone_covers(io: &Io, seq: u64, hash: &[u8; 32]) -> bool {
    let name = series::tombstones_name(&io.name);
    let Ok(text) = io.dir.read_to_string(&name) else {
        return false;
    };
    let pinned = io.signer.as_ref().map(|k| k.verifying_key());
    text.lines()
        .filter_map(|l| Tombstone::parse(l).ok())
        .any(|t| {
            t.last_seq == seq
                && t.last_hash == hex::encode(hash)
                && !matches!(
                    check_signature(&t.obj, pinned.as_ref()),
                    SigStatus::Invalid(_)
                )
        })
}

/// The last checkpoint written for each log in a sink's history (the sink only grows:
/// after an accepted break, the new chain's checkpoints come last, even at lower seqs).
pub(super) fn newest_per_log(all: impl Iterator<Item = Checkpoint>) -> Vec<Checkpoint> {
    let mut newest: std::collections::HashMap<String, Checkpoint> = Default::default();
    for cp in all {
        newest.insert(cp.log.clone(), cp);
    }
    newest.into_values().collect()
}
