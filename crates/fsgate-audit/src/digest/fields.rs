//! Reading a record's fields for the digest: a number, the change a request or intent
//! record describes, what an `undo` record says.

use serde_json::Value;

use super::items::{Change, UndoRun};
use crate::rows::text;

pub(super) fn num(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

/// The change a request or intent record describes (without what only the intent says).
pub(super) fn change_of(log: usize, v: &Value, verified: bool) -> Change {
    let args = &v["args"];
    Change {
        log,
        seq: num(v, "seq").unwrap_or_default(),
        ts: text(v, "ts").to_owned(),
        session: text(v, "session").to_owned(),
        op: text(v, "op").to_owned(),
        path: text(v, "path").to_owned(),
        other: v
            .get("path2")
            .and_then(Value::as_str)
            .map(|_| (text(v, "path2").to_owned(), false)),
        outcome: text(v, "outcome").to_owned(),
        bytes: num(v, "bytes"),
        sha256: text(v, "sha256").to_owned(),
        old_sha256: String::new(),
        backup: text(v, "backup").to_owned(),
        backup_count: 0,
        restored_from: text(args, "restoredFrom").to_owned(),
        undo: text(args, "undo").to_owned(),
        verified,
    }
}

/// What an `undo` record says.
pub(super) fn undo_run(v: &Value) -> UndoRun {
    let d = &v["details"];
    let range = match (text(d, "since"), text(d, "until")) {
        ("", "") => String::new(),
        (s, u) => format!("{s} .. {u}"),
    };
    let count = |k: &str| num(d, k).unwrap_or_default();
    let left = ["skipped", "failed"]
        .iter()
        .filter_map(|k| d.get(*k).and_then(Value::as_array))
        .flatten()
        .map(|e| (text(e, "path").to_owned(), text(e, "why").to_owned()))
        .collect();
    UndoRun {
        seq: num(v, "seq").unwrap_or_default(),
        ts: text(v, "ts").to_owned(),
        undo: text(d, "undo").to_owned(),
        range,
        force: d.get("force").and_then(Value::as_bool).unwrap_or(false),
        counts: [
            count("undoneCount"),
            count("alreadyCount"),
            count("skippedCount"),
            count("failedCount"),
        ],
        left,
    }
}
