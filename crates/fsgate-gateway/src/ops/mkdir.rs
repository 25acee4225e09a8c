//! mkdir: create a directory (and, when asked, its missing parents).

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
use fsgate_workspace::FileKind;
use fsgate_workspace::Follow;
use serde_json::{Map, Value};

/// `_fsgate/mkdir`.
#[derive(Debug, Clone)]
pub struct Mkdir {
    /// Directory as given.
    pub path: String,
    /// Create missing parents too.
    pub recursive: bool,
}

impl Operation for Mkdir {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Mkdir);

    fn name() -> &'static str {
        ChangeOp::Mkdir.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("recursive".into(), self.recursive.into());
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.mkdir(&self.path, self.recursive, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(_path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging()
    }
}

impl Cx<'_> {
    pub(crate) fn mkdir(
        &self,
        path: &str,
        recursive: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::Dir, facts)?;
        if res.exists {
            if recursive {
                let info = self
                    .workspace
                    .stat(&res.real)
                    .map_err(|e| ws_error(e, &rp.shown))?;
                if info.kind == FileKind::Directory {
                    return Ok(Output::Unit);
                }
            }
            return Err(GatewayError::InvalidParams(format!(
                "{}: already exists",
                rp.shown
            )));
        }
        if res.missing > 1 && !recursive {
            return Err(GatewayError::MissingParent {
                path: rp.shown,
                hint: "; pass recursive: true to create it",
            });
        }
        Self::check_depth(&res.real, 0, &rp.shown)?;
        self.check_missing_parents(&rp, &res, true, facts)?;
        if res.missing > 1 {
            // The parents made too, so that an undo removes them again.
            facts.args.insert("madeDirs".into(), res.missing.into());
        }
        self.intend(facts)?;
        self.workspace
            .mkdir(&res.real, recursive)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }
}

/// A `mkdir` cut short by a crash: applied if the directory is there, not applied if
/// nothing is.
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    match disk.path {
        OnDisk::Dir => Found::Applied,
        OnDisk::Missing => Found::NotApplied,
        OnDisk::File(_) | OnDisk::Link(_) | OnDisk::Other => Found::Neither,
    }
}

/// A directory alone is nothing to git.
pub(crate) fn staging() -> Vec<Step<'static>> {
    Vec::new()
}
