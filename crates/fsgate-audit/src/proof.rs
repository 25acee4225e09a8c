//! Proofs about single records and checkpoints, checkable without the log:
//!
//! - an inclusion proof in the C2SP `tlog-proof` layout: the header line, `extra` (the
//!   record's line, base64), `index` (seq - 1), the inclusion path (base64 hashes, one
//!   per line), an empty line, then the signed checkpoint note;
//! - a consistency proof (fsgate's own layout, same conventions): the header line,
//!   `old` and `new` (the two signed checkpoint notes, base64), then the path.
//!
//! Made here from the log's files; checked (`check`) with the public key alone.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::checkpoint::Checkpoint;
use super::merkle::{self, Hash};
use super::note::SignedNote;
use super::series;

mod check;
mod layout;
pub(crate) use check::{Proven, check};
use layout::record_seq;
pub(crate) use layout::{CONSISTENCY_HEADER, INCLUSION_HEADER, ProofError};

/// The leaf hashes of records `1..=size` of the log whose active file is `log`, and
/// the line of record `want` (if asked).
fn read_leaves(
    log: &Path,
    size: u64,
    want: Option<u64>,
) -> Result<(Vec<Hash>, Option<Vec<u8>>), ProofError> {
    let mut leaves = Vec::with_capacity(size.min(1 << 24) as usize);
    let mut line_of_want = None;
    for file in series_files(log)? {
        let bytes = std::fs::read(&file)
            .map_err(|e| ProofError::Unreadable(format!("{}: {e}", file.display())))?;
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let seq = record_seq(line);
            if seq != Some(leaves.len() as u64 + 1) {
                let msg = match seq {
                    Some(s) if leaves.is_empty() => format!(
                        "records 1..{} are no longer in the log (pruned): the tree cannot be rebuilt",
                        s.saturating_sub(1)
                    ),
                    _ => format!(
                        "{}: the records are not consecutive after seq {}: run `fsgate audit verify`",
                        file.display(),
                        leaves.len()
                    ),
                };
                return Err(ProofError::Unprovable(msg));
            }
            if want == seq {
                line_of_want = Some(line.to_vec());
            }
            leaves.push(merkle::leaf_hash(line));
            if leaves.len() as u64 == size {
                return Ok((leaves, line_of_want));
            }
        }
    }
    Err(ProofError::Unprovable(format!(
        "the log holds {} records, fewer than the checkpoint's {size}",
        leaves.len()
    )))
}

/// The files of the series whose active file is `log`, in chain order.
fn series_files(log: &Path) -> Result<Vec<PathBuf>, ProofError> {
    let dir = log.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let name = series::file_name(log);
    let base = series::split_name(&name).0.to_owned();
    let found = series::discover(&[dir.to_path_buf()]).map_err(ProofError::Unreadable)?;
    found
        .into_iter()
        .find(|s| s.base == base)
        .map(|s| s.files)
        .ok_or_else(|| ProofError::Unreadable(format!("{}: no such log", log.display())))
}

/// The latest checkpoint in `file` (one per line) that carries a Merkle tree.
pub(crate) fn checkpoint_with_tree(file: &Path) -> Result<Checkpoint, ProofError> {
    let all = Checkpoint::read_all(file)
        .map_err(|e| ProofError::Unreadable(format!("{}: {e}", file.display())))?;
    all.into_iter()
        .rev()
        .find_map(|c| c.ok().filter(|c| c.tree().is_some()))
        .ok_or_else(|| {
            ProofError::Unprovable(format!(
                "{}: no checkpoint with a Merkle tree (written by fsgate before this release?)",
                file.display()
            ))
        })
}

fn note_of(cp: &Checkpoint) -> Result<String, ProofError> {
    cp.tree()
        .map(|(_, note)| note)
        .ok_or_else(|| ProofError::Unprovable("the checkpoint carries no tree".into()))
}

/// The inclusion proof of record `seq` of `log` against checkpoint `cp`.
pub(crate) fn prove_inclusion(log: &Path, seq: u64, cp: &Checkpoint) -> Result<String, ProofError> {
    if seq == 0 || seq > cp.seq {
        return Err(ProofError::Unprovable(format!(
            "seq {seq} is not covered by the checkpoint (records 1..{}); wait for the next checkpoint",
            cp.seq
        )));
    }
    let note = note_of(cp)?;
    let (leaves, line) = read_leaves(log, cp.seq, Some(seq))?;
    if merkle::root_of(&leaves) != SignedNote::parse(&note).map_err(unprovable)?.head.root {
        return Err(ProofError::Unprovable(
            "the log's records do not give the checkpoint's root: run `fsgate audit verify`".into(),
        ));
    }
    let line = line.ok_or_else(|| ProofError::Unprovable(format!("seq {seq} not found")))?;
    let path = merkle::inclusion_proof(&leaves, (seq - 1) as usize).unwrap_or_default();
    Ok(inclusion_text(&line, seq - 1, &path, &note))
}

/// An inclusion proof's text: record `line` at `index`, its path, the signed note.
pub(crate) fn inclusion_text(line: &[u8], index: u64, path: &[Hash], note: &str) -> String {
    let mut out = format!(
        "{INCLUSION_HEADER}\nextra {}\nindex {index}\n",
        B64.encode(line)
    );
    for h in path {
        out.push_str(&B64.encode(h));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(note);
    out
}

/// A consistency proof's text: the two signed notes and the path between them.
pub(crate) fn consistency_text(old_note: &str, new_note: &str, path: &[Hash]) -> String {
    let mut out = format!(
        "{CONSISTENCY_HEADER}\nold {}\nnew {}\n",
        B64.encode(old_note),
        B64.encode(new_note)
    );
    for h in path {
        out.push_str(&B64.encode(h));
        out.push('\n');
    }
    out
}

fn unprovable(e: impl std::fmt::Display) -> ProofError {
    ProofError::Unprovable(e.to_string())
}

/// The consistency proof from checkpoint `old` to checkpoint `new` of `log`.
pub(crate) fn prove_consistency(
    log: &Path,
    old: &Checkpoint,
    new: &Checkpoint,
) -> Result<String, ProofError> {
    if old.log != new.log || old.seq == 0 || old.seq > new.seq {
        return Err(ProofError::Unprovable(
            "the old checkpoint must be of the same log and no larger than the new one".into(),
        ));
    }
    let (old_note, new_note) = (note_of(old)?, note_of(new)?);
    let (leaves, _) = read_leaves(log, new.seq, None)?;
    let path = merkle::consistency_proof(&leaves, old.seq as usize).unwrap_or_default();
    Ok(consistency_text(&old_note, &new_note, &path))
}
