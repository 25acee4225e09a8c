//! `ls`: one page of a directory's entries, each shown iff the policy lets `list` see it.

use crate::checks::entry_facts;
use crate::facts::Facts;
use crate::listing::*;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::{Entry, Follow, PageSpec, json_string_len};
use serde_json::{Map, Value};

/// `_fsgate/ls`: one page of a directory's entries.
#[derive(Debug, Clone)]
pub struct Ls {
    /// Directory as given.
    pub path: String,
    /// Only entries named after this (a previous page's `nextCursor`).
    pub cursor: Option<String>,
    /// Names, kinds and inode numbers only, as the directory gives them: no `statx` of
    /// each entry unless a size rule needs it (the view's listings show nothing more).
    pub kinds_only: bool,
}

impl Operation for Ls {
    const QUICK_READ: bool = true;
    const LISTS: bool = true;

    fn name() -> &'static str {
        "ls"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        if let Some(c) = &self.cursor {
            args.insert("cursor".into(), c.clone().into());
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.ls(self, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn ls(&self, ls: &Ls, facts: &mut Facts) -> Result<Output, GatewayError> {
        let rp = self.parse_path(&ls.path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let after = checked_cursor(ls.cursor.as_deref())?;
        let res = self.locate(OpClass::List, &rp, Follow::All, EntryKind::Dir, facts)?;
        // Entries are shown under the requested (lexical) directory, as asked; each is
        // checked where it really is and where it is shown (once if they are the same).
        let moved = res.real != rp.rel;
        let real_dir = self.pol.entry_filter(Access::Ls, &res.real);
        let shown_dir = moved.then(|| self.pol.entry_filter(Access::Ls, &rp.rel));
        let shown_path = |e: &Entry| rp.rel.join(&e.name);
        let mut keep = |e: &Entry| {
            let facts = entry_facts(e);
            real_dir.allows(&e.path, &e.name, &facts)
                && shown_dir
                    .as_ref()
                    .is_none_or(|f| f.allows(&shown_path(e), &e.name, &facts))
        };
        let spec = PageSpec {
            after,
            max: LIST_PAGE,
            metadata: !ls.kinds_only || self.pol.has_size_rules(),
            meta_first: self.pol.has_size_rules(),
        };
        let page = self
            .workspace
            .list_page(&res.real, &spec, &mut keep)
            .map_err(|e| ws_error(e, &rp.shown))?;
        let mut shown = page.entries;
        if moved {
            for e in &mut shown {
                e.path = shown_path(e);
            }
        }
        let (entries, used, cut) = self.fit_entries(shown);
        // Hold budget for the answer while it is rendered and queued.
        facts.lease = Some(
            self.budget
                .lease_as(used.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        Ok(paged(entries, cut || page.more, facts))
    }

    /// The leading entries whose answer fits the message room, its estimated size, and
    /// whether any were left out.
    fn fit_entries(&self, mut entries: Vec<Entry>) -> (Vec<Entry>, u64, bool) {
        let (room, extra) = self.answer_room();
        let mut used = 0u64;
        let fit = entries
            .iter()
            .take_while(|e| {
                used += json_string_len(&e.name)
                    + json_string_len(e.path.as_str())
                    + extra
                    + ENTRY_FIXED;
                used <= room
            })
            .count();
        let truncated = fit < entries.len();
        entries.truncate(fit);
        (entries, used.min(room), truncated)
    }
}
