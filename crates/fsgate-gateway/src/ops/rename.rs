//! rename: move a file or directory; every end of the move is checked by the policy.

use crate::ops::{Output, RequestCtx};
use crate::reconcile::{Disk, Found, OnDisk};
use crate::vcs::Step;
use crate::{Facts, Gateway, ReqPath, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_policy::Policy;
use fsgate_workspace::FileKind;
use fsgate_workspace::{Follow, Resolved, WsError};

/// Both ends of a move: as requested, and where they really are.
struct Ends {
    src: ReqPath,
    dst: ReqPath,
    sres: Resolved,
    dres: Resolved,
}

impl Gateway {
    /// Moves `from` to `to`; with `replace` false, nothing at `to` is ever replaced:
    /// the move is refused if something is there, and the rename itself checks it
    /// (`RENAME_NOREPLACE`), so of several moves onto one name only one succeeds.
    pub(crate) fn rename(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        (from, to): (&str, &str),
        replace: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let ends = self.rename_ends(pol, ctx, from, to, facts)?;
        let Ends {
            src,
            dst,
            sres,
            dres,
        } = &ends;
        facts.real = (
            Some(sres.real.as_str().to_string()),
            Some(dres.real.as_str().to_string()),
        );
        if dres.missing > 1 {
            return Err(GatewayError::MissingParent {
                path: dst.shown.clone(),
                hint: "; create it first (mkdir)",
            });
        }
        if self.is_real_dir(&sres.real) {
            self.check_dir_move(pol, &ends, facts)?;
        } else {
            self.check_file_move(pol, &ends, facts)?;
        }
        // Only once the policy allowed the destination: a refusal says it exists.
        if !replace {
            return self.rename_no_replace(pol, ctx, &ends, facts);
        }
        if dres.exists
            && self
                .workspace
                .stat(&dres.real)
                .is_ok_and(|i| i.kind == FileKind::File)
        {
            self.backup(&dres.real, &dst.shown, facts)?;
        }
        let may = crate::write::may_replace(dres.exists, facts);
        self.intend(pol, ctx, facts)?;
        self.workspace
            .rename(&sres.real, &dres.real, may)
            .map_err(|e| ws_error(e, &src.shown))?;
        self.note_moved(sres, dres);
        Ok(Output::Unit)
    }

    /// A move that replaces nothing: no backup (nothing is replaced), then the intent,
    /// then the one rename that fails if anything took the name meanwhile.
    fn rename_no_replace(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        e: &Ends,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let exists = || ws_error(WsError::DestinationExists, &e.dst.shown);
        if e.dres.exists {
            return Err(exists());
        }
        self.intend(pol, ctx, facts)?;
        self.workspace
            .rename_no_replace(&e.sres.real, &e.dres.real)
            .map_err(|err| match err {
                WsError::DestinationExists => exists(),
                other => ws_error(other, &e.src.shown),
            })?;
        self.note_moved(&e.sres, &e.dres);
        Ok(Output::Unit)
    }

    /// The backup store follows the moved file's versions to its new name.
    fn note_moved(&self, sres: &Resolved, dres: &Resolved) {
        if let Some(store) = self.backups() {
            store.note_moved(sres.real.as_str(), dres.real.as_str());
        }
    }

    /// Parses and locates both ends, refusing moves that make no sense. The source is
    /// decided in full (a file: `delete`, then `read`) before the target is looked at,
    /// so the first refusal is the one `explain` finds checking in that order.
    fn rename_ends(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        from: &str,
        to: &str,
        facts: &mut Facts,
    ) -> Result<Ends, GatewayError> {
        let src = self.parse_path(ctx, from)?;
        let dst = self.parse_path(ctx, to)?;
        facts.path = Some(src.rel.as_str().to_string());
        facts.path2 = Some(dst.rel.as_str().to_string());
        let invalid = |m: &str| Err(GatewayError::InvalidParams(m.into()));
        if src.rel.is_root() || dst.rel.is_root() {
            return invalid("cannot rename the workspace root");
        }
        if dst.rel == src.rel {
            return invalid("oldPath and newPath name the same entry");
        }
        if dst.rel.starts_with(&src.rel) {
            return invalid("cannot move a directory into itself");
        }
        let sres = self.locate(
            pol,
            OpClass::Delete,
            &src,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !sres.exists {
            // The target is still checked first: a refusal there says less than this.
            self.locate(
                pol,
                OpClass::Write,
                &dst,
                Follow::NotFinal,
                EntryKind::Unknown,
                facts,
            )?;
            return Err(GatewayError::NotFound { path: src.shown });
        }
        self.refuse_unmovable(&src, &sres)?;
        if !self.is_real_dir(&sres.real) {
            self.check_file_source(pol, (&src, &sres.real), facts)?;
        }
        let dres = self.locate(
            pol,
            OpClass::Write,
            &dst,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        // Into itself through a link: the requested paths did not show it, the real ones
        // do (the kernel would answer a bare EINVAL).
        if dres.real != sres.real && dres.real.starts_with(&sres.real) {
            return invalid("cannot move a directory into itself");
        }
        Ok(Ends {
            src,
            dst,
            sres,
            dres,
        })
    }

    /// Only files and directories move: fsgate never creates symlinks or special files
    /// (its kernel sandbox grants no right to), and a rename would. A hard-linked file may
    /// be a link to a file outside: moving it is refused like reading it.
    fn refuse_unmovable(&self, src: &ReqPath, sres: &Resolved) -> Result<(), GatewayError> {
        let kind = self
            .workspace
            .entry_kind(&sres.real)
            .map_err(|e| ws_error(e, &src.shown))?;
        let what = match kind {
            FileKind::Symlink => "a symlink",
            FileKind::Other => "a special file",
            FileKind::File | FileKind::Directory => "",
        };
        if !what.is_empty() {
            return Err(GatewayError::Refused {
                reason: format!(
                    "`{}` is {what}; only regular files and directories can be renamed",
                    src.rel
                ),
                rule: crate::RULE_FILE_TYPE.into(),
                path: src.shown.clone(),
            });
        }
        if kind == FileKind::File {
            let info = self
                .workspace
                .stat(&sres.real)
                .map_err(|e| ws_error(e, &src.shown))?;
            if info.nlink > 1 {
                return Err(ws_error(WsError::HardLink(info.nlink), &src.shown));
            }
        }
        Ok(())
    }

    /// A directory: deletable where it is, writable where it goes, and so is everything
    /// beneath it.
    fn check_dir_move(
        &self,
        pol: &Policy,
        e: &Ends,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        for p in [&e.sres.real, &e.src.rel] {
            Self::check(pol, OpClass::Delete, p, EntryKind::Dir, &e.src.shown, facts)?;
        }
        for p in [&e.dres.real, &e.dst.rel] {
            Self::check(pol, OpClass::Write, p, EntryKind::Dir, &e.dst.shown, facts)?;
        }
        let entries = self.descendants(&e.sres.real, &e.src.shown)?;
        let below = fsgate_workspace::height(&e.sres.real, &entries);
        Self::check_depth(&e.dres.real, below, &e.dst.shown)?;
        Self::check_subtree(
            pol,
            &e.sres.real,
            Some(&e.dres.real),
            &entries,
            &e.src.shown,
            facts,
        )?;
        let moved = (&e.sres.real, &e.dres.real);
        self.check_moved_links(moved, &entries, &e.dst.shown, facts)
    }

    /// What the policy knows of a file: its size when some rule has a size condition
    /// (0 if it is not there).
    fn file_facts(
        &self,
        pol: &Policy,
        real: &fsgate_base::path::RelPath,
        exists: bool,
    ) -> PathFacts {
        if !pol.has_size_rules() {
            return PathFacts::kind(EntryKind::File);
        }
        let size = if exists {
            self.workspace.stat(real).map_or(0, |i| i.size)
        } else {
            0
        };
        PathFacts::file(size)
    }

    /// A moved file where it is: deletable, and readable (moving content must not make
    /// readable what was not), decided knowing its size.
    fn check_file_source(
        &self,
        pol: &Policy,
        (src, real): (&ReqPath, &fsgate_base::path::RelPath),
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let pf = self.file_facts(pol, real, true);
        let (delete, read) = (Access::Class(OpClass::Delete), Access::Class(OpClass::Read));
        for p in [&src.rel, real] {
            Self::check_entry(pol, delete, p, &pf, &src.shown, facts)?;
            Self::check_entry(pol, read, p, &pf, &src.shown, facts)?;
        }
        Ok(())
    }

    /// A moved file where it goes: writable, at the larger of its size and the size of
    /// the file it replaces, and its content passes the content rules at both ends
    /// (they can depend on the path, and a move must not carry a secret out of a rule's
    /// reach). A file over the read limit cannot be read here or there.
    fn check_file_move(
        &self,
        pol: &Policy,
        e: &Ends,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let src = self.file_facts(pol, &e.sres.real, true);
        let replaced = self.file_facts(pol, &e.dres.real, e.dres.exists);
        let dst_pf = match (src.size, replaced.size) {
            (Some(a), Some(b)) => PathFacts::file(a.max(b)),
            _ => src,
        };
        let write = Access::Class(OpClass::Write);
        for p in [&e.dst.rel, &e.dres.real] {
            Self::check_entry(pol, write, p, &dst_pf, &e.dst.shown, facts)?;
        }
        Self::check_depth(&e.dres.real, 0, &e.dst.shown)?;
        if pol.content_scanner().is_none() {
            return Ok(());
        }
        let content = match self
            .workspace
            .read_file(&e.sres.real, pol.limits().max_read_bytes)
        {
            Ok(c) => c,
            Err(WsError::TooLarge { .. }) => return Ok(()),
            Err(err) => return Err(ws_error(err, &e.src.shown)),
        };
        Self::check_content(
            pol,
            OpClass::Read,
            &e.sres.real,
            &content.bytes,
            &e.src.shown,
        )?;
        Self::check_content(
            pol,
            OpClass::Write,
            &e.dres.real,
            &content.bytes,
            &e.dst.shown,
        )
    }
}

/// A `rename` cut short by a crash: applied if the source is gone and the destination
/// is there; not applied if the source is there and the destination still holds what
/// it held (nothing, or the old file the rename replaced).
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    let to_is_old = match (&disk.path2, &disk.intent.old_sha256) {
        (OnDisk::Missing, None) => true,
        (OnDisk::File(h), Some(old)) => h == old,
        _ => false,
    };
    match (&disk.path, &disk.path2) {
        (OnDisk::Missing, OnDisk::File(_) | OnDisk::Dir) => Found::Applied,
        (OnDisk::File(_) | OnDisk::Dir, _) if to_is_old => Found::NotApplied,
        _ => Found::Neither,
    }
}

/// The source leaves the index and the destination is added; a rename whose record
/// lost its destination stages nothing.
pub(crate) fn staging<'a>(from: &'a RelPath, to: Option<&'a RelPath>) -> Vec<Step<'a>> {
    match to {
        Some(to) => vec![Step::Remove(from), Step::Add(to)],
        None => Vec::new(),
    }
}
