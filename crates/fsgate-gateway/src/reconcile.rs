//! Start-up reconciliation: a change whose intent is in the log but whose outcome is not
//! (the process died in between) is looked up on disk, and a `reconciled` record says
//! what the disk shows, before anything is served.

use fsgate_workspace::FileKind;
use std::io::Read;

use fsgate_base::sha256::Sha256;
use serde_json::{Map, Value, json};

use crate::crash::{Disk, Found, OnDisk};
use crate::gateway::Gateway;
use fsgate_audit::{AuditEvent, ChangeOp, Intent, KIND_RECONCILED};
use fsgate_base::path::RelPath;
use fsgate_workspace::{Workspace, WsError};

/// Says what a start found for one intent: a change whose outcome was recorded while
/// its directory entry was synced, found applied, is the expected case after a crash.
fn log_reconciled(intent: &Intent, found: Found) {
    let (seq, op, found_as) = (intent.seq, &intent.op, found.as_str());
    match (intent.outcome, found) {
        (Some(outcome), Found::Applied) => tracing::info!(
            intent = seq, outcome, op = %op, found = found_as,
            "reconciled a change whose directory entry was not yet known durable: it is on disk"
        ),
        (Some(outcome), _) => tracing::warn!(
            intent = seq, outcome, op = %op, found = found_as,
            "a change recorded as made (outcome record {outcome}) is not on disk after a crash: its directory entry did not reach the disk"
        ),
        (None, _) => tracing::warn!(
            intent = seq, op = %op, found = found_as,
            "reconciled a change interrupted by a crash"
        ),
    }
}

impl Gateway {
    /// Appends a `reconciled` record for every intent the log found open at start-up.
    /// Call before serving: Err (a record could not be written) means do not serve.
    pub fn reconcile(&self) -> Result<usize, String> {
        let Some(audit) = self.audit() else {
            return Ok(0);
        };
        for intent in audit.open_intents() {
            let mut details = Map::new();
            details.insert("intent".into(), json!(intent.seq));
            // Several workspaces: the intent is looked up in its own; in none when that
            // one is not served now (a path of it means nothing in another).
            let found = match member_named(self, intent.workspace.as_deref()) {
                Some(ws) => {
                    let (found, seen) = inspect(&ws.workspace, intent);
                    details.insert("onDisk".into(), Value::Object(seen));
                    if let Some(temp) = clear_temp(ws, intent) {
                        details.insert("tempFile".into(), temp);
                    }
                    found
                }
                None => {
                    details.insert("workspaceNotServed".into(), json!(intent.workspace));
                    Found::Neither
                }
            };
            details.insert("found".into(), json!(found.as_str()));
            if let Some(seq) = intent.outcome {
                details.insert("outcomeSeq".into(), json!(seq));
            }
            log_reconciled(intent, found);
            let ev = AuditEvent {
                kind: KIND_RECONCILED.into(),
                op: intent.op.clone(),
                path: intent.path.clone(),
                path2: intent.path2.clone(),
                details,
                ..AuditEvent::default()
            };
            audit.append(ev).map_err(|e| {
                format!(
                    "cannot record the reconciliation of intent {}: {e}",
                    intent.seq
                )
            })?;
        }
        Ok(audit.open_intents().len())
    }
}

/// The workspace an intent names among those `gw` serves: the first when it names none.
fn member_named<'g>(gw: &'g Gateway, name: Option<&str>) -> Option<&'g Gateway> {
    match name {
        None => Some(gw),
        Some(n) => gw.members().find(|m| m.name() == Some(n)),
    }
}

/// Compares the disk of `ws` with the intent; also says what was seen, for the record.
/// What a crash may have left is the change's own to judge (see
/// [`crate::ops::found_after_crash`]).
fn inspect(ws: &Workspace, intent: &Intent) -> (Found, Map<String, Value>) {
    let path = on_disk(ws, intent.real_path.as_deref().or(intent.path.as_deref()));
    let named2 = intent.real_path2.as_deref().or(intent.path2.as_deref());
    let path2 = named2.map(|p| on_disk(ws, Some(p)));
    let mut seen = Map::new();
    seen.insert("path".into(), path.describe());
    if let Some(to) = &path2 {
        seen.insert("path2".into(), to.describe());
    }
    let at = intent
        .real_path
        .as_deref()
        .or(intent.path.as_deref())
        .and_then(|p| RelPath::parse_rooted(&format!("/{p}")).ok());
    let mode = (intent.mode.as_ref().and(at.as_ref())).and_then(|rel| ws.mode_of(rel).ok());
    let mtime = (intent.mtime.as_ref().and(at.as_ref()))
        .and_then(|rel| ws.times_of(rel).ok())
        .map(|t| t.mtime);
    let disk = Disk {
        intent,
        path,
        path2: path2.unwrap_or(OnDisk::Other),
        mode,
        mtime,
    };
    let found = crate::ops::found_after_crash(ChangeOp::from_name(&intent.op), &disk);
    (found, seen)
}

/// A write interrupted between naming its temporary file and renaming it over the
/// target leaves that file: it is backed up, then removed (in `gw`'s workspace), by the
/// exact name its intent recorded (never by a pattern). What was done is returned for
/// the record.
fn clear_temp(gw: &Gateway, intent: &Intent) -> Option<Value> {
    let name = intent.temp_name.as_deref()?;
    let at = intent.real_path.as_deref().or(intent.path.as_deref())?;
    let path = RelPath::parse_rooted(&format!("/{at}")).ok()?;
    let dir = path.parent().unwrap_or_default();
    let temp = RelPath::parse_rooted(&format!("/{}/{name}", dir.as_str())).ok()?;
    if temp.parent().as_ref() != Some(&dir) || temp.file_name() != Some(name) {
        return None; // Not one plain name in that directory: not ours.
    }
    let info = gw.workspace.stat(&temp).ok()?;
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    let ours = info.kind == FileKind::File && info.nlink == 1;
    let mut facts = crate::facts::Facts::default();
    let removed = ours
        && gw.saver().backup(&temp, name, &mut facts).is_ok()
        && gw
            .workspace
            .remove(&temp, fsgate_workspace::Removal::File)
            .is_ok();
    out.insert("removed".into(), json!(removed));
    if let Some(id) = facts.backups.first() {
        out.insert("backup".into(), json!(id));
    }
    if !removed {
        tracing::warn!(file = %temp, "a temporary file left by a crash was kept");
    }
    Some(Value::Object(out))
}

/// What `ws` holds at `path` now.
fn on_disk(ws: &Workspace, path: Option<&str>) -> OnDisk {
    let Some(rel) = path.and_then(|p| RelPath::parse_rooted(&format!("/{p}")).ok()) else {
        return OnDisk::Other;
    };
    match ws.stat(&rel) {
        Err(WsError::NotFound) => OnDisk::Missing,
        // A final link (ELOOP): what it holds.
        Err(WsError::Raced) => match ws.lstat(&rel) {
            Ok(info) => info.target.map_or(OnDisk::Other, OnDisk::Link),
            Err(_) => OnDisk::Other,
        },
        Err(_) => OnDisk::Other,
        Ok(info) if info.kind == FileKind::Directory => OnDisk::Dir,
        Ok(info) if info.kind == FileKind::File => match hash_file(ws, &rel) {
            Some(h) => OnDisk::File(h),
            None => OnDisk::Other,
        },
        Ok(_) => OnDisk::Other,
    }
}

/// The SHA-256 of the regular file `rel` of `ws`, if it can be read.
fn hash_file(ws: &Workspace, rel: &RelPath) -> Option<String> {
    let (mut file, _) = ws.open_regular(rel).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(hex::encode(hasher.finalize())),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

impl OnDisk {
    fn describe(&self) -> Value {
        match self {
            OnDisk::Missing => json!("missing"),
            OnDisk::File(h) => json!({ "sha256": h }),
            OnDisk::Dir => json!("directory"),
            OnDisk::Link(to) => json!({ "link": to.to_string_lossy() }),
            OnDisk::Other => json!("other"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_audit::{AuditLog, AuditSettings, KIND_INTENT, OpenOptions};
    use fsgate_policy::Policy;
    use fsgate_workspace::Workspace;

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    fn intent(
        op: &str,
        path: &str,
        path2: Option<&str>,
        new: Option<&[u8]>,
        old: Option<&[u8]>,
    ) -> AuditEvent {
        let mut args = Map::new();
        if let Some(old) = old {
            args.insert("oldSha256".into(), json!(sha(old)));
        }
        AuditEvent {
            kind: KIND_INTENT.into(),
            op: op.into(),
            path: Some(path.into()),
            path2: path2.map(str::to_owned),
            sha256: new.map(sha),
            args,
            ..AuditEvent::default()
        }
    }

    fn open(log: &std::path::Path) -> AuditLog {
        AuditLog::open(log, &AuditSettings::default(), "p", OpenOptions::default()).unwrap()
    }

    #[test]
    fn intents_left_open_by_a_crash_are_reconciled_once_against_the_disk() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log = state.path().join("audit.jsonl");
        std::fs::write(ws.path().join("written.txt"), "new").unwrap();
        std::fs::write(ws.path().join("kept.txt"), "old").unwrap();
        std::fs::write(ws.path().join("moved.txt"), "m").unwrap();
        let cases = [
            (
                intent(
                    "write_text_file",
                    "written.txt",
                    None,
                    Some(b"new"),
                    Some(b"old"),
                ),
                "applied",
            ),
            (
                intent(
                    "write_text_file",
                    "kept.txt",
                    None,
                    Some(b"new"),
                    Some(b"old"),
                ),
                "not-applied",
            ),
            (
                intent(
                    "write_text_file",
                    "other.txt",
                    None,
                    Some(b"new"),
                    Some(b"old"),
                ),
                "neither",
            ),
            (intent("mkdir", "d", None, None, None), "not-applied"),
            (
                intent("rm", "kept.txt", None, None, Some(b"old")),
                "not-applied",
            ),
            (
                intent("rm", "gone.txt", None, None, Some(b"old")),
                "applied",
            ),
            (
                intent("rename", "src.txt", Some("moved.txt"), None, None),
                "applied",
            ),
        ];
        {
            let a = open(&log);
            for (ev, _) in &cases {
                a.append_ref(ev).unwrap();
            }
            // Dropped without close: as after kill -9, no stop record.
        }
        let a = open(&log);
        assert_eq!(a.open_intents().len(), cases.len());
        let gw = Gateway::new(
            Policy::builtin_default().unwrap(),
            Workspace::open(ws.path()).unwrap(),
        )
        .with_audit(a);
        assert_eq!(gw.reconcile().unwrap(), cases.len());
        drop(gw);
        let text = std::fs::read_to_string(&log).unwrap();
        let found: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["kind"] == "reconciled")
            .map(|r| r["details"]["found"].as_str().unwrap().to_owned())
            .collect();
        let want: Vec<&str> = cases.iter().map(|(_, f)| *f).collect();
        assert_eq!(found, want);
        // Reconciled once: the next start finds nothing open.
        assert!(open(&log).open_intents().is_empty());
    }

    /// The intent of a write to `path` (old -> new) that may have left `temp`.
    fn interrupted_write(path: &str, temp: &str) -> AuditEvent {
        let mut ev = intent("write_text_file", path, None, Some(b"new"), Some(b"old"));
        ev.args.insert("tempName".into(), json!(temp));
        ev
    }

    /// Starts on a log holding only `ev` (left open by a crash), reconciles it against
    /// the workspace `ws`, and returns the `reconciled` record.
    fn reconcile_one(ws: &std::path::Path, ev: &AuditEvent) -> Value {
        let state = tempfile::tempdir().unwrap();
        let log = state.path().join("audit.jsonl");
        open(&log).append_ref(ev).unwrap();
        let gw = Gateway::new(
            Policy::builtin_default().unwrap(),
            Workspace::open(ws).unwrap(),
        )
        .with_audit(open(&log));
        assert_eq!(gw.reconcile().unwrap(), 1);
        drop(gw);
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["kind"] == "reconciled")
            .unwrap()
    }

    /// A link made before the crash is applied when it leads where the intent says;
    /// nothing there is not applied; a link elsewhere is neither.
    #[test]
    fn a_symlink_cut_short_by_a_crash_is_judged_by_its_target() {
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("a.txt", ws.path().join("made")).unwrap();
        std::os::unix::fs::symlink("b.txt", ws.path().join("other")).unwrap();
        for (path, found) in [
            ("made", "applied"),
            ("missing", "not-applied"),
            ("other", "neither"),
        ] {
            let mut ev = intent("symlink", path, None, None, None);
            ev.args.insert("target".into(), json!("a.txt"));
            let rec = reconcile_one(ws.path(), &ev);
            assert_eq!(rec["details"]["found"], found, "{path}: {rec}");
        }
    }

    /// A link's rename over another link: applied when the source is gone and the
    /// destination leads where the moved link led; not applied when the source is
    /// there and the destination still holds the old link; anything else is neither.
    #[test]
    fn a_link_rename_cut_short_by_a_crash_is_judged_by_both_targets() {
        let ws = tempfile::tempdir().unwrap();
        let link = |to: &str, at: &str| std::os::unix::fs::symlink(to, ws.path().join(at));
        for (to, at) in [("b.txt", "moved"), ("b.txt", "tmp"), ("a.txt", "l")] {
            link(to, at).unwrap();
        }
        for (to, at) in [("b.txt", "tmp2"), ("c.txt", "l2"), ("b.txt", "tmp3")] {
            link(to, at).unwrap();
        }
        for (from, to, found) in [
            ("gone", "moved", "applied"),
            ("tmp", "l", "not-applied"),
            ("tmp2", "l2", "neither"),
            ("tmp3", "free", "neither"),
        ] {
            let mut ev = intent("rename", from, Some(to), None, None);
            ev.args.insert("target".into(), json!("b.txt"));
            ev.args.insert("oldTarget".into(), json!("a.txt"));
            let rec = reconcile_one(ws.path(), &ev);
            assert_eq!(rec["details"]["found"], found, "{from} -> {to}: {rec}");
        }
    }

    #[test]
    fn the_temporary_file_a_crash_left_is_removed_by_its_recorded_name() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::fs::write(ws.path().join("src/a.txt"), "old").unwrap();
        let temp = ".fsgate-tmp-0123456789abcdef0123456789abcdef";
        std::fs::write(ws.path().join("src").join(temp), "new").unwrap();
        // A look-alike name the intent does not record stays.
        let other = ".fsgate-tmp-ffffffffffffffffffffffffffffffff";
        std::fs::write(ws.path().join("src").join(other), "user").unwrap();
        let rec = reconcile_one(ws.path(), &interrupted_write("src/a.txt", temp));
        assert!(!ws.path().join("src").join(temp).exists());
        assert!(ws.path().join("src").join(other).exists());
        assert!(ws.path().join("src/a.txt").exists());
        assert_eq!(rec["details"]["tempFile"]["name"], temp);
        assert_eq!(rec["details"]["tempFile"]["removed"], true);
    }

    /// A write through a symlinked directory: its temporary file and its content are
    /// looked for where the intent says the change really was.
    #[test]
    fn a_write_through_a_symlinked_directory_is_reconciled_where_it_was() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::os::unix::fs::symlink("src", ws.path().join("link")).unwrap();
        std::fs::write(ws.path().join("src/a.txt"), "old").unwrap();
        let temp = ".fsgate-tmp-00112233445566778899aabbccddeeff";
        std::fs::write(ws.path().join("src").join(temp), "new").unwrap();
        let mut ev = interrupted_write("link/a.txt", temp);
        ev.args.insert("realPath".into(), json!("src/a.txt"));
        let rec = reconcile_one(ws.path(), &ev);
        assert!(!ws.path().join("src").join(temp).exists());
        assert_eq!(rec["details"]["found"], "not-applied", "{rec}");
        assert_eq!(rec["details"]["tempFile"]["removed"], true, "{rec}");
    }

    #[test]
    fn a_crash_during_reconciliation_loses_no_intent() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log = state.path().join("audit.jsonl");
        {
            let a = open(&log);
            a.append(intent("mkdir", "d", None, None, None)).unwrap();
        }
        // A start that never reconciles (it dies first), then another.
        drop(open(&log));
        let a = open(&log);
        assert_eq!(a.open_intents().len(), 1);
        let gw = Gateway::new(
            Policy::builtin_default().unwrap(),
            Workspace::open(ws.path()).unwrap(),
        )
        .with_audit(a);
        assert_eq!(gw.reconcile().unwrap(), 1);
    }
}
