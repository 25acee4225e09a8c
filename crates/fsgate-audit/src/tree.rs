//! The writer's Merkle tree at start-up: resumed from the latest checkpoint's frontier
//! and the records after it, or rebuilt from the whole series when no checkpoint
//! carries one. Without the records that a rebuild needs (pruned before checkpoints
//! carried a tree), checkpoints carry no tree.

use super::checkpoint::Checkpoint;
use super::io::Io;
use super::merkle::{self, CompactRange};
use super::recover::rotated::{read_or_empty, rotated_files};
use crate::error::AuditError;

/// The tree over records `1..=head_seq`, or `None` (with the reason) if it cannot be
/// rebuilt. `active` is the active file's bytes and `active_first` its first seq.
pub(crate) fn resume(
    io: &Io,
    log_id: &str,
    active: &[u8],
    active_first: u64,
    head_seq: u64,
) -> Result<Result<CompactRange, String>, AuditError> {
    let from_checkpoint = latest_tree(io, log_id)?.filter(|t| t.size() <= head_seq);
    let mut tree = from_checkpoint.unwrap_or_default();
    if tree.size() + 1 < active_first {
        for (first, name) in rotated_files(io)? {
            if first > tree.size() + 1 {
                return Ok(Err(format!(
                    "records {}..{} are no longer in the log (pruned), and no checkpoint \
                     carries the tree over them",
                    tree.size() + 1,
                    first - 1
                )));
            }
            push_lines(&mut tree, &read_or_empty(io, &name)?, first);
        }
    }
    push_lines(&mut tree, active, active_first);
    if tree.size() != head_seq {
        return Ok(Err(format!(
            "the tree rebuilt from the files has {} records, the chain {head_seq}",
            tree.size()
        )));
    }
    Ok(Ok(tree))
}

/// The tree of the log's `NAME.checkpoint`, if it is this log's and carries one.
fn latest_tree(io: &Io, log_id: &str) -> Result<Option<CompactRange>, AuditError> {
    let name = format!("{}.checkpoint", io.name);
    let bytes = read_or_empty(io, &name)?;
    let text = String::from_utf8_lossy(&bytes);
    let latest = text.lines().rev().find(|l| !l.trim().is_empty());
    let cp = latest.and_then(|l| Checkpoint::parse(l).ok());
    Ok(cp
        .filter(|cp| cp.log == log_id)
        .and_then(|cp| cp.tree())
        .map(|(range, _)| range))
}

/// Appends the lines of a file whose first record has seq `first` to `tree`, skipping
/// those it already holds. The chain was verified: line `i` has seq `first + i`.
fn push_lines(tree: &mut CompactRange, file: &[u8], first: u64) {
    let lines = file.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    for (seq, line) in (first..).zip(lines) {
        if seq == tree.size() + 1 {
            tree.push(merkle::leaf_hash(line));
        }
    }
}
