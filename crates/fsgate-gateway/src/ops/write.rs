//! `write_text_file` (and raw bytes): create a file or replace it atomically, its old content backed up first.

use crate::ask::Proposed;
use crate::crash::{Disk, Found, OnDisk};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use crate::vcs::step::Step;
use crate::write::*;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::Follow;

/// `fs/write_text_file` and the WebSocket channel's base64 writes: create a file or
/// replace it atomically.
#[derive(Debug, Clone)]
pub struct Write {
    /// Path as given.
    pub path: String,
    /// New content.
    pub content: Content,
}

/// A write's new content, as the request gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text (what a question may show as a diff).
    Text(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// More than any write may hold: `len` bytes (or at least that many), what a process
    /// wrote through the view past the write limit. Refused on its length, recorded,
    /// never written.
    Oversized {
        /// The size the writer reached.
        len: u64,
    },
}

impl Content {
    /// The bytes written.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Content::Text(t) => t.as_bytes(),
            Content::Bytes(b) => b,
            Content::Oversized { .. } => &[],
        }
    }
}

impl Write {
    /// A write of `content` as text.
    pub fn text(path: String, content: String) -> Write {
        Write {
            path,
            content: Content::Text(content),
        }
    }

    /// A write of raw bytes.
    pub fn bytes(path: String, content: Vec<u8>) -> Write {
        Write {
            path,
            content: Content::Bytes(content),
        }
    }
}

impl Operation for Write {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Write);

    fn name() -> &'static str {
        ChangeOp::Write.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn proposed(&self) -> Option<Proposed> {
        match &self.content {
            Content::Text(t) if t.len() <= crate::ask::MAX_SHOWN_TEXT => Some(Proposed {
                old_text: None,
                new_text: t.clone(),
            }),
            _ => None,
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        if let Content::Oversized { len } = self.content {
            return cx.refuse_oversized(&self.path, len, facts);
        }
        cx.write(&self.path, self.content.as_bytes(), facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path)
    }
}

impl Cx<'_> {
    /// The refusal of a write of `len` bytes past the write limit, for its path.
    fn refuse_oversized(
        &self,
        path: &str,
        len: u64,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        // Decided as any write first: a path the policy refuses is refused as such.
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::File, facts)?;
        facts.real.0 = Some(res.real.as_str().to_string());
        let (limit, rule) = self.file_limit(OpClass::Write);
        crate::write::within_write_limit(
            len.max(limit.saturating_add(1)),
            (limit, rule),
            &rp.shown,
        )?;
        Err(GatewayError::Internal(
            "an oversized write passed the write limit".into(),
        ))
    }

    pub(crate) fn write(
        &self,
        path: &str,
        content: &[u8],
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if rp.rel.is_root() {
            return Err(GatewayError::InvalidParams(
                "cannot write to the workspace root".into(),
            ));
        }
        // Another write of this path finishes first: this one then finds its file (and
        // backs it up) instead of being refused as a race on a new file.
        facts.held = Some(self.writing.hold(rp.rel.as_str()));
        let res = self.locate(OpClass::Write, &rp, Follow::All, EntryKind::File, facts)?;
        facts.real.0 = Some(res.real.as_str().to_string());
        self.check_write((&rp, &res), content, facts)?;
        // The backup's syncs run beside the intent's (see `workspace::sync_pool`).
        let saving = if res.exists {
            self.show_replaced_to_questions(&res.real, content.len(), facts);
            let saving = self.saver.backup_beside(&res.real, &rp.shown, facts)?;
            facts.replaced = self.replaced(&res.real, content.len());
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
            self.saver.backup_durable(saving, &rp.shown)?;
            self.intend(facts)?;
            self.workspace
                .create_dirs(&parent)
                .map_err(|e| ws_error(e, &rp.shown))?;
            self.workspace
                .write_atomic(&res.real, content, &temp, may)
                .map_err(|e| ws_error(e, &rp.shown))?;
        } else {
            self.write_beside((&res.real, &rp.shown), content, &temp, may, saving, facts)?;
        }
        self.saver.note_changed(&res.real);
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
