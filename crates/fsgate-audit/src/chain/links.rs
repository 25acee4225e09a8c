//! One record that checked out on its own linked into the chain, or why it does not
//! fit: a gap after a tombstone or a missing file, a seq or hash that does not follow.

use std::path::Path;

use super::Walk;
use crate::line::LineInfo;
use crate::record::{self, GENESIS_PREV};
use crate::report::FailureKind;
use crate::series::{self, Series};
use crate::signed::{SigStatus, check_signature};
use crate::verify_run::Run;

/// Why the records before `first` are absent, when the record at `first` starts a file
/// (it carries the log id, as only a file's first record does): the rotated file that
/// would hold them, `NAME.<from>`, is not among the series' files (not given though
/// there, or missing). `after` names the file before the gap, which may instead have
/// lost its last records. None if that file is among them.
pub(super) fn absent_file(s: &Series, from: u64, after: Option<&str>) -> Option<String> {
    let held = s.files.iter().any(|f| {
        let name = series::file_name(f);
        series::split_name(&name) == (s.base.as_str(), Some(from))
    });
    if held {
        return None;
    }
    let path = s.dir.join(series::rotated_name(&s.base, from));
    if path.exists() {
        return Some(format!(
            "{} holds them but was not given (name the active file or its directory to take the whole series)",
            path.display()
        ));
    }
    let unless = after.map_or(String::new(), |a| {
        format!(" (unless {a} lost its last records)")
    });
    Some(format!(
        "the rotated file {} is missing{unless}",
        path.display()
    ))
}

impl Walk<'_> {
    /// Links one record that checked out on its own into the chain; `false` (with the
    /// failure recorded) if it does not fit. `later` answers "does a later line of this
    /// file have this seq?".
    pub(super) fn link(
        &mut self,
        run: &mut Run<'_>,
        info: &LineInfo,
        at: (&Path, u64),
        first_in_file: bool,
        later: impl FnOnce(u64) -> bool,
    ) -> bool {
        let fits = match self.expected {
            None if info.prev != GENESIS_PREV => self.starts_after_tombstone(run, info, at),
            None => true,
            Some((eseq, ehash)) if info.seq != eseq + 1 || info.prev != ehash => {
                let (kind, msg) = self.misfit(info, at, first_in_file, eseq, later);
                run.fail(kind, Some(info.seq), Some(at), msg);
                false
            }
            Some(_) => true,
        };
        fits && self.adopt(run, info, at)
    }

    /// A series that does not start at genesis: a tombstone must cover the records
    /// before its first (its signature is reported); `false` with the failure recorded
    /// if none does.
    pub(super) fn starts_after_tombstone(
        &self,
        run: &mut Run<'_>,
        info: &LineInfo,
        at: (&Path, u64),
    ) -> bool {
        let found = self.tombs.iter().find(|t| {
            t.last_seq.checked_add(1) == Some(info.seq) && t.last_hash == hex::encode(info.prev)
        });
        let Some(t) = found else {
            let mut msg = format!(
                "records before seq {} are missing: the series does not start at genesis and no tombstone covers them",
                info.seq
            );
            if let Some(why) = info
                .log
                .as_ref()
                .and_then(|_| absent_file(self.series, 1, None))
            {
                msg = format!("{msg}: {why}");
            }
            run.fail(FailureKind::Missing, Some(info.seq), Some(at), msg);
            return false;
        };
        let how = match check_signature(&t.obj, run.opts.pinned.as_ref()) {
            SigStatus::ValidPinned => "signed by the pinned key",
            SigStatus::ValidUnpinned(_) => "signed by a key nobody pinned: pass --pubkey",
            SigStatus::Unsigned => "UNSIGNED: a deletion could look the same",
            SigStatus::Invalid(_) => "with a bad signature",
        };
        run.rep.warnings.push(format!(
            "records {}..{} were pruned on {} (tombstone {how})",
            t.first_seq, t.last_seq, t.ts
        ));
        true
    }

    /// Why a record does not follow seq `eseq` (the last that passed): a rotated file
    /// absent, a file that does not continue the previous one, an altered record,
    /// records out of order, or records missing.
    pub(super) fn misfit(
        &self,
        info: &LineInfo,
        at: (&Path, u64),
        first_in_file: bool,
        eseq: u64,
        later: impl FnOnce(u64) -> bool,
    ) -> (FailureKind, String) {
        let prev_file = self.prev_file.as_deref().unwrap_or("the previous file");
        let starts_file = first_in_file && info.log.is_some();
        let absent = (starts_file && info.seq > eseq + 1)
            .then(|| absent_file(self.series, eseq + 1, self.prev_file.as_deref()))
            .flatten();
        if let Some(why) = absent {
            (
                FailureKind::Gap,
                format!(
                    "records {}..{} are missing between {prev_file} and {}: {why}",
                    eseq + 1,
                    info.seq - 1,
                    series::file_name(at.0),
                ),
            )
        } else if first_in_file {
            (
                FailureKind::Gap,
                format!(
                    "{} does not continue {prev_file}: it starts at seq {} but seq {} with the previous file's last hash was expected",
                    series::file_name(at.0),
                    info.seq,
                    eseq + 1
                ),
            )
        } else if info.seq == eseq + 1 {
            (
                FailureKind::Modified,
                format!(
                    "record seq {} does not chain on seq {eseq}: one of the two was altered",
                    info.seq
                ),
            )
        } else if info.seq <= eseq || later(eseq + 1) {
            (
                FailureKind::Reordered,
                format!(
                    "records out of order: seq {} where seq {} was expected",
                    info.seq,
                    eseq + 1
                ),
            )
        } else {
            (
                FailureKind::Missing,
                format!("records missing: seq {} follows seq {eseq}", info.seq),
            )
        }
    }

    /// Takes a record that fits the chain: it must belong to the series' log; a break
    /// or a crash recovery is reported; its hash is kept where a checkpoint wants it
    /// and as the one the next record must chain on.
    pub(super) fn adopt(&mut self, run: &mut Run<'_>, info: &LineInfo, at: (&Path, u64)) -> bool {
        if let Some(log) = &info.log {
            match &run.rep.log_id {
                None => run.rep.log_id = Some(log.clone()),
                Some(id) if id != log => {
                    let msg = format!("record seq {} belongs to another log ({log})", info.seq);
                    run.fail(FailureKind::Gap, Some(info.seq), Some(at), msg);
                    return false;
                }
                Some(_) => {}
            }
        }
        if let Some(kind) = &info.kind {
            run.rep.warnings.push(match kind.as_str() {
                record::KIND_BREAK => format!(
                    "seq {} is a break: an operator started on a log that did not verify (see its details)",
                    info.seq
                ),
                _ => format!(
                    "seq {} records a crash recovery: a torn last line was cut off (see its details)",
                    info.seq
                ),
            });
        }
        if let Some(slot) = run.wanted.get_mut(&info.seq) {
            *slot = Some(info.hash);
        }
        self.expected = Some((info.seq, info.hash));
        true
    }
}
