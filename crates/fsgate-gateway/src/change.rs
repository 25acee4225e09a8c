//! What every change shares: the backup before it, and the policy checks of the
//! directories it creates and of everything beneath a directory it removes or moves.

use crate::ops::cx::Cx;

use crate::checks::{entry_facts, visible};

use crate::facts::Facts;

use crate::rules::ws_error;

use crate::scope::ReqPath;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::{Entry, FileKind, MAX_DEPTH, Resolved};

impl Cx<'_> {
    /// Checks `write` on each directory that a write or mkdir would create.
    pub(super) fn check_missing_parents(
        &self,
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
            self.check(OpClass::Write, d, EntryKind::Dir, &rp.shown, facts)?;
        }
        Ok(())
    }

    /// Everything beneath a directory, for the checks and backups before a recursive
    /// change; refused if any of it cannot be inspected (too deep, unreadable).
    pub(super) fn descendants(
        &self,
        real: &RelPath,
        shown: &str,
    ) -> Result<Vec<Entry>, GatewayError> {
        self.workspace
            .inspect_tree(real)
            .map_err(|e| ws_error(e, shown))
    }

    /// Refuses to create `real` (holding a tree `below` levels high) deeper than the
    /// walks inspect: a tree the gateway could not inspect whole, it could not change.
    pub(super) fn check_depth(
        real: &RelPath,
        below: usize,
        shown: &str,
    ) -> Result<(), GatewayError> {
        let depth = real.components().count() + below;
        if depth <= MAX_DEPTH {
            return Ok(());
        }
        Err(GatewayError::Limit {
            reason: format!(
                "the result would be nested {depth} levels deep; fsgate inspects and creates at most {MAX_DEPTH}"
            ),
            rule: crate::rules::RULE_DEPTH.into(),
            path: shown.to_string(),
        })
    }

    /// For a recursive change of the directory `src` holding `entries`: every entry
    /// must be visible and deletable, and (when moved to `dst`) writable at its new
    /// place; a moved file must be readable where it is, as a file moved alone must,
    /// so that moving its directory cannot make readable what was not.
    pub(super) fn check_subtree(
        &self,
        src: &RelPath,
        dst: Option<&RelPath>,
        entries: &[Entry],
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        for e in entries {
            // Sizes count: the walk read each file's metadata.
            let pf = entry_facts(e);
            if !visible(self.pol, e) {
                return Err(GatewayError::Refused {
                    reason: "the directory holds entries the policy hides; they cannot be removed or moved".into(),
                    rule: "protected-entries".into(),
                    path: shown.to_string(),
                });
            }
            let (delete, write) = (
                Access::Class(OpClass::Delete),
                Access::Class(OpClass::Write),
            );
            self.check_entry(delete, &e.path, &pf, shown, facts)?;
            if let (Some(dst), Some(rest)) = (dst, e.path.strip_prefix(src)) {
                let target = RelPath::parse_rooted(&format!("/{}/{}", dst.as_str(), rest.as_str()))
                    .unwrap_or_else(|_| dst.clone());
                self.check_entry(write, &target, &pf, shown, facts)?;
                if e.kind == FileKind::File {
                    self.check_moved_file(&e.path, &target, (&pf, shown), facts)?;
                }
            }
        }
        Ok(())
    }

    /// A file moved with its directory from `src` to `dst`: readable at `src`, and its
    /// content decided at both ends when the content rules depend on the path (if they
    /// do not, a read at `dst` decides it as a read at `src` would).
    fn check_moved_file(
        &self,
        src: &RelPath,
        dst: &RelPath,
        (pf, shown): (&fsgate_decide::PathFacts, &str),
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        self.check_entry(Access::Class(OpClass::Read), src, pf, shown, facts)?;
        let scanner = self.pol.content_scanner();
        if !scanner.is_some_and(fsgate_policy::ContentScanner::depends_on_path) {
            return Ok(());
        }
        self.check_moved_content((src, dst), (shown, shown), facts)
    }

    pub(super) fn is_real_dir(&self, real: &RelPath) -> bool {
        // `real` is canonical except maybe its last component, which stat does not
        // follow (openat2 refuses symlinks), so a link to a directory is not a directory.
        self.workspace
            .stat(real)
            .is_ok_and(|i| i.kind == FileKind::Directory)
    }
}
