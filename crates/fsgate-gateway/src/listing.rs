//! ls, stat, glob, tree and grep: an entry is shown iff `list` allows it, and grep shows
//! a file's lines iff `list` and `read` allow it (see `Access`).

use crate::checks::entry_facts;

use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::output::Output;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryFilter, PathFacts};
use fsgate_policy::Policy;
use fsgate_workspace::Entry;

/// The largest answer a listing (ls, tree, glob, grep) is built to, even under a larger
/// message limit: a listing is cut at its room (`truncated`), not refused, so it need not
/// fill a limit sized for whole reads, and many listings at once hold less.
pub(crate) const LISTING_ANSWER_CAP: u64 = 16 * 1024 * 1024;

/// A listing is held about three times while it is answered (the hits, the JSON value
/// the door builds, its encoding): its budget lease counts all three.
pub(crate) const RENDER_COPIES: u64 = 3;

/// What one `ls` entry adds to an answer beyond its name and path: keys, type, size,
/// modification time, permissions (the WebSocket channel's entries, the largest).
pub(crate) const ENTRY_FIXED: u64 = 136;
/// Entries one page of a directory listing holds at most (`ls`, `list_directory`, the
/// WebSocket `list`): what a listing holds in memory is bounded by this, not by the
/// directory (see [`fsgate_workspace::Page`]).
pub(crate) const LIST_PAGE: usize = 10_000;

impl Cx<'_> {
    /// How many bytes a listing may fill in the answer (the message limit, less room
    /// for the envelope; MCP answers carry it twice), and what each item adds beyond
    /// its relative path (the root, for absolute paths).
    pub(crate) fn answer_room(&self) -> (u64, u64) {
        let max = self.pol.limits().max_message_bytes.min(LISTING_ANSWER_CAP);
        let envelope = 4096 + max / 16;
        let copies = crate::read::copies(self.ctx);
        let room = max.saturating_sub(envelope) / copies;
        let extra = match self.ctx.style {
            crate::door::PathStyle::Rooted => 1,
            _ => self.workspace.root_path().as_os_str().len() as u64 + 1,
        };
        (room, extra)
    }
}

/// Decides a walk's entries as `decide_entry` does (`Access::Ls`: what `visible` shows;
/// `Access::Grep`: files whose lines grep may show), through one [`EntryFilter`] per
/// directory, made again when the walk moves to another directory.
pub(crate) struct DirFilters<'p> {
    pol: &'p Policy,
    op: Access,
    /// The directory the filter is for, and the filter.
    cur: Option<(String, EntryFilter<'p>)>,
}

impl<'p> DirFilters<'p> {
    pub(crate) fn new(pol: &'p Policy, op: Access) -> Self {
        DirFilters { pol, op, cur: None }
    }

    pub(crate) fn allows(&mut self, e: &Entry) -> bool {
        self.allows_with(&e.path, &entry_facts(e))
    }

    pub(crate) fn allows_with(&mut self, path: &RelPath, pf: &PathFacts) -> bool {
        let s = path.as_str();
        // (A byte loop: `rfind` on a `char` costs several times more per entry.)
        let slash = s.as_bytes().iter().rposition(|b| *b == b'/');
        let (dir, name) = match slash {
            Some(i) => (&s[..i], &s[i + 1..]),
            None => ("", s),
        };
        let filter = match &mut self.cur {
            Some((d, f)) if d == dir => f,
            cur => {
                let rel = path.parent().unwrap_or_default();
                let next = match cur.take() {
                    Some((_, f)) => f.for_dir(&rel),
                    None => self.pol.entry_filter(self.op, &rel),
                };
                &cur.insert((dir.to_string(), next)).1
            }
        };
        filter.allows(path, name, pf)
    }
}

/// A cursor as the request gave it: a name (at most 255 bytes, no `/`), or none.
pub(crate) fn checked_cursor(cursor: Option<&str>) -> Result<Option<&str>, GatewayError> {
    match cursor {
        Some(c) if c.len() > 255 || c.contains(['/', '\0']) => Err(GatewayError::InvalidParams(
            "cursor must be the nextCursor of a previous page (an entry name)".into(),
        )),
        Some("") | None => Ok(None),
        Some(c) => Ok(Some(c)),
    }
}

/// A page of one directory's entries: when there are more, the next page starts after
/// the last entry shown.
pub(crate) fn paged(entries: Vec<Entry>, truncated: bool, facts: &mut Facts) -> Output {
    if truncated {
        facts.args.insert("truncated".into(), true.into());
    }
    let next = entries
        .last()
        .filter(|_| truncated)
        .map(|e| e.name.to_string());
    Output::Entries {
        entries,
        truncated,
        next,
    }
}
