//! `write_text_file` (and raw bytes): create a file or replace it atomically, its old content backed up first.

use crate::ops::{Output, RequestCtx};
use crate::reconcile::{Disk, Found, OnDisk};
use crate::vcs::Step;
use crate::write::*;
use crate::{Facts, Gateway, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_policy::Policy;
use fsgate_workspace::Follow;

impl Gateway {
    pub(crate) fn write(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        content: &[u8],
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if rp.rel.is_root() {
            return Err(GatewayError::InvalidParams(
                "cannot write to the workspace root".into(),
            ));
        }
        // Another write of this path finishes first: this one then finds its file (and
        // backs it up) instead of being refused as a race on a new file.
        facts.held = Some(self.writing.hold(rp.rel.as_str()));
        let res = self.locate(
            pol,
            OpClass::Write,
            &rp,
            Follow::All,
            EntryKind::File,
            facts,
        )?;
        facts.real.0 = Some(res.real.as_str().to_string());
        self.check_write(pol, (&rp, &res), content, facts)?;
        // The backup's syncs run beside the intent's (see `workspace::sync_pool`).
        let saving = if res.exists {
            self.show_replaced_to_questions(&res.real, content.len(), facts);
            let saving = self.backup_beside(&res.real, &rp.shown, facts)?;
            facts.replaced = self.replaced(ctx, &res.real, content.len());
            saving
        } else {
            None
        };
        facts.content(content);
        let may = may_replace(res.exists, facts);
        let temp = Self::temp_name(facts)?;
        if res.missing > 1
            && let Some(parent) = res.real.parent()
        {
            self.backup_durable(saving, &rp.shown)?;
            self.intend(pol, ctx, facts)?;
            self.workspace
                .create_dirs(&parent)
                .map_err(|e| ws_error(e, &rp.shown))?;
            self.workspace
                .write_atomic(&res.real, content, &temp, may)
                .map_err(|e| ws_error(e, &rp.shown))?;
        } else {
            self.write_beside(
                pol,
                ctx,
                (&res.real, &rp.shown),
                content,
                &temp,
                may,
                saving,
                facts,
            )?;
        }
        self.note_changed(&res.real);
        Ok(Output::Unit)
    }
}

/// A content write cut short by a crash: applied if the file holds the new content,
/// not applied if it holds the old (or is still missing, for a new file).
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    let intent = disk.intent;
    match (&disk.path, &intent.sha256, &intent.old_sha256) {
        (OnDisk::File(h), Some(new), _) if h == new => Found::Applied,
        (OnDisk::File(h), _, Some(old)) if h == old => Found::NotApplied,
        (OnDisk::Missing, _, None) => Found::NotApplied,
        _ => Found::Neither,
    }
}

/// A written file is added to the index.
pub(crate) fn staging(path: &RelPath) -> Vec<Step<'_>> {
    vec![Step::Add(path)]
}
