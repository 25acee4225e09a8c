//! write, edit, mkdir, rm, rename: every end of every change checked by the policy.

use super::{Facts, Gateway, ReqPath, visible, ws_error};
use crate::error::GatewayError;
use crate::ops::{Output, RequestCtx};
use crate::path::RelPath;
use crate::policy::{EntryKind, OpClass, Policy};
use crate::workspace::{Entry, EntryType, Follow, Resolved, Visit, WsError};

impl Gateway {
    /// Saves the current content of the regular file at `real` to the backup store
    /// before it is replaced or removed. No backup, no change (fail closed).
    fn backup(&self, real: &RelPath, shown: &str, facts: &mut Facts) -> Result<(), GatewayError> {
        let Some(store) = self.backups() else {
            return Ok(());
        };
        let (mut file, _) = self
            .workspace
            .open_regular(real)
            .map_err(|e| ws_error(e, shown))?;
        let saved = store.save(real.as_str(), &mut file).map_err(|e| {
            GatewayError::Internal(format!(
                "cannot back up the previous content of {shown}, so nothing was changed: {e}"
            ))
        })?;
        facts.old_sha256 = Some(saved.sha256);
        facts.backups.push(saved.id);
        let n = self
            .saves
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        if n.is_multiple_of(super::PRUNE_EVERY) {
            self.prune_backups();
        }
        Ok(())
    }

    /// Checks `write` on each directory that a write or mkdir would create.
    fn check_missing_parents(
        &self,
        pol: &Policy,
        rp: &ReqPath,
        res: &Resolved,
        include_self: bool,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let mut dirs = Vec::new();
        let mut cur = if include_self {
            Some(res.real.clone())
        } else {
            res.real.parent()
        };
        let mut n = if include_self {
            res.missing
        } else {
            res.missing.saturating_sub(1)
        };
        while n > 0 {
            let Some(d) = cur else { break };
            cur = d.parent();
            dirs.push(d);
            n -= 1;
        }
        for d in dirs.iter().rev() {
            Self::check(pol, OpClass::Write, d, EntryKind::Dir, &rp.shown, facts)?;
        }
        Ok(())
    }

    pub(super) fn write(
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
        let res = self.locate(
            pol,
            OpClass::Write,
            &rp,
            Follow::All,
            EntryKind::File,
            facts,
        )?;
        let limit = pol.limits().max_write_bytes;
        if content.len() as u64 > limit {
            return Err(GatewayError::Limit {
                reason: format!(
                    "{} bytes exceeds the write limit of {limit} bytes",
                    content.len()
                ),
                rule: "limits.max_write_bytes".into(),
                path: rp.shown,
            });
        }
        Self::check_content(pol, OpClass::Write, &res.real, content, &rp.shown)?;
        if res.missing > 1 {
            self.check_missing_parents(pol, &rp, &res, false, facts)?;
        }
        if res.exists {
            self.backup(&res.real, &rp.shown, facts)?;
        }
        facts.content(content);
        self.intend(pol, ctx, facts)?;
        if res.missing > 1
            && let Some(parent) = res.real.parent()
        {
            self.workspace
                .create_dirs(&parent)
                .map_err(|e| ws_error(e, &rp.shown))?;
        }
        self.workspace
            .write_atomic(&res.real, content)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }

    pub(super) fn edit(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
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
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(
            pol,
            OpClass::Write,
            &rp,
            Follow::All,
            EntryKind::File,
            facts,
        )?;
        let (bytes, shown) = self.read_bytes(pol, ctx, path, facts)?;
        // The record names the write rule that allowed the edit, not the read rule.
        facts.decided(&pol.decide(OpClass::Write, &res.real, EntryKind::File));
        let text = super::read::text_or_refuse(pol, bytes, &shown)?;
        let count = occurrences(&text, old_text);
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
        let updated = text.replacen(old_text, new_text, 1);
        let limit = pol.limits().max_write_bytes;
        if updated.len() as u64 > limit {
            return Err(GatewayError::Limit {
                reason: format!(
                    "edited file of {} bytes exceeds the write limit of {limit} bytes",
                    updated.len()
                ),
                rule: "limits.max_write_bytes".into(),
                path: rp.shown,
            });
        }
        Self::check_content(
            pol,
            OpClass::Write,
            &res.real,
            updated.as_bytes(),
            &rp.shown,
        )?;
        self.backup(&res.real, &rp.shown, facts)?;
        facts.content(updated.as_bytes());
        self.intend(pol, ctx, facts)?;
        self.workspace
            .write_atomic(&res.real, updated.as_bytes())
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }

    pub(super) fn mkdir(
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
                if info.kind == "directory" {
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
        self.check_missing_parents(pol, &rp, &res, true, facts)?;
        self.intend(pol, ctx, facts)?;
        self.workspace
            .mkdir(&res.real, recursive)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }

    /// Everything beneath a directory, for checks before a recursive change.
    fn descendants(&self, real: &RelPath, shown: &str) -> Result<Vec<Entry>, GatewayError> {
        let mut all = Vec::new();
        self.workspace
            .walk(real, &mut |e| {
                all.push(e.clone());
                Visit::Descend
            })
            .map_err(|e| ws_error(e, shown))?;
        Ok(all)
    }

    pub(super) fn rm(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        recursive: bool,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if rp.rel.is_root() {
            return Err(GatewayError::Refused {
                reason: "the workspace root cannot be removed".into(),
                rule: super::RULE_BOUNDARY.into(),
                path: rp.shown,
            });
        }
        let res = self.locate(
            pol,
            OpClass::Delete,
            &rp,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        let is_dir = self.is_real_dir(&res.real);
        if is_dir {
            Self::check(
                pol,
                OpClass::Delete,
                &res.real,
                EntryKind::Dir,
                &rp.shown,
                facts,
            )?;
            if recursive {
                self.check_subtree(pol, &res.real, None, &rp.shown, facts)?;
                for e in self.descendants(&res.real, &rp.shown)? {
                    if e.kind == EntryType::File {
                        self.backup(&e.path, &rp.shown, facts)?;
                    }
                }
            }
        } else {
            Self::check(
                pol,
                OpClass::Delete,
                &res.real,
                EntryKind::File,
                &rp.shown,
                facts,
            )?;
            if self
                .workspace
                .stat(&res.real)
                .is_ok_and(|i| i.kind == "file")
            {
                self.backup(&res.real, &rp.shown, facts)?;
            }
        }
        self.intend(pol, ctx, facts)?;
        self.workspace
            .remove(&res.real, recursive)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok(Output::Unit)
    }

    /// For a recursive change of the directory `src`: every entry beneath must be
    /// visible and deletable, and (when moved to `dst`) writable at its new place.
    fn check_subtree(
        &self,
        pol: &Policy,
        src: &RelPath,
        dst: Option<&RelPath>,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        for e in self.descendants(src, shown)? {
            let kind = if e.kind == EntryType::Directory {
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            if !visible(pol, &e) {
                return Err(GatewayError::Refused {
                    reason: "the directory holds entries the policy hides; they cannot be removed or moved".into(),
                    rule: "protected-entries".into(),
                    path: shown.to_string(),
                });
            }
            Self::check(pol, OpClass::Delete, &e.path, kind, shown, facts)?;
            if let (Some(dst), Some(rest)) = (dst, e.path.strip_prefix(src)) {
                let target = RelPath::parse_rooted(&format!("/{}/{}", dst.as_str(), rest.as_str()))
                    .unwrap_or_else(|_| dst.clone());
                Self::check(pol, OpClass::Write, &target, kind, shown, facts)?;
            }
        }
        Ok(())
    }

    fn is_real_dir(&self, real: &RelPath) -> bool {
        // `real` is canonical except maybe its last component, which stat does not
        // follow (openat2 refuses symlinks), so a link to a directory is not a directory.
        self.workspace
            .stat(real)
            .is_ok_and(|i| i.kind == "directory")
    }

    pub(super) fn rename(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        from: &str,
        to: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let src = self.parse_path(ctx, from)?;
        let dst = self.parse_path(ctx, to)?;
        facts.path = Some(src.rel.as_str().to_string());
        facts.path2 = Some(dst.rel.as_str().to_string());
        if src.rel.is_root() || dst.rel.is_root() {
            return Err(GatewayError::InvalidParams(
                "cannot rename the workspace root".into(),
            ));
        }
        if dst.rel == src.rel {
            return Err(GatewayError::InvalidParams(
                "oldPath and newPath name the same entry".into(),
            ));
        }
        if dst.rel.starts_with(&src.rel) {
            return Err(GatewayError::InvalidParams(
                "cannot move a directory into itself".into(),
            ));
        }
        let sres = self.locate(
            pol,
            OpClass::Delete,
            &src,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        let dres = self.locate(
            pol,
            OpClass::Write,
            &dst,
            Follow::NotFinal,
            EntryKind::Unknown,
            facts,
        )?;
        if !sres.exists {
            return Err(GatewayError::NotFound { path: src.shown });
        }
        // Only files and directories move: fsgate never creates symlinks or special
        // files (its kernel sandbox grants no right to), and a rename would.
        let src_kind = self
            .workspace
            .entry_kind(&sres.real)
            .map_err(|e| ws_error(e, &src.shown))?;
        if src_kind == "symlink" || src_kind == "other" {
            return Err(GatewayError::Refused {
                reason: format!(
                    "`{}` is {}; only regular files and directories can be renamed",
                    src.rel,
                    if src_kind == "symlink" {
                        "a symlink"
                    } else {
                        "a special file"
                    }
                ),
                rule: super::RULE_FILE_TYPE.into(),
                path: src.shown,
            });
        }
        // A hard-linked file may be a link to a file outside: moving it is refused like
        // reading it.
        if src_kind == "file" {
            let info = self
                .workspace
                .stat(&sres.real)
                .map_err(|e| ws_error(e, &src.shown))?;
            if info.nlink > 1 {
                return Err(ws_error(WsError::HardLink(info.nlink), &src.shown));
            }
        }
        if dres.missing > 1 {
            return Err(GatewayError::MissingParent {
                path: dst.shown,
                hint: "; create it first (mkdir)",
            });
        }
        if self.is_real_dir(&sres.real) {
            for (p, class) in [(&sres.real, OpClass::Delete), (&src.rel, OpClass::Delete)] {
                Self::check(pol, class, p, EntryKind::Dir, &src.shown, facts)?;
            }
            for p in [&dres.real, &dst.rel] {
                Self::check(pol, OpClass::Write, p, EntryKind::Dir, &dst.shown, facts)?;
            }
            self.check_subtree(pol, &sres.real, Some(&dres.real), &src.shown, facts)?;
        } else {
            // Moving content must not make readable what was not.
            for p in [&src.rel, &sres.real] {
                Self::check(pol, OpClass::Read, p, EntryKind::File, &src.shown, facts)?;
                Self::check(pol, OpClass::Delete, p, EntryKind::File, &src.shown, facts)?;
            }
            for p in [&dst.rel, &dres.real] {
                Self::check(pol, OpClass::Write, p, EntryKind::File, &dst.shown, facts)?;
            }
            // Content rules can depend on the path: the content must pass them both
            // where it is (as a read) and where it goes (as a write), or a move would
            // carry a secret out of a rule's reach.
            // (A file over the read limit is skipped: it cannot be read here or there.)
            let content = match pol.content_scanner() {
                None => None,
                Some(_) => match self
                    .workspace
                    .read_file(&sres.real, pol.limits().max_read_bytes)
                {
                    Ok(c) => Some(c),
                    Err(WsError::TooLarge { .. }) => None,
                    Err(e) => return Err(ws_error(e, &src.shown)),
                },
            };
            if let Some(content) = content {
                Self::check_content(pol, OpClass::Read, &sres.real, &content.bytes, &src.shown)?;
                Self::check_content(pol, OpClass::Write, &dres.real, &content.bytes, &dst.shown)?;
            }
        }
        if dres.exists
            && self
                .workspace
                .stat(&dres.real)
                .is_ok_and(|i| i.kind == "file")
        {
            self.backup(&dres.real, &dst.shown, facts)?;
        }
        self.intend(pol, ctx, facts)?;
        self.workspace
            .rename(&sres.real, &dres.real)
            .map_err(|e| ws_error(e, &src.shown))?;
        Ok(Output::Unit)
    }
}

/// How many times `needle` occurs in `text` for an exactly-once edit: the count of
/// non-overlapping occurrences, except that a single one overlapped by another (in `aaa`,
/// `aa` starts at 0 and at 1) counts as 2, since "the" occurrence would be ambiguous.
/// Linear time: `str::find` and `str::matches` use the Two-Way search.
pub(crate) fn occurrences(text: &str, needle: &str) -> usize {
    let count = text.matches(needle).count();
    if count != 1 {
        return count;
    }
    let Some(first) = text.find(needle) else {
        return 0;
    };
    let next = first + text[first..].chars().next().map_or(1, char::len_utf8);
    if text[next..].contains(needle) { 2 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::occurrences;

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("abcabc", "abc"), 2);
        assert_eq!(occurrences("xyz", "y"), 1);
        assert_eq!(occurrences("xyz", "q"), 0);
        assert_eq!(occurrences("ééé", "éé"), 2);
        assert_eq!(occurrences("x = 1\ny\nx = 1\n", "x = 1"), 2);
    }

    #[test]
    fn counting_is_linear_even_on_runs_of_one_character() {
        let text = "a".repeat(4_000_000);
        let needle = "a".repeat(2_000_000);
        let t = std::time::Instant::now();
        assert_eq!(occurrences(&text, &needle), 2);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }
}
