//! rename of a symbolic link, and of anything over one: the link moves as a link (the
//! rename acts on the final name, never following it), its target judged again from
//! where it lands, as a link made there would be; a link replaced at the destination
//! is recorded with its target (`args.oldTarget`), which is all there is to keep of it.

use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::rename::Ends;
use crate::ops::symlink::RULE_LINK_TARGET;
use crate::rules::{RULE_FILE_TYPE, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::FileKind;

impl Cx<'_> {
    /// The target of the link at `real`, if it is one; refused if it is not text (the
    /// record and the check need it as text).
    pub(super) fn link_target(
        &self,
        real: &RelPath,
        shown: &str,
    ) -> Result<Option<String>, GatewayError> {
        let info = self.workspace.lstat(real).map_err(|e| ws_error(e, shown))?;
        if info.kind != FileKind::Symlink {
            return Ok(None);
        }
        match info.target.as_deref().and_then(|t| t.to_str()) {
            Some(t) => Ok(Some(t.to_owned())),
            None => Err(GatewayError::Refused {
                reason: format!("`{real}` is a link whose target is not UTF-8"),
                rule: RULE_FILE_TYPE.into(),
                path: shown.to_string(),
            }),
        }
    }

    /// A moved link where it goes: writable (as a link made there), and leading inside
    /// the workspace from there.
    pub(super) fn check_link_move(
        &self,
        e: &Ends,
        target: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        for p in [&e.dst.rel, &e.dres.real] {
            self.check(OpClass::Write, p, EntryKind::File, &e.dst.shown, facts)?;
        }
        Self::check_depth(&e.dres.real, 0, &e.dst.shown)?;
        if let Some(why) = crate::ops::target_refusal(&e.dres.real, target) {
            facts.decision = Some("deny");
            facts.rule = Some(RULE_LINK_TARGET.to_string());
            return Err(GatewayError::Refused {
                reason: format!("moved there, the link would be a link to {why}"),
                rule: RULE_LINK_TARGET.into(),
                path: e.dst.shown.clone(),
            });
        }
        Ok(())
    }

    /// A link the rename replaces: its target recorded before the intent, so that
    /// `fsgate undo` can make it again and reconciliation can tell it is still there.
    pub(super) fn note_replaced_link(
        &self,
        e: &Ends,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if let Some(old) = self.link_target(&e.dres.real, &e.dst.shown)? {
            facts.args.insert("oldTarget".into(), old.into());
        }
        Ok(())
    }
}
