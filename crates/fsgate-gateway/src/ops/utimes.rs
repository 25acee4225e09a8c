//! utimes: a file's or directory's access and modification times, decided as a write
//! of it (the filesystem view's `touch`, `utime`, `cp -p`). A link is never followed:
//! its own times are not set either, it is refused as chmod refuses it.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::crash::{Disk, Found, OnDisk};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::Follow;
use serde_json::{Map, Value};

/// One of the two times, as asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// Left as it is.
    Leave,
    /// The gateway's current time.
    Now,
    /// This time, in nanoseconds since the epoch.
    At(i64),
}

impl SetTime {
    /// The time to set (None: left), "now" read once by the gateway so that the record
    /// says exactly what was set.
    fn resolve(self, now: i64) -> Option<i64> {
        match self {
            SetTime::Leave => None,
            SetTime::Now => Some(now),
            SetTime::At(ns) => Some(ns),
        }
    }

    fn recorded(self) -> Option<Value> {
        match self {
            SetTime::Leave => None,
            SetTime::Now => Some("now".into()),
            SetTime::At(ns) => Some(ns.into()),
        }
    }
}

/// A file's or directory's times (the filesystem view's setattr with a time).
#[derive(Debug, Clone)]
pub struct Utimes {
    /// Path as given.
    pub path: String,
    /// The access time.
    pub atime: SetTime,
    /// The modification time.
    pub mtime: SetTime,
}

impl Operation for Utimes {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Utimes);

    fn name() -> &'static str {
        ChangeOp::Utimes.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        for (k, t) in [("atime", self.atime), ("mtime", self.mtime)] {
            if let Some(v) = t.recorded() {
                args.insert(k.into(), v);
            }
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.utimes(self, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }
}

/// A utimes cut short by a crash: applied if the path has the new modification time,
/// not applied if it has the old one (one that left it alone is judged by neither).
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    let (new, old) = (disk.intent.mtime, disk.intent.old_mtime);
    match (&disk.path, disk.mtime) {
        (OnDisk::File(_) | OnDisk::Dir, Some(now)) if Some(now) == new => Found::Applied,
        (OnDisk::File(_) | OnDisk::Dir, Some(now)) if Some(now) == old => Found::NotApplied,
        _ => Found::Neither,
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .unwrap_or(0)
}

impl Cx<'_> {
    fn utimes(&self, op: &Utimes, facts: &mut Facts) -> Result<Output, GatewayError> {
        let rp = self.parse_path(&op.path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        // A link named last is the link itself (`touch -h`): refused below, never followed.
        let res = self.locate(
            OpClass::Write,
            &rp,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        let kind = if self.is_real_dir(&res.real) {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        self.check(OpClass::Write, &res.real, kind, &rp.shown, facts)?;
        facts.real.0 = Some(res.real.as_str().to_string());
        let old = self
            .workspace
            .times_of(&res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        let now = now_ns();
        let (atime, mtime) = (op.atime.resolve(now), op.mtime.resolve(now));
        for (k, v) in [
            ("oldAtime", Some(old.atime)),
            ("oldMtime", Some(old.mtime)),
            ("atime", atime),
            ("mtime", mtime),
        ] {
            if let Some(v) = v {
                facts.args.insert(k.into(), v.into());
            }
        }
        self.intend(facts)?;
        self.workspace
            .utimes(&res.real, atime, mtime)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::{SetTime, Utimes, found_after_crash};
    use crate::crash::{Disk, Found, OnDisk};
    use crate::gateway::Request;
    use crate::ops::Op;
    use crate::tests::{ctx, gateway, records};
    use fsgate_audit::Intent;

    const SECOND: i64 = 1_000_000_000;

    #[test]
    fn utimes_is_intended_recorded_with_old_and_new_times() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let file = ws.path().join("a.txt");
        std::fs::write(&file, "a\n").unwrap();
        std::os::unix::fs::symlink("a.txt", ws.path().join("l")).unwrap();
        let old = std::fs::metadata(&file).unwrap();
        let gw = gateway(ws.path(), &log_path);
        let set = |path: &str| {
            Op::Utimes(Utimes {
                path: path.into(),
                atime: SetTime::Leave,
                mtime: SetTime::At(1_000 * SECOND + 5),
            })
        };
        gw.serve(&ctx(), Request::Op(set("/a.txt"))).unwrap();
        let now = std::fs::metadata(&file).unwrap();
        assert_eq!((now.mtime(), now.mtime_nsec()), (1_000, 5));
        assert_eq!(now.atime(), old.atime(), "the access time was left");
        let recs = records(&log_path);
        assert_eq!(recs[0]["kind"], "intent");
        assert_eq!(recs[1]["args"]["mtime"], 1_000 * SECOND + 5);
        let old_ns = old.mtime() * SECOND + old.mtime_nsec();
        assert_eq!(recs[1]["args"]["oldMtime"], old_ns);
        assert!(recs[1]["args"].get("atime").is_none());
    }

    fn intent(mtime: i64, old_mtime: i64) -> Intent {
        Intent {
            seq: 1,
            op: "utimes".into(),
            path: Some("a.txt".into()),
            path2: None,
            sha256: None,
            old_sha256: None,
            temp_name: None,
            real_path: None,
            real_path2: None,
            workspace: None,
            outcome: None,
            mode: None,
            old_mode: None,
            target: None,
            old_target: None,
            mtime: Some(mtime),
            old_mtime: Some(old_mtime),
        }
    }

    #[test]
    fn a_utimes_cut_short_is_judged_by_the_modification_time_on_disk() {
        let i = intent(2 * SECOND, SECOND);
        let judge = |mtime| {
            found_after_crash(&Disk {
                intent: &i,
                path: OnDisk::File(String::new()),
                path2: OnDisk::Other,
                mode: None,
                mtime,
            })
        };
        assert_eq!(judge(Some(2 * SECOND)), Found::Applied);
        assert_eq!(judge(Some(SECOND)), Found::NotApplied);
        assert_eq!(judge(Some(3 * SECOND)), Found::Neither);
        assert_eq!(judge(None), Found::Neither);
    }
}
