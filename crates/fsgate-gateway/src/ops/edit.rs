//! `edit_text_file`: replace the one occurrence of a text, as a write of the whole new content.

use crate::ask::Proposed;
use crate::crash::{Disk, Found};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::vcs::step::Step;
use crate::write::*;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::Follow;

/// `_fsgate/edit_text_file`: replace the single occurrence of `old_text`.
#[derive(Debug, Clone)]
pub struct Edit {
    /// Path as given.
    pub path: String,
    /// Text that must occur exactly once.
    pub old_text: String,
    /// Replacement.
    pub new_text: String,
}

impl Operation for Edit {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Edit);

    fn name() -> &'static str {
        ChangeOp::Edit.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn proposed(&self) -> Option<Proposed> {
        let small = |s: &str| s.len() <= crate::ask::MAX_SHOWN_TEXT;
        (small(&self.old_text) && small(&self.new_text)).then(|| Proposed {
            old_text: Some(self.old_text.clone()),
            new_text: self.new_text.clone(),
        })
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.edit(&self.path, &self.old_text, &self.new_text, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path)
    }
}

impl Cx<'_> {
    pub(crate) fn edit(
        &self,
        path: &str,
        old_text: &str,
        new_text: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        if old_text.is_empty() {
            return Err(GatewayError::InvalidParams(
                "oldText must not be empty".into(),
            ));
        }
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::File, facts)?;
        facts.real.0 = Some(res.real.as_str().to_string());
        let (bytes, shown) = self.read_bytes(path, facts)?;
        // The record names the write rule that allowed the edit, not the read rule.
        facts.decided(&self.pol.decide(OpClass::Write, &res.real, EntryKind::File));
        let current = bytes.len();
        let text = crate::read::text_or_refuse(self.pol, self.ctx, bytes, &shown)?;
        let updated = replace_once(&text, (old_text, new_text), &shown)?;
        self.check_edited((&rp, &res.real), (current, &updated), facts)?;
        if facts.ask.as_ref().is_some_and(crate::ask::AskCtx::waits) {
            facts.settle_pending()?;
            self.still_holds(&res.real, text.as_bytes(), &rp.shown)?;
        }
        let saving = self.saver.backup_beside(&res.real, &rp.shown, facts)?;
        // The backup read the file again: the edit goes ahead only on the content it was
        // made against (another write may have come between).
        if facts.old_sha256.is_some() && facts.old_sha256 != facts.sha256 {
            return Err(GatewayError::InvalidParams(format!(
                "{shown} changed while it was being edited; nothing was changed (read it again and retry)"
            )));
        }
        facts.content(updated.as_bytes());
        let may = may_replace(true, facts);
        let temp = Self::temp_name(facts)?;
        let target = (&res.real, rp.shown.as_str());
        self.write_beside(target, updated.as_bytes(), &temp, may, saving, facts)?;
        Ok(Output::Unit)
    }

    /// What an edit's result must pass, in order: the write limit, the size rules (on
    /// the larger of the sizes before and after), the content rules.
    fn check_edited(
        &self,
        (rp, real): (&crate::scope::ReqPath, &RelPath),
        (current, updated): (usize, &str),
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let limit = self.pol.limits().max_write_bytes;
        if updated.len() as u64 > limit {
            return Err(GatewayError::Limit {
                reason: format!(
                    "edited file of {} bytes exceeds the write limit of {limit} bytes",
                    updated.len()
                ),
                rule: "limits.max_write_bytes".into(),
                path: rp.shown.clone(),
            });
        }
        let size = current.max(updated.len()) as u64;
        self.check_size(Access::Edit, (rp, real), size, facts)?;
        self.check_content(OpClass::Write, real, updated.as_bytes(), &rp.shown)
    }
}

/// `text` with `old` (which must occur exactly once) replaced by `new`.
fn replace_once(text: &str, (old, new): (&str, &str), shown: &str) -> Result<String, GatewayError> {
    let count = occurrences(text, old);
    if count != 1 {
        return Err(GatewayError::InvalidParams(format!(
            "oldText occurs {count} times in {shown}; it must occur exactly once{}",
            if count == 0 {
                ""
            } else {
                " (add surrounding lines to make it unique)"
            }
        )));
    }
    Ok(text.replacen(old, new, 1))
}

/// An edit writes the file's whole new content: judged after a crash as a write is.
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    super::write::found_after_crash(disk)
}

/// An edited file is added to the index, as a written one is.
pub(crate) fn staging(path: &RelPath) -> Vec<Step<'_>> {
    super::write::staging(path)
}
