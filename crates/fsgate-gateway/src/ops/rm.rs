//! rm: remove a file, or a directory with everything beneath it, each file backed up.

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
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::{Entry, FileKind, Follow, Removal};
use serde_json::{Map, Value};

/// `_fsgate/rm`.
#[derive(Debug, Clone)]
pub struct Rm {
    /// Path as given.
    pub path: String,
    /// Remove directories with their content.
    pub recursive: bool,
}

impl Operation for Rm {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Rm);

    fn name() -> &'static str {
        ChangeOp::Rm.name()
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
        cx.rm(&self.path, self.recursive, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path)
    }
}

impl Cx<'_> {
    pub(crate) fn rm(
        &self,
        path: &str,
        recursive: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if rp.rel.is_root() {
            return Err(GatewayError::Refused {
                reason: "the workspace root cannot be removed".into(),
                rule: crate::rules::RULE_BOUNDARY.into(),
                path: rp.shown,
            });
        }
        let res = self.locate(
            OpClass::Delete,
            &rp,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        facts.real.0 = Some(res.real.as_str().to_string());
        let inspected;
        let expect = if self.is_real_dir(&res.real) {
            match self.prepare_dir_removal((&rp, &res.real), recursive, facts)? {
                Some(entries) => {
                    inspected = entries;
                    Removal::Tree(&inspected)
                }
                None => Removal::Dir,
            }
        } else {
            self.prepare_file_removal((&rp, &res.real), facts)?
        };
        self.intend(facts)?;
        self.workspace
            .remove(&res.real, expect)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }

    /// A directory to remove, checked; with `recursive`, every entry beneath it is
    /// checked and each file backed up, and the entries are returned (the removal
    /// must find exactly them).
    fn prepare_dir_removal(
        &self,
        (rp, real): (&crate::scope::ReqPath, &RelPath),
        recursive: bool,
        facts: &mut Facts,
    ) -> Result<Option<Vec<Entry>>, GatewayError> {
        // What is removed, so that an undo knows what to make again.
        facts.args.insert("removed".into(), "directory".into());
        self.check(OpClass::Delete, real, EntryKind::Dir, &rp.shown, facts)?;
        if !recursive {
            return Ok(None);
        }
        let entries = self.descendants(real, &rp.shown)?;
        self.check_subtree(real, None, &entries, &rp.shown, facts)?;
        for e in &entries {
            if e.kind == FileKind::File {
                self.saver.backup_inspected(e, &rp.shown, facts)?;
            }
        }
        let leaves = leaf_dirs(&entries);
        if !leaves.is_empty() {
            facts.args.insert("leafDirs".into(), leaves.into());
        }
        Ok(Some(entries))
    }

    /// A file, link or special file to remove, checked; a regular file is backed up
    /// first, and the removal must find the very file saved (or no regular file, for a
    /// link).
    fn prepare_file_removal(
        &self,
        (rp, real): (&crate::scope::ReqPath, &RelPath),
        facts: &mut Facts,
    ) -> Result<Removal<'static>, GatewayError> {
        self.check(OpClass::Delete, real, EntryKind::File, &rp.shown, facts)?;
        let kind = self.workspace.entry_kind(real).ok();
        let removed = match kind {
            Some(FileKind::Symlink) => "link",
            Some(FileKind::Other) => "other",
            _ => "file",
        };
        facts.args.insert("removed".into(), removed.into());
        let mut expect = Removal::File;
        if let Some(info) = self
            .workspace
            .stat(real)
            .ok()
            .filter(|i| i.kind == FileKind::File)
        {
            self.check_size(Access::Rm, (rp, real), info.size, facts)?;
            self.saver.backup(real, &rp.shown, facts)?;
            if let Some((dev, ino)) = facts.saved_file {
                expect = Removal::Saved(dev, ino);
            }
        } else if kind.is_some_and(|k| k != FileKind::File) {
            // A link (or special file): nothing to back up, so nothing else may be
            // removed in its place.
            expect = Removal::NotAFile;
        }
        Ok(expect)
    }
}

/// The directories beneath a removed one that hold neither a file nor a directory: the
/// backups of its files make the others again, an undo makes these.
fn leaf_dirs(entries: &[fsgate_workspace::Entry]) -> Vec<String> {
    let parents: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| matches!(e.kind, FileKind::File | FileKind::Directory))
        .filter_map(|e| e.path.as_str().rsplit_once('/').map(|(p, _)| p))
        .collect();
    entries
        .iter()
        .filter(|e| e.kind == FileKind::Directory && !parents.contains(e.path.as_str()))
        .map(|e| e.path.as_str().to_owned())
        .collect()
}

/// An `rm` cut short by a crash: applied if the path is gone, not applied if the file
/// still holds what it held.
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    match &disk.path {
        OnDisk::Missing => Found::Applied,
        OnDisk::File(h) if Some(h) == disk.intent.old_sha256.as_ref() => Found::NotApplied,
        OnDisk::File(_) | OnDisk::Dir | OnDisk::Link(_) | OnDisk::Other => Found::Neither,
    }
}

/// A removed path leaves the index, with everything beneath it.
pub(crate) fn staging(path: &RelPath) -> Vec<Step<'_>> {
    vec![Step::Remove(path)]
}
