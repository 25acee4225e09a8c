//! `stat`: one entry's metadata.

use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_workspace::{FileKind, Follow, WsError};

/// `_fsgate/stat`.
#[derive(Debug, Clone)]
pub struct Stat {
    /// Path as given.
    pub path: String,
    /// A final symlink is followed (every door's `stat`); if not (the filesystem
    /// view's lookup, `lstat`), the link itself is stated, with its target.
    pub follow: bool,
}

impl Operation for Stat {
    const QUICK_READ: bool = true;

    fn name() -> &'static str {
        "stat"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.stat(&self.path, self.follow, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn stat(
        &self,
        path: &str,
        follow: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let (real, info) = self.locate_entry(&rp, follow, facts)?;
        if info.kind == FileKind::File && info.nlink > 1 {
            return Err(ws_error(WsError::HardLink(info.nlink), &rp.shown));
        }
        let kind = if info.kind == FileKind::Directory {
            FileKind::Directory
        } else {
            FileKind::File
        };
        // Decided again knowing the kind and size, where it is named and where it
        // really is (once if that is the same place).
        let places: &[&RelPath] = if real == rp.rel {
            &[&rp.rel]
        } else {
            &[&rp.rel, &real]
        };
        let pf = match kind {
            FileKind::Directory => PathFacts::kind(EntryKind::Dir),
            _ => PathFacts::file(info.size),
        };
        for p in places.iter().copied() {
            self.check_entry(Access::Stat, p, &pf, &rp.shown, facts)?;
        }
        Ok(Output::Stat { path: rp.rel, info })
    }

    /// Where `rp` really is and its metadata, as [`Gateway::locate`] and a stat there
    /// find them (with `follow` false, a final symlink is not followed: the link's own
    /// metadata, its target with it). A path without symlinks is its own real path:
    /// then one `openat2` (beneath the root, no symlinks) serves both, instead of one
    /// to resolve and another to stat. Anything else (a symlink, a missing name) goes
    /// the long way, which also gives the errors.
    fn locate_entry(
        &self,
        rp: &crate::scope::ReqPath,
        follow: bool,
        facts: &mut Facts,
    ) -> Result<(RelPath, fsgate_workspace::StatInfo), GatewayError> {
        let (class, kind) = (OpClass::List, EntryKind::Unknown);
        Self::in_roots(rp, &rp.rel, facts)?;
        self.check(class, &rp.rel, kind, &rp.shown, facts)?;
        if let Ok(info) = self.workspace.stat(&rp.rel) {
            return Ok((rp.rel.clone(), info));
        }
        let how = if follow {
            Follow::All
        } else {
            Follow::NotFinal
        };
        let res = self.resolve_checked(class, rp, how, kind, facts)?;
        let info = if follow {
            self.workspace.stat(&res.real)
        } else if !res.exists {
            return Err(GatewayError::NotFound {
                path: rp.shown.clone(),
            });
        } else {
            self.workspace.lstat(&res.real)
        };
        Ok((res.real, info.map_err(|e| ws_error(e, &rp.shown))?))
    }
}

#[cfg(test)]
mod tests {
    use crate::gateway::Gateway;
    use crate::ops;
    use crate::ops::Op;
    use crate::ops::output::Output;
    use fsgate_audit::{AuditLog, AuditSettings, OpenOptions};
    use fsgate_base::error::GatewayError;
    use fsgate_policy::Policy;
    use fsgate_workspace::{FileKind, Workspace};

    fn stat(gw: &Gateway, path: &str) -> Result<(String, FileKind, u64), GatewayError> {
        match gw
            .handle(
                &crate::tests::ctx(),
                Op::Stat(ops::Stat {
                    path: path.into(),
                    follow: true,
                }),
            )
            .0?
        {
            Output::Stat { path, info } => Ok((path.as_str().to_string(), info.kind, info.size)),
            other => panic!("{other:?}"),
        }
    }

    fn gateway(ws: &std::path::Path, log: &std::path::Path) -> Gateway {
        let pol = Policy::builtin_default().expect("policy");
        let audit = AuditLog::open(
            log,
            &AuditSettings::default(),
            pol.sha256(),
            OpenOptions::default(),
        )
        .expect("audit");
        Gateway::new(pol, Workspace::open(ws).expect("ws")).with_audit(audit)
    }

    /// A path without symlinks is stated with one open; one through a symlink, a
    /// missing one, a secret reached through a symlink and a hard-linked file are
    /// answered as the long way answers them.
    #[test]
    fn stat_answers_alike_with_and_without_symlinks() {
        let ws = tempfile::tempdir().expect("tmp");
        let state = tempfile::tempdir().expect("tmp");
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        std::fs::create_dir(ws.path().join("real")).expect("mkdir");
        std::fs::write(ws.path().join("real/a.txt"), "hello").expect("write");
        std::fs::write(ws.path().join("real/token"), "x").expect("write");
        std::os::unix::fs::symlink("real", ws.path().join("via")).expect("symlink");
        std::os::unix::fs::symlink(".env", ws.path().join("innocent")).expect("symlink");
        std::fs::write(ws.path().join(".env"), "K=v").expect("write");
        std::fs::hard_link(ws.path().join("real/token"), ws.path().join("t2")).expect("ln");
        let file = ("real/a.txt".to_string(), FileKind::File, 5);
        assert_eq!(stat(&gw, "/real/a.txt").expect("stat"), file);
        // Shown where it was asked for, found where it really is.
        let via = stat(&gw, "/via/a.txt").expect("stat");
        assert_eq!(via, ("via/a.txt".to_string(), FileKind::File, 5));
        assert_eq!(stat(&gw, "/real").expect("stat").1, FileKind::Directory);
        assert!(matches!(
            stat(&gw, "/real/missing"),
            Err(GatewayError::NotFound { .. })
        ));
        assert!(matches!(
            stat(&gw, "/innocent"),
            Err(GatewayError::Refused { .. })
        ));
        assert!(matches!(
            stat(&gw, "/.env"),
            Err(GatewayError::Refused { .. })
        ));
        assert!(stat(&gw, "/t2").is_err(), "a file with two links");
    }
}
