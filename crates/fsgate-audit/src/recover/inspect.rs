//! What the log's files look like before anything is changed: the active file's
//! complete and good lengths, the head to chain on, the checkpoint that judges it, and
//! every problem found on the way.

use super::active::{Active, walk_active};
use super::checkpoints::{check_checkpoint, checkpoints};
use super::rotated::{read_or_empty, rotated_files, rotated_tail};
use crate::error::AuditError;
use crate::io::Io;
use crate::line::LineInfo;

/// What the files look like, before anything is changed.
pub(super) struct Inspection {
    /// The active file's bytes, as found.
    pub(super) original: Vec<u8>,
    /// End of the last complete line.
    pub(super) complete_len: usize,
    /// End of the last record that verified and linked.
    pub(super) good_len: usize,
    /// The last record that verified and linked (active file, else rotated tail).
    pub(super) head: Option<LineInfo>,
    /// Seq of the active file's first record.
    pub(super) active_first_seq: Option<u64>,
    /// The log id, if any file names it.
    pub(super) log_id: Option<String>,
    /// Seq of the checkpoint found (0: none).
    pub(super) checkpoint_seq: u64,
    /// Rotated files exist.
    pub(super) rotated: bool,
    /// What does not verify.
    pub(super) problems: Vec<String>,
}

pub(super) fn inspect(io: &Io) -> Result<Inspection, AuditError> {
    let original = read_or_empty(io, &io.name)?;
    let complete_len = original
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let mut problems = Vec::new();
    let rotated = rotated_files(io)?;
    let (mut head, mut log_id) = rotated_tail(io, &rotated, &mut problems)?;
    let (checkpoint, sink_cps) = checkpoints(io, &mut problems)?;
    // The checkpoints name seqs whose hashes we must meet on the way.
    let wanted: Vec<u64> = checkpoint.iter().chain(&sink_cps).map(|c| c.seq).collect();
    let mut active = Active::default();
    if problems.is_empty() {
        active = walk_active(
            io,
            &original[..complete_len],
            &wanted,
            &mut head,
            &mut problems,
        );
        if active.first_seq.is_some() && active.log_id.is_some() {
            log_id.clone_from(&active.log_id);
        }
    }
    // Judge the log by the newest checkpoint that names it: beside it, or in the sink.
    let from_sink = log_id
        .as_ref()
        .and_then(|id| sink_cps.iter().find(|c| &c.log == id).cloned());
    let checkpoint = match (checkpoint, from_sink) {
        (Some(f), Some(s)) if s.seq > f.seq => Some(s),
        (None, Some(s)) => Some(s),
        (f, _) => f,
    };
    if let Some(cp) = &checkpoint {
        let seen = active
            .hashes_at
            .iter()
            .find(|(seq, _)| *seq == cp.seq)
            .map(|(_, h)| *h);
        check_checkpoint(io, cp, &head, &rotated, seen, &log_id, &mut problems)?;
    }
    Ok(Inspection {
        complete_len,
        good_len: active.good_len,
        active_first_seq: active.first_seq,
        log_id,
        checkpoint_seq: checkpoint.as_ref().map_or(0, |c| c.seq),
        rotated: !rotated.is_empty(),
        head,
        original,
        problems,
    })
}
