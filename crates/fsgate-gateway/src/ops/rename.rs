//! rename: move a file, directory or symbolic link; every end of the move is checked
//! by the policy (a link's own checks: `rename_link.rs`).

use crate::crash::{Disk, Found, OnDisk};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use crate::scope::ReqPath;
use crate::vcs::step::Step;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_workspace::FileKind;
use fsgate_workspace::{Entry, Follow, Resolved, WsError};
use serde_json::{Map, Value};

/// Both ends of a move: as requested, and where they really are.
pub(super) struct Ends {
    pub(super) src: ReqPath,
    pub(super) dst: ReqPath,
    pub(super) sres: Resolved,
    pub(super) dres: Resolved,
    /// The moved link's target, when a link is moved.
    link: Option<String>,
}

/// `_fsgate/rename`.
#[derive(Debug, Clone)]
pub struct Rename {
    /// Source as given.
    pub from: String,
    /// Destination as given.
    pub to: String,
    /// May replace a file at the destination (kept as a backup); if not, the move
    /// is refused when anything is there, checked by the rename itself.
    pub replace: bool,
}

impl Operation for Rename {
    const CHANGE: Option<ChangeOp> = Some(ChangeOp::Rename);

    fn name() -> &'static str {
        ChangeOp::Rename.name()
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.from.as_str()), ("path2", self.to.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.from), Some(&mut self.to))
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        // Named only when false, so a replacing rename's record is as it always was.
        if !self.replace {
            args.insert("replace".into(), false.into());
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.rename((&self.from, &self.to), self.replace, facts)
    }

    fn found_after_crash(disk: &Disk<'_>) -> Found {
        found_after_crash(disk)
    }

    fn staging<'p>(path: &'p RelPath, path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        staging(path, path2)
    }
}

impl Cx<'_> {
    /// Moves `from` to `to`; with `replace` false, nothing at `to` is ever replaced:
    /// the move is refused if something is there, and the rename itself checks it
    /// (`RENAME_NOREPLACE`), so of several moves onto one name only one succeeds.
    pub(crate) fn rename(
        &self,
        (from, to): (&str, &str),
        replace: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let ends = self.rename_ends(from, to, facts)?;
        let Ends {
            dst,
            sres,
            dres,
            link,
            ..
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
        let mut checked = None;
        if let Some(target) = link {
            self.check_link_move(&ends, target, facts)?;
        } else if self.is_real_dir(&sres.real) {
            checked = Some(self.check_dir_move(&ends, facts)?);
        } else {
            self.check_file_move(&ends, facts)?;
        }
        let moved = self.rename_checked(&ends, replace, facts)?;
        if let Some(checked) = checked {
            self.moved_as_checked(&ends, &checked)?;
        }
        Ok(moved)
    }

    /// The rename itself, once the policy allowed both ends.
    fn rename_checked(
        &self,
        ends: &Ends,
        replace: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let Ends {
            src,
            dst,
            sres,
            dres,
            ..
        } = ends;
        // Only once the policy allowed the destination: a refusal says it exists.
        if !replace {
            return self.rename_no_replace(ends, facts);
        }
        if dres.exists
            && self
                .workspace
                .stat(&dres.real)
                .is_ok_and(|i| i.kind == FileKind::File)
        {
            self.saver.backup(&dres.real, &dst.shown, facts)?;
        } else if dres.exists {
            self.note_replaced_link(ends, facts)?;
        }
        let may = crate::write::may_replace(dres.exists, facts);
        self.intend(facts)?;
        self.workspace
            .rename(&sres.real, &dres.real, may)
            .map_err(|e| ws_error(e, &src.shown))?;
        self.note_moved(sres, dres);
        Ok(Output::Unit)
    }

    /// A moved directory holds, where it went, only what was checked before it moved:
    /// another process could put an entry in it while its entries were being checked,
    /// judged where the directory was (or where it went) at that moment. An entry that
    /// was not checked is decided again: if the policy lets it be written where it is
    /// now, the move stands; else, if where the directory came from, it is moved back
    /// (and the move refused); else it is left where it is, the move refused. A tree
    /// that cannot be inspected again is moved back.
    fn moved_as_checked(&self, e: &Ends, checked: &[Entry]) -> Result<(), GatewayError> {
        let suffix = |base: &RelPath, en: &Entry| {
            en.path
                .as_str()
                .get(base.as_str().len()..)
                .map(str::to_owned)
        };
        let key = |base: &RelPath, en: &Entry| (suffix(base, en), en.id, en.kind);
        let before: std::collections::HashSet<_> =
            checked.iter().map(|en| key(&e.sres.real, en)).collect();
        let now = match self.descendants(&e.dres.real, &e.dst.shown) {
            Ok(now) => now,
            Err(err) => {
                let why = format!("the directory could not be inspected again once moved ({err})");
                return Err(self.move_back(e, why));
            }
        };
        let new: Vec<&Entry> = (now.iter())
            .filter(|en| !before.contains(&key(&e.dres.real, en)))
            .collect();
        let writable_at = |base: &RelPath| {
            new.iter().all(|en| {
                let kind = match en.kind {
                    FileKind::Directory => EntryKind::Dir,
                    FileKind::File => EntryKind::File,
                    _ => EntryKind::Unknown,
                };
                let rel = suffix(&e.dres.real, en).unwrap_or_default();
                RelPath::parse_rooted(&format!("{}{rel}", base.as_str()))
                    .is_ok_and(|p| self.pol.engine().decide(OpClass::Write, &p, kind).allowed())
            })
        };
        let Some(first) = new.first().filter(|_| !writable_at(&e.dres.real)) else {
            return Ok(());
        };
        let why = format!(
            "`{}` appeared in the directory while it was being checked",
            first.path
        );
        if writable_at(&e.sres.real) {
            return Err(self.move_back(e, why));
        }
        Err(GatewayError::Refused {
            reason: format!(
                "{why}, and the policy lets it be written at neither end: it is at the new name"
            ),
            rule: crate::rules::RULE_UNINSPECTED.into(),
            path: e.dst.shown.clone(),
        })
    }

    /// Moves a moved directory back where it was (the backup store follows it), and
    /// the refusal saying `why`.
    fn move_back(&self, e: &Ends, why: String) -> GatewayError {
        let reason = match self.workspace.rename_no_replace(&e.dres.real, &e.sres.real) {
            Ok(()) => {
                self.note_moved(&e.dres, &e.sres);
                format!("{why}; it was moved back")
            }
            // Its old name was taken meanwhile (perhaps on purpose, to keep the tree
            // where it went): it goes beside it, under a name of its own.
            Err(WsError::DestinationExists) => match self.move_beside(e) {
                Ok(beside) => {
                    format!("{why}; its old name was taken, so it was moved to `{beside}`")
                }
                Err(err) => {
                    format!("{why}, and moving it back failed ({err}): it is at the new name")
                }
            },
            Err(err) => format!("{why}, and moving it back failed ({err}): it is at the new name"),
        };
        GatewayError::Refused {
            reason,
            rule: crate::rules::RULE_UNINSPECTED.into(),
            path: e.dst.shown.clone(),
        }
    }

    /// Moves a moved directory beside its old name, taken meanwhile: `NAME.moved-back`,
    /// then `NAME.moved-back-2`..; the name it got.
    fn move_beside(&self, e: &Ends) -> Result<String, WsError> {
        let mut last = WsError::DestinationExists;
        for n in 1..=16 {
            let name = match n {
                1 => format!("{}.moved-back", e.sres.real.as_str()),
                n => format!("{}.moved-back-{n}", e.sres.real.as_str()),
            };
            let Ok(to) = RelPath::parse_rooted(&name) else {
                break;
            };
            match self.workspace.rename_no_replace(&e.dres.real, &to) {
                Ok(()) => {
                    if let Some(store) = self.saver.backups() {
                        store.note_moved(e.dres.real.as_str(), to.as_str());
                    }
                    return Ok(name);
                }
                Err(err) => last = err,
            }
        }
        Err(last)
    }

    /// A move that replaces nothing: no backup (nothing is replaced), then the intent,
    /// then the one rename that fails if anything took the name meanwhile.
    fn rename_no_replace(&self, e: &Ends, facts: &mut Facts) -> Result<Output, GatewayError> {
        let exists = || ws_error(WsError::DestinationExists, &e.dst.shown);
        if e.dres.exists {
            return Err(exists());
        }
        self.intend(facts)?;
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
        if let Some(store) = self.saver.backups() {
            store.note_moved(sres.real.as_str(), dres.real.as_str());
        }
    }

    /// Parses and locates both ends, refusing moves that make no sense. The source is
    /// decided in full (a file: `delete`, then `read`) before the target is looked at,
    /// so the first refusal is the one `explain` finds checking in that order.
    fn rename_ends(&self, from: &str, to: &str, facts: &mut Facts) -> Result<Ends, GatewayError> {
        let src = self.parse_path(from)?;
        let dst = self.parse_path(to)?;
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
            OpClass::Delete,
            &src,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !sres.exists {
            // The target is still checked first: a refusal there says less than this.
            self.locate(
                OpClass::Write,
                &dst,
                Follow::NotFinal,
                EntryKind::Unknown,
                facts,
            )?;
            return Err(GatewayError::NotFound { path: src.shown });
        }
        self.refuse_unmovable(&src, &sres)?;
        let link = self.link_target(&sres.real, &src.shown)?;
        if let Some(target) = &link {
            facts.args.insert("target".into(), target.clone().into());
        }
        if !self.is_real_dir(&sres.real) {
            self.check_file_source((&src, &sres.real), facts)?;
        }
        let dres = self.locate(
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
            link,
        })
    }

    /// Files, directories and symbolic links move; special files do not (fsgate never
    /// creates one: its kernel sandbox grants no right to, and a rename would). A
    /// hard-linked file may be a link to a file outside: moving it is refused like
    /// reading it.
    fn refuse_unmovable(&self, src: &ReqPath, sres: &Resolved) -> Result<(), GatewayError> {
        let kind = self
            .workspace
            .entry_kind(&sres.real)
            .map_err(|e| ws_error(e, &src.shown))?;
        if kind == FileKind::Other {
            return Err(GatewayError::Refused {
                reason: format!(
                    "`{}` is a special file; only regular files, directories and symbolic links can be renamed",
                    src.rel
                ),
                rule: crate::rules::RULE_FILE_TYPE.into(),
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
    fn check_dir_move(&self, e: &Ends, facts: &mut Facts) -> Result<Vec<Entry>, GatewayError> {
        for p in [&e.sres.real, &e.src.rel] {
            self.check(OpClass::Delete, p, EntryKind::Dir, &e.src.shown, facts)?;
        }
        for p in [&e.dres.real, &e.dst.rel] {
            self.check(OpClass::Write, p, EntryKind::Dir, &e.dst.shown, facts)?;
        }
        let entries = self.descendants(&e.sres.real, &e.src.shown)?;
        let below = fsgate_workspace::height(&e.sres.real, &entries);
        Self::check_depth(&e.dres.real, below, &e.dst.shown)?;
        self.check_subtree(
            &e.sres.real,
            Some(&e.dres.real),
            &entries,
            &e.src.shown,
            facts,
        )?;
        let moved = (&e.sres.real, &e.dres.real);
        self.check_moved_links(moved, &entries, &e.dst.shown, facts)?;
        Ok(entries)
    }

    /// What the policy knows of a file: its size when some rule has a size condition
    /// (0 if it is not there).
    fn file_facts(&self, real: &fsgate_base::path::RelPath, exists: bool) -> PathFacts {
        if !self.pol.has_size_rules() {
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
        (src, real): (&ReqPath, &fsgate_base::path::RelPath),
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let pf = self.file_facts(real, true);
        let (delete, read) = (Access::Class(OpClass::Delete), Access::Class(OpClass::Read));
        for p in [&src.rel, real] {
            self.check_entry(delete, p, &pf, &src.shown, facts)?;
            self.check_entry(read, p, &pf, &src.shown, facts)?;
        }
        Ok(())
    }

    /// A moved file where it goes: writable, at the larger of its size and the size of
    /// the file it replaces, and its content passes the content rules at both ends
    /// (they can depend on the path, and a move must not carry a secret out of a rule's
    /// reach).
    fn check_file_move(&self, e: &Ends, facts: &mut Facts) -> Result<(), GatewayError> {
        let src = self.file_facts(&e.sres.real, true);
        let replaced = self.file_facts(&e.dres.real, e.dres.exists);
        let dst_pf = match (src.size, replaced.size) {
            (Some(a), Some(b)) => PathFacts::file(a.max(b)),
            _ => src,
        };
        let write = Access::Class(OpClass::Write);
        for p in [&e.dst.rel, &e.dres.real] {
            self.check_entry(write, p, &dst_pf, &e.dst.shown, facts)?;
        }
        Self::check_depth(&e.dres.real, 0, &e.dst.shown)?;
        if self.pol.content_scanner().is_none() {
            return Ok(());
        }
        self.check_moved_content(
            (&e.sres.real, &e.dres.real),
            (&e.src.shown, &e.dst.shown),
            facts,
        )
    }

    /// The content of a file moved from `src` to `dst` passes the content rules at both
    /// ends. A file over both the read limit and a process's (through the view) can be
    /// read by no door, here or there.
    pub(crate) fn check_moved_content(
        &self,
        (src, dst): (&RelPath, &RelPath),
        (src_shown, dst_shown): (&str, &str),
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let l = self.pol.limits();
        let readable = l.max_read_bytes.max(l.max_process_file_bytes);
        // Held while it is scanned, and let go once it is: room for it first (see
        // `budget`). Each file of a moved directory's takes its turn, so the lease is
        // this function's, never kept in `facts` while the next file waits for room.
        let (budget, waiting) = (self.budget, facts.waiting);
        let mut held = None;
        let lease = |size| held = Some(budget.lease_as(size, waiting));
        let content = match self.workspace.read_file_sized(src, readable, lease) {
            Ok(c) => c,
            // No door reads either (a hard link may be a file outside): moving it
            // makes nothing readable.
            Err(WsError::TooLarge { .. } | WsError::HardLink(_)) => return Ok(()),
            Err(err) => return Err(ws_error(err, src_shown)),
        };
        self.check_content(OpClass::Read, src, &content.bytes, src_shown)?;
        self.check_content(OpClass::Write, dst, &content.bytes, dst_shown)
    }
}

/// A `rename` cut short by a crash: applied if the source is gone and the destination
/// holds what moved (a file, a directory, or the link with the intent's target); not
/// applied if the source is there and the destination still holds what it held
/// (nothing, the old file the rename replaced, or the old link, `args.oldTarget`).
pub(crate) fn found_after_crash(disk: &Disk<'_>) -> Found {
    let intent = disk.intent;
    let is_link = |to: &std::path::Path, want: &Option<String>| {
        want.as_deref().map(std::path::Path::new) == Some(to)
    };
    let to_is_old = match (&disk.path2, &intent.old_sha256) {
        (OnDisk::Missing, None) => intent.old_target.is_none(),
        (OnDisk::File(h), Some(old)) => h == old,
        (OnDisk::Link(to), None) => is_link(to, &intent.old_target),
        _ => false,
    };
    let moved_is_there = match &disk.path {
        OnDisk::File(_) | OnDisk::Dir => intent.target.is_none(),
        OnDisk::Link(to) => is_link(to, &intent.target),
        OnDisk::Missing | OnDisk::Other => false,
    };
    match (&disk.path, &disk.path2) {
        (OnDisk::Missing, OnDisk::File(_) | OnDisk::Dir) if intent.target.is_none() => {
            Found::Applied
        }
        (OnDisk::Missing, OnDisk::Link(to)) if is_link(to, &intent.target) => Found::Applied,
        _ if moved_is_there && to_is_old => Found::NotApplied,
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
