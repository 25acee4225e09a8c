//! `--trusted`: the head remembered from an earlier verification, which the log must
//! still extend (and which is then remembered anew).

use std::path::Path;

use serde_json::{Value, json};

use crate::canonical;
use crate::report::FailureKind;
use crate::verify_run::Run;

/// The remembered head of an earlier verification.
pub(super) struct Trusted {
    /// Its log id.
    pub(super) log: String,
    /// The head seq it saw.
    pub(super) seq: u64,
    /// The head hash it saw.
    pub(super) hash: String,
}

pub(super) fn read_trusted(p: &Path) -> Result<Option<Trusted>, String> {
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

pub(super) fn check_trusted(run: &mut Run<'_>, p: &Path, trusted: Option<Trusted>) {
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
