//! mkdir: create a directory (and, when asked, its missing parents).

use crate::ops::{Output, RequestCtx};
use crate::reconcile::{Disk, Found, OnDisk};
use crate::vcs::Step;
use crate::{Facts, Gateway, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_policy::Policy;
use fsgate_workspace::FileKind;
use fsgate_workspace::Follow;

impl Gateway {
    pub(crate) fn mkdir(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        recursive: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(pol, OpClass::Write, &rp, Follow::All, EntryKind::Dir, facts)?;
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
        self.check_missing_parents(pol, &rp, &res, true, facts)?;
        if res.missing > 1 {
            // The parents made too, so that an undo removes them again.
            facts.args.insert("madeDirs".into(), res.missing.into());
        }
        self.intend(pol, ctx, facts)?;
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
