//! The walk over the active file: every complete line checked and linked onto the head,
//! up to the first that does not verify or link.

use super::checkpoints::tombstone_covers;
use crate::io::Io;
use crate::line::{self, LineInfo, check_line};
use crate::record::GENESIS_PREV;

/// What the walk over the active file found.
#[derive(Default)]
pub(super) struct Active {
    /// End of the last record that verified and linked.
    pub(super) good_len: usize,
    /// Seq of the active file's first record.
    pub(super) first_seq: Option<u64>,
    /// The log id the first record names.
    pub(super) log_id: Option<String>,
    /// Hashes of the records the checkpoints name.
    pub(super) hashes_at: Vec<(u64, [u8; 32])>,
}

/// Checks and links every complete line of the active file onto `head`, stopping at the
/// first that does not verify or link (said in `problems`).
pub(super) fn walk_active(
    io: &Io,
    complete: &[u8],
    wanted: &[u64],
    head: &mut Option<LineInfo>,
    problems: &mut Vec<String>,
) -> Active {
    let mut active = Active::default();
    let mut scratch = Vec::new();
    for (start, line) in line::lines(complete) {
        let info = match check_line(line, &mut scratch) {
            Ok(info) => info,
            Err(f) => {
                problems.push(format!("{} at byte {start}: {f}", io.name));
                break;
            }
        };
        let links = match head.as_ref() {
            Some(h) => info.seq == h.seq + 1 && info.prev == h.hash,
            None => {
                info.prev == GENESIS_PREV
                    || tombstone_covers(io, info.seq.wrapping_sub(1), &info.prev)
            }
        };
        if !links {
            problems.push(match head.as_ref() {
                Some(h) => format!(
                    "{} seq {} does not follow seq {} (missing, reordered or altered records)",
                    io.name, info.seq, h.seq
                ),
                None => format!(
                    "{} starts at seq {} without genesis and no tombstone covers the records before it",
                    io.name, info.seq
                ),
            });
            break;
        }
        if active.first_seq.is_none() {
            active.first_seq = Some(info.seq);
            active.log_id.clone_from(&info.log);
        }
        if wanted.contains(&info.seq) {
            active.hashes_at.push((info.seq, info.hash));
        }
        active.good_len = start + line.len() + 1;
        *head = Some(info);
    }
    active
}
