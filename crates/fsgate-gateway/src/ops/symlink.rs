//! symlink: a symbolic link made (the filesystem view's `symlink(2)`), decided as a
//! write of the link's path. The target is the caller's choice: one that is absolute,
//! or that leads out of the workspace read lexically from the link's directory, is
//! refused, since a link planted to the outside would later mislead the host's tools
//! and the other doors' callers. So is one with a `..` after a name: the kernel takes
//! that `..` from wherever the name leads, which another link can make any place.

use crate::ops::cx::Cx;

use crate::ops::operation::{Operation, Places};

use fsgate_audit::ChangeOp;
use serde_json::{Map, Value};
use std::path::Path;

use crate::crash::{Disk, Found, OnDisk};
use crate::facts::Facts;
use crate::ops::output::Output;
use crate::rules::ws_error;
use crate::vcs::step::Step;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::{Follow, MAX_TARGET_BYTES};

/// Rule id of a link refused for where it leads.
pub const RULE_LINK_TARGET: &str = "workspace-link-target";

/// Why `target`, the target of a link made at `link`, is refused, if it is: empty, too
/// long, absolute, leading above the workspace's root when its `..` are taken from
/// the link's own directory, or with a `..` after a name. A target of `..`s first and
/// names after is read by the kernel as it reads here: each `..` from a directory
/// itself (the link's, then its parents), each name down from there; a name that is a
/// link leads where that link's own target, checked alike, leads.
pub fn target_refusal(link: &RelPath, target: &str) -> Option<&'static str> {
    refusal_at(link.components().count().saturating_sub(1), target)
}

/// [`target_refusal`] of a link in a directory `depth` levels below the root.
fn refusal_at(mut depth: usize, target: &str) -> Option<&'static str> {
    if target.is_empty() {
        return Some("an empty target");
    }
    if target.len() > MAX_TARGET_BYTES || target.contains('\0') {
        return Some("a target longer than PATH_MAX");
    }
    if target.starts_with('/') {
        return Some("an absolute target, which leads outside the workspace");
    }
    let mut named = false;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if named => {
                return Some(
                    "a target with `..` after a name (that name could be a link leading anywhere; write the `..`s first)",
                );
            }
            ".." if depth == 0 => {
                return Some("a target that climbs out of the workspace");
            }
            ".." => depth -= 1,
            _ => (named, depth) = (true, depth + 1),
        }
    }
    None
}

/// A symbolic link made (the filesystem view's symlink).
#[derive(Debug, Clone)]
pub struct Symlink {
    /// The link's path as given.
    pub path: String,
    /// Where it leads, as the link will hold it (relative, within the workspace).
    pub target: String,
}

impl Operation for Symlink {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Symlink);

    fn name() -> &'static str {
        ChangeOp::Symlink.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("target".into(), self.target.clone().into());
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.symlink((&self.path, &self.target), facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path)
    }
}

impl Cx<'_> {
    pub(crate) fn symlink(
        &self,
        (path, target): (&str, &str),
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(
            OpClass::Write,
            &rp,
            Follow::NotFinal,
            EntryKind::File,
            facts,
        )?;
        if let Some(why) = target_refusal(&res.real, target) {
            facts.decision = Some("deny");
            facts.rule = Some(RULE_LINK_TARGET.to_string());
            return Err(GatewayError::Refused {
                reason: format!("a link to {why} is not made"),
                rule: RULE_LINK_TARGET.into(),
                path: rp.shown,
            });
        }
        // A target is content the link holds (readlink gives it, git commits it): the
        // content rules decide on it as on a write of those bytes.
        if let Err(e) = self.check_content(OpClass::Write, &res.real, target.as_bytes(), &rp.shown)
        {
            // What the rules refuse stays out of the record too.
            facts.args.remove("target");
            facts.decision = Some("deny");
            if let GatewayError::Refused { rule, .. } = &e {
                facts.rule = Some(rule.clone());
            }
            return Err(e);
        }
        if res.exists {
            return Err(GatewayError::InvalidParams(format!(
                "{}: already exists",
                rp.shown
            )));
        }
        if res.missing > 1 {
            return Err(GatewayError::MissingParent {
                path: rp.shown,
                hint: "",
            });
        }
        facts.real.0 = Some(res.real.as_str().to_string());
        self.intend(facts)?;
        self.workspace
            .symlink(target, &res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }
}

impl Cx<'_> {
    /// A directory's move makes no link lead out of the workspace that did not: each
    /// link among `below` (the entries beneath the directory `from`) is checked from
    /// where it lands, unless it led out already where it was. (A link moved itself is
    /// judged where it lands in any case: `rename_link.rs`.)
    pub(crate) fn check_moved_links(
        &self,
        (from, to): (&RelPath, &RelPath),
        below: &[fsgate_workspace::Entry],
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let lift =
            |n: usize| (n + to.components().count()).saturating_sub(from.components().count());
        let links = below
            .iter()
            .filter(|e| e.kind == fsgate_workspace::FileKind::Symlink)
            .map(|e| &e.path);
        for link in links {
            let Ok(info) = self.workspace.lstat(link) else {
                continue;
            };
            let Some(target) = info.target.as_ref().and_then(|t| t.to_str()) else {
                continue;
            };
            let depth = link.components().count().saturating_sub(1);
            if refusal_at(depth, target).is_none()
                && let Some(why) = refusal_at(lift(depth), target)
            {
                facts.decision = Some("deny");
                facts.rule = Some(RULE_LINK_TARGET.to_string());
                return Err(GatewayError::Refused {
                    reason: format!("moved there, `{link}` would be a link to {why}"),
                    rule: RULE_LINK_TARGET.into(),
                    path: shown.to_string(),
                });
            }
        }
        Ok(())
    }
}

/// A symlink cut short by a crash: applied if the link is there leading where the
/// intent says, not applied if nothing is.
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    match &disk.path {
        OnDisk::Link(to) if disk.intent.target.as_deref().map(Path::new) == Some(to) => {
            Found::Applied
        }
        OnDisk::Missing => Found::NotApplied,
        OnDisk::Link(_) | OnDisk::File(_) | OnDisk::Dir | OnDisk::Other => Found::Neither,
    }
}

/// git keeps a link as a blob of its target: the link is added.
pub(crate) fn staging(path: &RelPath) -> Vec<Step<'_>> {
    vec![Step::Add(path)]
}

#[cfg(test)]
mod tests {
    use crate::gateway::Request;
    use crate::ops;
    use crate::ops::Op;
    use crate::ops::target_refusal;
    use crate::tests::{ctx, gateway, records};
    use fsgate_base::error::GatewayError;
    use fsgate_base::path::RelPath;
    use proptest::prelude::*;

    fn rel(p: &str) -> RelPath {
        RelPath::parse_rooted(p).expect("rel")
    }

    #[test]
    fn a_target_leaving_the_workspace_is_refused() {
        let inside = [
            ("/b", "a.txt"),
            ("/node_modules/.bin/x", "../pkg/bin/x"),
            ("/v/lib64", "lib"),
            ("/d/e/l", "../../a"),
            ("/d/e/l", "./.././../a/./b/"),
        ];
        for (link, to) in inside {
            assert_eq!(target_refusal(&rel(link), to), None, "{link} -> {to}");
        }
        let outside = [
            ("/b", "/etc/passwd"),
            ("/b", "../outside"),
            ("/d/l", "../../outside"),
            ("/d/l", "x/../../../y"),
            ("/d/l", "./x/../y"),
            ("/a/b/c/d/x", "up/../../../../../etc/hostname"),
            ("/b", ""),
        ];
        for (link, to) in outside {
            assert!(target_refusal(&rel(link), to).is_some(), "{link} -> {to}");
        }
        assert!(target_refusal(&rel("/b"), &"a/".repeat(2048)).is_some());
    }

    proptest! {
        /// A target allowed never climbs above the root at any step, read lexically,
        /// and has no `..` after a name.
        #[test]
        fn an_allowed_target_never_climbs_above_the_root(
            depth in 0usize..4,
            parts in proptest::collection::vec(
                prop_oneof!["\\.\\.", "\\.", "[a-z]{1,3}", Just(String::new())], 0..8),
        ) {
            let dirs: Vec<String> = (0..depth).map(|i| format!("d{i}")).collect();
            let link = rel(&format!("/{}", [dirs.clone(), vec!["l".into()]].concat().join("/")));
            let target = parts.join("/");
            let mut at = depth as i64;
            let (mut climbed, mut named, mut after_name) = (false, false, false);
            for p in &parts {
                match p.as_str() {
                    "" | "." => {}
                    ".." => { at -= 1; climbed |= at < 0; after_name |= named; }
                    _ => { at += 1; named = true; }
                }
            }
            let refused = target_refusal(&link, &target).is_some();
            let absolute = target.starts_with('/');
            let bad = climbed || absolute || target.is_empty() || after_name;
            prop_assert_eq!(refused, bad);
        }
    }

    #[test]
    fn a_link_is_intended_recorded_with_its_target_and_refused_outside() {
        let ws = tempfile::tempdir().expect("tmp");
        let state = tempfile::tempdir().expect("tmp");
        let log_path = state.path().join("audit.jsonl");
        std::fs::write(ws.path().join("a.txt"), "hello").expect("write");
        let gw = gateway(ws.path(), &log_path);
        let link = |path: &str, target: &str| {
            Op::Symlink(ops::Symlink {
                path: path.into(),
                target: target.into(),
            })
        };
        gw.serve(&ctx(), Request::Op(link("/b", "a.txt")))
            .expect("made");
        assert_eq!(
            std::fs::read_link(ws.path().join("b")).expect("link"),
            std::path::Path::new("a.txt")
        );
        match gw.serve(&ctx(), Request::Op(link("/c", "/etc/passwd"))) {
            Err(GatewayError::Refused { rule, .. }) => assert_eq!(rule, super::RULE_LINK_TARGET),
            other => panic!("{other:?}"),
        }
        assert!(gw.serve(&ctx(), Request::Op(link("/b", "a.txt"))).is_err());
        assert!(
            gw.serve(&ctx(), Request::Op(link("/.env", "a.txt")))
                .is_err()
        );
        assert!(std::fs::symlink_metadata(ws.path().join("c")).is_err());
        let recs = records(&log_path);
        assert_eq!(recs[0]["kind"], "intent");
        assert_eq!(recs[0]["op"], "symlink");
        assert_eq!(recs[0]["args"]["target"], "a.txt");
        assert_eq!(recs[1]["decision"], "allow");
        assert_eq!(recs[2]["decision"], "deny");
        assert_eq!(recs[2]["rule"], super::RULE_LINK_TARGET);
        assert_eq!(recs[2]["args"]["target"], "/etc/passwd");
        // Moved up a level within its directory, `../../a.txt` would lead out: the
        // move is refused; moved to the same depth, it still leads inside.
        std::fs::create_dir_all(ws.path().join("p/q")).expect("mkdir");
        gw.serve(&ctx(), Request::Op(link("/p/l", "../a.txt")))
            .expect("made");
        gw.serve(&ctx(), Request::Op(link("/p/q/l", "../../a.txt")))
            .expect("made");
        let mv = |from: &str, to: &str| {
            let op = Op::Rename(ops::Rename {
                from: from.into(),
                to: to.into(),
                replace: false,
            });
            gw.serve(&ctx(), Request::Op(op))
        };
        match mv("/p/q", "/q") {
            Err(GatewayError::Refused { rule, .. }) => assert_eq!(rule, super::RULE_LINK_TARGET),
            other => panic!("{other:?}"),
        }
        assert!(std::fs::symlink_metadata(ws.path().join("p/q/l")).is_ok());
        mv("/p", "/r").expect("same depth");
    }
}
