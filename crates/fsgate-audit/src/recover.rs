//! The start-up check: cut a torn last line (and say so in a `recovered` record), verify
//! the active file, its link to the last rotated file and the latest checkpoint, and
//! either refuse a broken log or set the damage aside behind a `break` record.
//!
//! This file decides what start-up does with what it found; `inspect`: what the files
//! look like; `rotated`: the rotated files (their ends, a record's hash in them);
//! `active`: the walk over the active file; `checkpoints`: the checkpoints beside the
//! log and in the sink, checked against the chain.

mod active;
mod checkpoints;
mod inspect;
pub(crate) mod rotated;

use std::io::Write;

use base64::Engine;
use fsgate_base::sha256::Sha256;
use serde_json::{Map, json};

use crate::canonical;
use crate::error::AuditError;
use crate::io::Io;
use crate::record::{self, AuditEvent};
use crate::series::BROKEN_INFIX;
use inspect::inspect;

/// At most this many cut bytes are copied into the `recovered` record itself: their
/// base64 (4096 characters) is the longest string a record keeps whole
/// ([`crate::cut::MAX_WHOLE`]).
const MAX_CUT_COPY: usize = crate::cut::MAX_WHOLE / 4 * 3;

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
    crate::checkpoint::sync_dir(&io.dir).map_err(|e| AuditError::io("sync", &io.dir_path, &e))?;
    Ok(name)
}

/// Cuts the active file to `len` bytes, durably.
fn cut(io: &Io, len: u64) -> Result<(), AuditError> {
    io.file
        .set_len(len)
        .and_then(|()| io.file.sync_all())
        .map_err(|e| AuditError::io("truncate", io.path_of(&io.name), &e))
}
