//! What an intent record says the change does: its operation, paths and backups read
//! into a [`What`].

use serde_json::Value;

use fsgate_audit::record::ChangeOp;
use fsgate_base::path::RelPath;

use super::change::{Before, Removed, Saved, What};

pub(super) fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// A workspace-relative path from the log, normalised (None if it is none).
pub(super) fn rel(p: &str) -> Option<String> {
    RelPath::parse_rooted(&format!("/{p}"))
        .ok()
        .filter(|r| !r.is_root())
        .map(|r| r.as_str().to_owned())
}

/// Whether record `v` was written by `fsgate undo`: transport `cli` (the command line's
/// own records; no door writes it) and `args.undo` (which `fsgate backup restore`'s
/// records lack).
pub(crate) fn by_undo(v: &Value) -> bool {
    text(v, "transport") == "cli" && v["args"].get("undo").is_some()
}

/// The change an intent record announces.
pub(crate) fn what_of(v: &Value) -> Result<What, String> {
    let args = &v["args"];
    let real = |k: &str, field: &str| {
        let p = args.get(k).or(v.get(field)).and_then(Value::as_str);
        match p {
            None => Err(format!("no `{field}` in the record")),
            Some(p) => rel(p).ok_or_else(|| format!("its `{field}` {p:?} is no workspace path")),
        }
    };
    let count = |k: &str| {
        args.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let backup = v.get("backup").and_then(Value::as_str).map(str::to_owned);
    let before = match (&backup, args.get("noBackup")) {
        (Some(id), _) => Before::Saved(Saved {
            id: id.clone(),
            sha256: args
                .get("oldSha256")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        (None, Some(_)) => Before::Unsaved,
        (None, None) => Before::Absent,
    };
    let op = text(v, "op");
    let Some(change) = ChangeOp::from_name(op) else {
        return Err(format!("`{op}` is not a change fsgate knows how to undo"));
    };
    match change {
        ChangeOp::Write | ChangeOp::Edit | ChangeOp::Restore => Ok(What::Content {
            path: real("realPath", "path")?,
            sha256: v
                .get("sha256")
                .and_then(Value::as_str)
                .ok_or("no `sha256` in the record")?
                .to_owned(),
            before,
            made_dirs: count("madeDirs").unwrap_or(0),
        }),
        ChangeOp::Mkdir => Ok(What::Mkdir {
            path: real("realPath", "path")?,
            made: count("madeDirs").unwrap_or(1).max(1),
        }),
        ChangeOp::Rm => Ok(removal(v, real("realPath", "path")?, backup)),
        ChangeOp::Rename => Ok(What::Rename {
            from: real("realPath", "path")?,
            to: real("realPath2", "path2")?,
            replaced: (before != Before::Absent).then_some(before),
            link: arg_text(args, "target"),
            replaced_link: arg_text(args, "oldTarget"),
        }),
        ChangeOp::Chmod => {
            let bits = |k: &str| {
                args.get(k)
                    .and_then(Value::as_str)
                    .and_then(|m| u32::from_str_radix(m, 8).ok())
                    .ok_or_else(|| format!("no octal `args.{k}` in the record"))
            };
            Ok(What::Chmod {
                path: real("realPath", "path")?,
                old: bits("oldMode")?,
                new: bits("mode")?,
            })
        }
        ChangeOp::Symlink => Ok(What::Symlink {
            path: real("realPath", "path")?,
        }),
        ChangeOp::Utimes => {
            let ns = |k: &str| {
                args.get(k)
                    .and_then(Value::as_i64)
                    .ok_or_else(|| format!("no `args.{k}` in the record"))
            };
            Ok(What::Utimes {
                path: real("realPath", "path")?,
                atime: ns("oldAtime")?,
                mtime: ns("oldMtime")?,
            })
        }
    }
}

fn arg_text(args: &Value, k: &str) -> Option<String> {
    args.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn removal(v: &Value, path: String, first: Option<String>) -> What {
    let args = &v["args"];
    let strings = |k: &str| -> Vec<String> {
        args.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut backups = strings("backups");
    if backups.is_empty() {
        backups.extend(first);
    }
    let removed = match text(args, "removed") {
        "file" => Removed::File,
        "directory" => Removed::Dir,
        "link" | "other" => Removed::Link,
        _ => Removed::Unknown,
    };
    let unsaved = args
        .get("noBackup")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    What::Remove {
        path,
        removed,
        backups,
        leaf_dirs: strings("leafDirs").iter().filter_map(|p| rel(p)).collect(),
        unsaved,
        sha256: args
            .get("oldSha256")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn intent(seq: u64, session: &str, op: &str, extra: Value) -> Value {
        let mut v = json!({"seq": seq, "ts": "2026-01-01T00:00:00.000000Z", "kind": "intent",
            "session": session, "op": op, "decision": "allow"});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        v
    }

    #[test]
    fn removals_say_what_they_removed() {
        let v = intent(
            1,
            "a",
            "rm",
            json!({"path": "d", "backup": "d%2Fx/1", "args": {"removed": "directory",
                   "backups": ["d%2Fx/1", "d%2Fy/1"], "backupCount": 2,
                   "leafDirs": ["d/e", "../bad"]}}),
        );
        assert_eq!(
            what_of(&v).unwrap(),
            What::Remove {
                path: "d".into(),
                removed: Removed::Dir,
                backups: vec!["d%2Fx/1".into(), "d%2Fy/1".into()],
                leaf_dirs: vec!["d/e".into()],
                unsaved: 0,
                sha256: None,
            }
        );
        let link = intent(
            1,
            "a",
            "rm",
            json!({"path": "l", "args": {"removed": "link"}}),
        );
        assert!(matches!(
            what_of(&link).unwrap(),
            What::Remove {
                removed: Removed::Link,
                ..
            }
        ));
        let odd = intent(1, "a", "grep", json!({"path": "l"}));
        assert!(what_of(&odd).is_err());
        let escape = intent(1, "a", "mkdir", json!({"path": "../x"}));
        assert!(what_of(&escape).is_err());
    }
}
