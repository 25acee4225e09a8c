//! chmod: a file's or directory's permission bits, decided as a write of it. The
//! set-user-ID, set-group-ID and sticky bits are never set: a process served by the
//! gateway must not make a program that runs with its owner's rights.

use crate::crash::{Disk, Found, OnDisk};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use crate::vcs::step::Step;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::Follow;
use serde_json::{Map, Value};

/// Rule id of a chmod refused for asking for set-user-ID, set-group-ID or sticky.
pub const RULE_SET_ID: &str = "workspace-set-id";

/// The bits a chmod may set.
const PERMISSIONS: u32 = 0o777;

/// Permission bits as records write them: four octal digits.
pub(crate) fn octal(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// A file's or directory's permission bits (the filesystem view's chmod).
#[derive(Debug, Clone)]
pub struct Chmod {
    /// Path as given.
    pub path: String,
    /// The new permission bits (set-ID and sticky bits are refused).
    pub mode: u32,
}

impl Operation for Chmod {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Chmod);

    fn name() -> &'static str {
        ChangeOp::Chmod.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("mode".into(), octal(self.mode).into());
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.chmod(&self.path, self.mode, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path)
    }
}

impl Cx<'_> {
    pub(crate) fn chmod(
        &self,
        path: &str,
        mode: u32,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if mode & !PERMISSIONS != 0 {
            facts.decision = Some("deny");
            facts.rule = Some(RULE_SET_ID.to_string());
            return Err(GatewayError::Refused {
                reason: format!(
                    "mode {} asks for set-user-ID, set-group-ID or sticky, which nothing served by fsgate may set",
                    octal(mode)
                ),
                rule: RULE_SET_ID.into(),
                path: rp.shown,
            });
        }
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::Unknown, facts)?;
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
            .mode_of(&res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        facts.args.insert("oldMode".into(), octal(old).into());
        self.intend(facts)?;
        self.workspace
            .chmod(&res.real, mode)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }
}

/// A chmod cut short by a crash: applied if the path has the new bits, not applied if
/// it has the old ones.
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    let bits = |m: &Option<String>| m.as_deref().and_then(|m| u32::from_str_radix(m, 8).ok());
    let (new, old) = (bits(&disk.intent.mode), bits(&disk.intent.old_mode));
    match (&disk.path, disk.mode) {
        (OnDisk::File(_) | OnDisk::Dir, Some(now)) if Some(now) == new => Found::Applied,
        (OnDisk::File(_) | OnDisk::Dir, Some(now)) if Some(now) == old => Found::NotApplied,
        _ => Found::Neither,
    }
}

/// A file's mode is in git's index (its executable bit): the file is added again.
pub(crate) fn staging(path: &RelPath) -> Vec<Step<'_>> {
    vec![Step::Add(path)]
}

#[cfg(test)]
mod tests {
    use crate::ops;
    use std::os::unix::fs::PermissionsExt;

    use crate::gateway::Request;
    use crate::ops::Op;
    use crate::tests::{ctx, gateway, records};
    use fsgate_base::error::GatewayError;

    fn mode_of(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn chmod_is_intended_recorded_with_both_modes_and_never_sets_set_id_bits() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let log_path = state.path().join("audit.jsonl");
        let file = ws.path().join("run.sh");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let gw = gateway(ws.path(), &log_path);
        let chmod = |mode| {
            Op::Chmod(ops::Chmod {
                path: "/run.sh".into(),
                mode,
            })
        };
        gw.serve(&ctx(), Request::Op(chmod(0o755))).unwrap();
        assert_eq!(mode_of(&file), 0o755);
        match gw.serve(&ctx(), Request::Op(chmod(0o4755))) {
            Err(GatewayError::Refused { rule, .. }) => assert_eq!(rule, super::RULE_SET_ID),
            other => panic!("{other:?}"),
        }
        assert_eq!(mode_of(&file), 0o755);
        // A secret is written by no one, its mode neither.
        std::fs::write(ws.path().join(".env"), "A=1\n").unwrap();
        let secret = Op::Chmod(ops::Chmod {
            path: "/.env".into(),
            mode: 0o600,
        });
        assert!(gw.serve(&ctx(), Request::Op(secret)).is_err());
        let recs = records(&log_path);
        let kinds: Vec<(&str, &str)> = recs
            .iter()
            .map(|r| (r["kind"].as_str().unwrap(), r["decision"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("intent", "allow"),
                ("request", "allow"),
                ("request", "deny"),
                ("request", "deny")
            ]
        );
        assert_eq!(recs[0]["args"]["mode"], "0755");
        assert_eq!(recs[0]["args"]["oldMode"], "0644");
        assert_eq!(recs[1]["args"]["oldMode"], "0644");
        assert_eq!(recs[2]["args"]["mode"], "4755");
    }
}
