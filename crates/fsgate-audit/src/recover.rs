//! The start-up check: cut a torn last line (and say so in a `recovered` record), verify
//! the active file, its link to the last rotated file and the latest checkpoint, and
//! either refuse a broken log or set the damage aside behind a `break` record.

use std::io::Write;

use base64::Engine;
use fsgate_base::sha256::Sha256;
use serde_json::{Map, json};

use super::canonical;
use super::checkpoint::Checkpoint;
use super::io::Io;
use super::line::{self, LineInfo, check_line};
use super::record::{self, AuditEvent, GENESIS_PREV};
use super::series::{self, BROKEN_INFIX};
use super::signed::{SigStatus, check_signature};
use super::tombstone::Tombstone;
use crate::error::AuditError;

/// At most this many cut bytes are copied into the `recovered` record itself: their
/// base64 (4096 characters) is the longest string a record keeps whole
/// ([`super::cut::MAX_WHOLE`]).
const MAX_CUT_COPY: usize = super::cut::MAX_WHOLE / 4 * 3;

/// What the writer needs to continue the log.
pub(crate) struct Recovery {
    /// The log id, unless a new log starts.
    pub log_id: Option<String>,
    /// Seq and hash of the last record to chain on (`None`: genesis).
    pub head: Option<(u64, [u8; 32])>,
    /// Committed bytes in the active file.
    pub active_len: u64,
    /// Seq of the first record in the active file, if it has one.
    pub active_first_seq: Option<u64>,
    /// Seq of the checkpoint found (0 if none).
    pub checkpoint_seq: u64,
    /// `recovered` / `break` records to append first.
    pub events: Vec<AuditEvent>,
    /// `new`, `ok`, `recovered` or `break`: goes into the `start` record.
    pub check: &'static str,
    /// What did not verify (empty unless `check == "break"`).
    pub problems: Vec<String>,
    /// The active file's bytes as recovery leaves them: the intents search reuses them
    /// rather than read the file (up to 64 MiB) a second time.
    pub active: Vec<u8>,
}

/// What the files look like, before anything is changed.
struct Inspection {
    /// The active file's bytes, as found.
    original: Vec<u8>,
    /// End of the last complete line.
    complete_len: usize,
    /// End of the last record that verified and linked.
    good_len: usize,
    /// The last record that verified and linked (active file, else rotated tail).
    head: Option<LineInfo>,
    /// Seq of the active file's first record.
    active_first_seq: Option<u64>,
    /// The log id, if any file names it.
    log_id: Option<String>,
    /// Seq of the checkpoint found (0: none).
    checkpoint_seq: u64,
    /// Rotated files exist.
    rotated: bool,
    /// What does not verify.
    problems: Vec<String>,
}

/// Inspects the log and prepares (or refuses) its continuation. Changes files only to
/// cut a torn tail or, when `allow_broken` is set, to set damaged records aside.
pub(crate) fn apply(io: &mut Io, allow_broken: bool) -> Result<Recovery, AuditError> {
    let mut ins = inspect(io)?;
    let torn = &ins.original[ins.complete_len..];
    let mut events = Vec::new();
    let check;
    if !ins.problems.is_empty() {
        if !allow_broken {
            return Err(AuditError::BrokenChain {
                path: io.path_of(&io.name),
                report: ins.problems.join("; "),
            });
        }
        let aside = set_aside(io, &ins.original)?;
        cut(io, ins.good_len as u64)?;
        tracing::warn!(log = %io.path_of(&io.name).display(), set_aside = %aside, problems = ?ins.problems, "audit log did not verify; starting a new segment that records the break");
        let mut d = Map::new();
        d.insert("problems".into(), json!(ins.problems));
        d.insert("set_aside".into(), json!(aside));
        d.insert(
            "last_good_seq".into(),
            json!(ins.head.as_ref().map_or(0, |h| h.seq)),
        );
        d.insert(
            "cut_bytes".into(),
            json!((ins.original.len() - ins.good_len) as u64),
        );
        events.push(AuditEvent::lifecycle(record::KIND_BREAK, d));
        check = "break";
    } else if !torn.is_empty() {
        cut(io, ins.complete_len as u64)?;
        tracing::warn!(log = %io.path_of(&io.name).display(), bytes = torn.len(), "audit log had a torn last line; cut it off");
        let mut d = Map::new();
        d.insert("file".into(), json!(io.name));
        d.insert("at_offset".into(), json!(ins.complete_len as u64));
        d.insert("cut_bytes".into(), json!(torn.len() as u64));
        d.insert(
            "cut_sha256".into(),
            json!(hex::encode(Sha256::digest(torn))),
        );
        let copy = &torn[..torn.len().min(MAX_CUT_COPY)];
        d.insert(
            "cut_base64".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(copy)),
        );
        events.push(AuditEvent::lifecycle(record::KIND_RECOVERED, d));
        check = "recovered";
    } else if ins.head.is_none() && !ins.rotated {
        check = "new";
    } else {
        check = "ok";
    }
    let broke = check == "break";
    let good_len = if broke {
        ins.good_len
    } else {
        ins.complete_len
    };
    let mut active = std::mem::take(&mut ins.original);
    active.truncate(good_len);
    Ok(Recovery {
        // A break with nothing left to chain on starts a new log.
        log_id: if broke && ins.head.is_none() {
            None
        } else {
            ins.log_id
        },
        head: ins.head.as_ref().map(|h| (h.seq, h.hash)),
        active_len: good_len as u64,
        active_first_seq: if good_len > 0 {
            ins.active_first_seq
        } else {
            None
        },
        checkpoint_seq: if broke { 0 } else { ins.checkpoint_seq },
        events,
        check,
        problems: ins.problems,
        active,
    })
}

fn inspect(io: &Io) -> Result<Inspection, AuditError> {
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

/// A file of the log's directory, or nothing if it does not exist.
pub(crate) fn read_or_empty(io: &Io, name: &str) -> Result<Vec<u8>, AuditError> {
    match io.dir.read(name) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(AuditError::io("read", io.path_of(name), &e)),
    }
}

/// The rotated files of the log, oldest first: (first seq, name).
pub(crate) fn rotated_files(io: &Io) -> Result<Vec<(u64, String)>, AuditError> {
    let mut rotated: Vec<(u64, String)> = Vec::new();
    let entries = io
        .dir
        .entries()
        .map_err(|e| AuditError::io("list", &io.dir_path, &e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let (base, Some(seq)) = series::split_name(&name)
            && base == io.name
        {
            rotated.push((seq, name));
        }
    }
    rotated.sort();
    Ok(rotated)
}

/// The newest rotated file's last record (where the active file must continue) and the
/// log id its first record names.
fn rotated_tail(
    io: &Io,
    rotated: &[(u64, String)],
    problems: &mut Vec<String>,
) -> Result<(Option<LineInfo>, Option<String>), AuditError> {
    let Some((_, name)) = rotated.last() else {
        return Ok((None, None));
    };
    let mut scratch = Vec::new();
    let ends = file_ends(io, name)?;
    let log_id = ends
        .first
        .and_then(|first| check_line(&first, &mut scratch).ok())
        .and_then(|i| i.log);
    let head = match ends.last {
        Some(last) => match check_line(&last, &mut scratch) {
            Ok(info) => Some(info),
            Err(f) => {
                problems.push(format!("{name}: last record does not verify: {f}"));
                None
            }
        },
        None => {
            problems.push(format!("{name}: rotated file is empty or torn"));
            None
        }
    };
    Ok((head, log_id))
}

/// A file's first and last complete lines (without their `\n`).
#[derive(Debug, Default, PartialEq)]
struct Ends {
    first: Option<Vec<u8>>,
    /// `None` when the file is empty or does not end with `\n` (torn).
    last: Option<Vec<u8>>,
}

/// Bytes read at a time from either end of a rotated file.
const END_WINDOW: u64 = 64 * 1024;

/// Reads a rotated file's first and last lines from its two ends: a rotated file holds up
/// to `max_file_bytes`, and start-up needs only those two records of it.
fn file_ends(io: &Io, name: &str) -> Result<Ends, AuditError> {
    let err = |e: &std::io::Error| AuditError::io("read", io.path_of(name), e);
    match io.dir.open(name) {
        Ok(f) => ends_of(&f.into_std(), END_WINDOW).map_err(|e| err(&e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Ends::default()),
        Err(e) => Err(err(&e)),
    }
}

/// [`file_ends`] on an open file, reading `window` bytes first at each end and doubling
/// while a line is longer.
fn ends_of(file: &std::fs::File, window: u64) -> std::io::Result<Ends> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let read = |start: u64, end: u64| -> std::io::Result<Vec<u8>> {
        let size = usize::try_from(end - start).map_err(std::io::Error::other)?;
        let mut buf = vec![0u8; size];
        file.read_exact_at(&mut buf, start)?;
        Ok(buf)
    };
    let mut ends = Ends::default();
    let mut w = window.max(1);
    loop {
        let head = read(0, len.min(w))?;
        if let Some(nl) = memchr::memchr(b'\n', &head) {
            ends.first = Some(head[..nl].to_vec());
            break;
        }
        if w >= len {
            return Ok(ends);
        }
        w = w.saturating_mul(2);
    }
    w = window.max(1);
    loop {
        let start = len.saturating_sub(w);
        let tail = read(start, len)?;
        let Some((&b'\n', body)) = tail.split_last() else {
            return Ok(ends);
        };
        match memchr::memrchr(b'\n', body) {
            Some(nl) => ends.last = Some(body[nl + 1..].to_vec()),
            None if start == 0 => ends.last = Some(body.to_vec()),
            None => {
                w = w.saturating_mul(2);
                continue;
            }
        }
        return Ok(ends);
    }
}

/// The checkpoint beside the log, and the newest checkpoint per log in the sink (which
/// keeps every one: deleting the file beside the log cannot hide a cut-off tail).
fn checkpoints(
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

/// What the walk over the active file found.
#[derive(Default)]
struct Active {
    /// End of the last record that verified and linked.
    good_len: usize,
    /// Seq of the active file's first record.
    first_seq: Option<u64>,
    /// The log id the first record names.
    log_id: Option<String>,
    /// Hashes of the records the checkpoints name.
    hashes_at: Vec<(u64, [u8; 32])>,
}

/// Checks and links every complete line of the active file onto `head`, stopping at the
/// first that does not verify or link (said in `problems`).
fn walk_active(
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

/// The checkpoint must be signed by our key (when we have one), name our log, and match
/// the chain at its seq.
fn check_checkpoint(
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

/// The hash of record `seq` in the rotated files, if it is still there.
fn hash_in_rotated(
    io: &Io,
    rotated: &[(u64, String)],
    seq: u64,
) -> Result<Option<[u8; 32]>, AuditError> {
    let Some((_, name)) = rotated.iter().rev().find(|(first, _)| *first <= seq) else {
        return Ok(None);
    };
    let bytes = io
        .dir
        .read(name)
        .map_err(|e| AuditError::io("read", io.path_of(name), &e))?;
    let mut scratch = Vec::new();
    for (_, line) in line::lines(&bytes) {
        if let Ok(info) = check_line(line, &mut scratch)
            && info.seq == seq
        {
            return Ok(Some(info.hash));
        }
    }
    Ok(None)
}

/// Whether a tombstone says records up to `seq` (ending with `hash`) were pruned.
fn tombstone_covers(io: &Io, seq: u64, hash: &[u8; 32]) -> bool {
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

/// Copies the whole active file to `NAME.broken-<time>`; returns that name.
fn set_aside(io: &Io, original: &[u8]) -> Result<String, AuditError> {
    let stamp: String = canonical::now_ts()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let mut name = format!("{}{BROKEN_INFIX}{stamp}", io.name);
    let mut n = 1;
    while io.dir.exists(&name) {
        n += 1;
        name = format!("{}{BROKEN_INFIX}{stamp}-{n}", io.name);
    }
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    let mut f = io
        .dir
        .open_with(&name, &opts)
        .map_err(|e| AuditError::io("create", io.path_of(&name), &e))?;
    f.write_all(original)
        .and_then(|()| f.sync_all())
        .map_err(|e| AuditError::io("write", io.path_of(&name), &e))?;
    super::checkpoint::sync_dir(&io.dir).map_err(|e| AuditError::io("sync", &io.dir_path, &e))?;
    Ok(name)
}

/// Cuts the active file to `len` bytes, durably.
fn cut(io: &Io, len: u64) -> Result<(), AuditError> {
    io.file
        .set_len(len)
        .and_then(|()| io.file.sync_all())
        .map_err(|e| AuditError::io("truncate", io.path_of(&io.name), &e))
}

/// The last checkpoint written for each log in a sink's history (the sink only grows:
/// after an accepted break, the new chain's checkpoints come last, even at lower seqs).
fn newest_per_log(all: impl Iterator<Item = Checkpoint>) -> Vec<Checkpoint> {
    let mut newest: std::collections::HashMap<String, Checkpoint> = Default::default();
    for cp in all {
        newest.insert(cp.log.clone(), cp);
    }
    newest.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What start-up read before: the whole file, then its first and last complete lines.
    fn ends_by_whole_read(bytes: &[u8]) -> Ends {
        let first = line::lines(bytes).next().map(|(_, l)| l.to_vec());
        let last = match line::lines(bytes).last() {
            Some((_, l)) if bytes.ends_with(b"\n") => Some(l.to_vec()),
            _ => None,
        };
        Ends { first, last }
    }

    fn ends_in_file(bytes: &[u8], window: u64) -> Ends {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        ends_of(&f, window).unwrap()
    }

    #[test]
    fn the_two_ends_of_a_file_are_its_first_and_last_lines() {
        let ends = ends_in_file(b"one\ntwo\nthree\n", 4);
        assert_eq!(ends.first.as_deref(), Some(&b"one"[..]));
        assert_eq!(ends.last.as_deref(), Some(&b"three"[..]));
        let torn = ends_in_file(b"one\ntwo\nthr", 4);
        assert_eq!(torn.first.as_deref(), Some(&b"one"[..]));
        assert_eq!(torn.last, None);
        assert_eq!(ends_in_file(b"", 4), Ends::default());
        assert_eq!(ends_in_file(b"no newline", 4), Ends::default());
    }

    proptest! {
        #[test]
        fn ends_read_from_both_sides_match_a_whole_read(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), any::<u8>()], 0..300),
            window in 1u64..40,
        ) {
            prop_assert_eq!(ends_in_file(&bytes, window), ends_by_whole_read(&bytes));
        }
    }
}
