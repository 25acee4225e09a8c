//! write and edit: replace a file's content atomically, after its backup and intent.

use crate::ops::cx::Cx;
use std::io::Read;

use crate::ask::{MAX_SHOWN_TEXT, Replaced};
use crate::facts::Facts;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, OpClass};
use fsgate_workspace::{Replace, Resolved, TempName};

/// Refuses a write of `len` bytes over `limit`, named `rule` (see [`Cx::file_limit`]).
pub(crate) fn within_write_limit(
    len: u64,
    (limit, rule): (u64, &str),
    shown: &str,
) -> Result<(), GatewayError> {
    if len <= limit {
        return Ok(());
    }
    Err(GatewayError::Limit {
        reason: format!("{len} bytes exceeds the write limit of {limit} bytes"),
        rule: rule.into(),
        path: shown.to_string(),
    })
}

impl Cx<'_> {
    /// What a write must pass before anything is saved, in order: the write limit,
    /// the size rules (on the size after the write), the content rules, the depth of a
    /// new file, and the missing parents it would make (counted for an undo).
    pub(crate) fn check_write(
        &self,
        (rp, res): (&crate::scope::ReqPath, &Resolved),
        content: &[u8],
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        within_write_limit(
            content.len() as u64,
            self.file_limit(OpClass::Write),
            &rp.shown,
        )?;
        let size = self.size_after(res, content.len());
        let write = Access::Class(OpClass::Write);
        self.check_size(write, (rp, &res.real), size, facts)?;
        self.check_content(OpClass::Write, &res.real, content, &rp.shown)?;
        if !res.exists {
            Self::check_depth(&res.real, 0, &rp.shown)?;
        }
        if res.missing > 1 {
            self.check_missing_parents(rp, res, false, facts)?;
            // The directories this write makes, so that an undo removes them again.
            facts
                .args
                .insert("madeDirs".into(), (res.missing - 1).into());
        }
        Ok(())
    }

    /// The syncs a write waits for, at once: its content is written into an unnamed file
    /// whose sync starts beside the request (as its backup's did), while this thread
    /// makes the intent durable (leading the log's group commit, or joining another
    /// request's); the content takes its name only once the intent, the backup and the
    /// content are all durable. Its directory's sync is left in `facts.entry_sync`, to run
    /// beside the outcome record's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_beside(
        &self,
        (real, shown): (&RelPath, &str),
        content: &[u8],
        temp: &TempName,
        may: Replace,
        saving: Option<fsgate_backup::Saving<'_>>,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let queued = self.intend_queued(facts)?;
        let staged = (self.workspace).stage_write(real, content, temp, may);
        self.intended(queued, facts)?;
        self.saver.backup_durable(saving, shown)?;
        let staged = staged.map_err(|e| ws_error(e, shown))?;
        let (_, entry) = self
            .workspace
            .publish_write_named(staged, content, temp)
            .map_err(|e| ws_error(e, shown))?;
        facts.entry_sync = Some(entry);
        Ok(())
    }

    /// What a write of `new_len` bytes over `real` replaces, read (bounded) only when the
    /// door shows changes as diffs and the new text is small enough to be shown.
    pub(crate) fn replaced(&self, real: &RelPath, new_len: usize) -> Option<Replaced> {
        self.ctx.notifier.as_ref().filter(|n| n.wants_text())?;
        self.read_replaced(real, new_len)
    }

    /// A question about to be put for a write over `real` shows the text it replaces
    /// (read, bounded, only then): a diff without it reads as a new file.
    pub(crate) fn show_replaced_to_questions(
        &self,
        real: &RelPath,
        new_len: usize,
        facts: &mut Facts,
    ) {
        if !facts.ask.as_ref().is_some_and(|a| a.wants_replaced()) {
            return;
        }
        if let (Some(r), Some(ask)) = (self.read_replaced(real, new_len), facts.ask.as_mut()) {
            ask.replacing(r);
        }
    }

    /// The previous content of `real`, at most [`MAX_SHOWN_TEXT`] bytes of it read;
    /// None when the new text (`new_len` bytes) is too large to be shown anyway.
    pub(crate) fn read_replaced(&self, real: &RelPath, new_len: usize) -> Option<Replaced> {
        if new_len > MAX_SHOWN_TEXT {
            return None;
        }
        let unreadable = Replaced::Unshown {
            bytes: 0,
            why: "it could not be read",
        };
        let Ok((file, meta)) = self.workspace.open_regular(real) else {
            return Some(unreadable);
        };
        let mut head = Vec::new();
        let limit = u64::try_from(MAX_SHOWN_TEXT)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        if file.take(limit).read_to_end(&mut head).is_err() {
            return Some(unreadable);
        }
        Some(Replaced::of(head, meta.len()))
    }
}

impl Cx<'_> {
    /// A person may take minutes to answer: an edit goes ahead only if the file still
    /// holds the text it was made against (else their own changes would be lost).
    pub(crate) fn still_holds(
        &self,
        real: &fsgate_base::path::RelPath,
        was: &[u8],
        shown: &str,
    ) -> Result<(), GatewayError> {
        let now = self
            .workspace
            .read_file(real, self.pol.limits().max_read_bytes)
            .map_err(|e| ws_error(e, shown))?;
        if now.bytes == was {
            return Ok(());
        }
        Err(GatewayError::InvalidParams(format!(
            "{shown} changed while a person was asked about this edit; nothing was changed (read it again and retry)"
        )))
    }

    /// The size a write is judged by: the larger of the file's current size and
    /// `new` (the current size is only looked up when some rule has a size condition).
    pub(crate) fn size_after(&self, res: &Resolved, new: usize) -> u64 {
        let new = new as u64;
        if !res.exists || !self.pol.has_size_rules() {
            return new;
        }
        // Unknown current size (raced away): the new size still counts.
        let current = self.workspace.stat(&res.real).map_or(0, |i| i.size);
        current.max(new)
    }

    /// The name the write's temporary file will have if it ever has one, noted in the
    /// intent (`args.tempName`) so that a start after a crash removes exactly that file.
    pub(crate) fn temp_name(facts: &mut Facts) -> Result<TempName, GatewayError> {
        let temp = TempName::new().map_err(|e| {
            GatewayError::Internal(format!(
                "no random temporary name: {e}; nothing was changed"
            ))
        })?;
        facts
            .args
            .insert("tempName".into(), temp.as_str().to_string().into());
        Ok(temp)
    }
}

/// What a write, edit or rename may replace: nothing if it found no file, else the file its
/// backup saved, or any file when no backup was taken (backups off, or past a limit
/// with `on_limit = "allow"`).
pub(super) fn may_replace(exists: bool, facts: &Facts) -> Replace {
    match (exists, facts.saved_file) {
        (false, _) => Replace::Nothing,
        (true, Some((dev, ino))) => Replace::Saved(dev, ino),
        (true, None) => Replace::AnyFile,
    }
}

/// How many times `needle` occurs in `text` for an exactly-once edit: the count of
/// non-overlapping occurrences, except that a single one overlapped by another (in `aaa`,
/// `aa` starts at 0 and at 1) counts as 2, since "the" occurrence would be ambiguous.
/// Linear time: `str::find` and `str::matches` use the Two-Way search.
pub fn occurrences(text: &str, needle: &str) -> usize {
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
    use crate::write::occurrences;

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
