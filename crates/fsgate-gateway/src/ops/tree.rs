//! `tree`: names and kinds beneath a directory, without metadata, in one answer.

use crate::ops::cx::Cx;

use crate::ops::operation::{Operation, Places};
use serde_json::{Map, Value};
use std::borrow::Cow;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::checks::entry_facts;
use crate::facts::Facts;
use crate::listing::*;
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_policy::Policy;
use fsgate_workspace::{
    Cut, Entry, Follow, Gathered, PageSpec, Reading, Room, Take, Tally, WsError, json_string_len,
};

/// A `tree`'s exclude patterns recorded at most (`args.excludeCount` says how many).
pub(crate) const MAX_EXCLUDE_RECORDED: usize = 32;
/// The bytes a record gives a `tree`'s exclude patterns at most, as written (escapes
/// included): the first patterns that fit, at least one (cut if it is long).
const EXCLUDE_RECORDED_BYTES: usize = 4096;

/// How many of `exclude`'s first patterns the record keeps.
fn excludes_recorded(exclude: &[String]) -> usize {
    let mut total = 0;
    let fit = exclude
        .iter()
        .take(MAX_EXCLUDE_RECORDED)
        .take_while(|e| {
            total += fsgate_audit::cut::written_len(e);
            total <= EXCLUDE_RECORDED_BYTES
        })
        .count();
    fit.max(1).min(exclude.len())
}

/// Names and kinds beneath a directory, without metadata (MCP `list_directory` and
/// `directory_tree`): one request, one record, however many directories it holds.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Directory as given.
    pub path: String,
    /// Levels to descend: 1 lists the directory itself.
    pub depth: usize,
    /// Globs, relative to `path`, of entries left out with all beneath them (a
    /// pattern without `*` also matches that name at any depth).
    pub exclude: Vec<String>,
    /// The list stops at this many entries, and says it was cut if there are more.
    pub max_entries: usize,
    /// With `depth` 1: only entries named after this (a previous page's cursor).
    pub cursor: Option<String>,
}

impl Operation for Tree {
    const LISTS: bool = true;

    fn name() -> &'static str {
        "tree"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![("path", self.path.as_str())];
        out.extend(self.exclude.iter().map(|e| ("exclude", e.as_str())));
        out
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("depth".into(), self.depth.into());
        if let Some(c) = &self.cursor {
            args.insert("cursor".into(), c.clone().into());
        }
        if !self.exclude.is_empty() {
            // The agent's list: its first patterns, and how many there were.
            let shown = &self.exclude[..excludes_recorded(&self.exclude)];
            args.insert("exclude".into(), shown.to_vec().into());
            if self.exclude.len() > shown.len() {
                args.insert("excludeCount".into(), self.exclude.len().into());
            }
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.tree(
            &self.path,
            (self.depth, self.max_entries, self.cursor.as_deref()),
            &self.exclude,
            facts,
        )
    }
}

impl Cx<'_> {
    /// Names and kinds beneath a directory, at most `depth` levels down, depth-first in
    /// name order, without metadata. Each entry is checked as `ls` checks it, and what
    /// is hidden or excluded is not entered. Stops at `max_entries` or at the message
    /// room, saying it was cut.
    pub(crate) fn tree(
        &self,
        path: &str,
        (depth, max_entries, cursor): (usize, usize, Option<&str>),
        exclude: &[String],
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let after = checked_cursor(cursor)?;
        if after.is_some() && depth != 1 {
            return Err(GatewayError::InvalidParams(
                "a cursor pages one directory's listing, not a tree".into(),
            ));
        }
        let excl = tree_exclusions(exclude).map_err(|e| {
            GatewayError::InvalidParams(format!("invalid exclude pattern: {}", e.kind()))
        })?;
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(OpClass::List, &rp, Follow::All, EntryKind::Dir, facts)?;
        let at = TreeAt {
            pol: self.pol,
            sizes: self.pol.has_size_rules().then_some(self.workspace),
            real: &res.real,
            rel: &rp.rel,
            depth,
            excl: &excl,
        };
        let room = Room {
            bytes: self.answer_room().0,
            items: max_entries,
        };
        let found = if depth == 1 {
            self.tree_page(&at, room, after)
        } else {
            // Each thread of the walk decides entries with filters of its own.
            let new_decider = || {
                let mut decide = at.decider();
                move |e: Cow<'_, Entry>| decide.take(e)
            };
            let how = (Reading::NamesStrictly, room);
            self.workspace.gather(&res.real, how, &new_decider)
        };
        let found = found.map_err(|e| ws_error(e, &rp.shown))?;
        facts.lease = Some(
            self.budget
                .lease_as(found.used.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        let truncated = found.cut == Cut::Room;
        if depth == 1 {
            return Ok(paged(found.items, truncated, facts));
        }
        if truncated {
            facts.args.insert("truncated".into(), true.into());
        }
        Ok(Output::Entries {
            entries: found.items,
            truncated,
            next: None,
        })
    }

    /// One directory's tree: a page of it, the entries taken as listed.
    fn tree_page(
        &self,
        at: &TreeAt<'_>,
        room: Room,
        after: Option<&str>,
    ) -> Result<Gathered<Entry>, WsError> {
        let spec = PageSpec {
            after,
            max: room.items.min(LIST_PAGE),
            metadata: false,
            meta_first: false,
        };
        let mut decide = at.decider();
        let page = self
            .workspace
            .list_page(at.real, &spec, &mut |e| decide.admits(e))?;
        let mut tally = Tally::new(room);
        // Each was admitted (shown, not excluded) as the page was chosen.
        for e in page.entries {
            let (e, cost, _) = decide.placed(e);
            if !tally.add(e, cost) {
                break;
            }
        }
        let mut found = tally.finish(false);
        if page.more && found.cut == Cut::None {
            found.cut = Cut::Room;
        }
        Ok(found)
    }
}

/// What a `tree` walk decides entries by: where it starts, how deep it goes, what it
/// leaves out.
struct TreeAt<'a> {
    pol: &'a Policy,
    /// Where to look up a file's size, when some rule has a size condition (a tree's
    /// walk reads no metadata).
    sizes: Option<&'a fsgate_workspace::Workspace>,
    /// Where the walk really starts, and the (lexical) directory it was asked for.
    real: &'a RelPath,
    rel: &'a RelPath,
    depth: usize,
    excl: &'a GlobSet,
}

impl<'a> TreeAt<'a> {
    /// A decider of entries, for one thread of the walk.
    fn decider(&self) -> TreeDecide<'a, '_> {
        TreeDecide {
            at: self,
            filter: DirFilters::new(self.pol, Access::Ls),
            shown_filter: DirFilters::new(self.pol, Access::Ls),
        }
    }
}

/// Decides a `tree` walk's entries: visible, not excluded, within depth.
struct TreeDecide<'a, 't> {
    at: &'t TreeAt<'a>,
    /// Decides entries where they really are, and where they are shown when the walk
    /// started through a symlink.
    filter: DirFilters<'a>,
    shown_filter: DirFilters<'a>,
}

impl TreeDecide<'_, '_> {
    /// Whether `e` is shown (as `ls` would show it), its size looked up for a file when
    /// size conditions need it; the entry itself stays without metadata.
    fn shown(&mut self, e: &Entry, lexical: bool) -> bool {
        let mut pf = entry_facts(e);
        if let Some(ws) = self.at.sizes
            && pf.kind == EntryKind::File
            && pf.size.is_none()
        {
            pf.size = ws.stat(&e.path).ok().map(|i| i.size);
        }
        let filter = if lexical {
            &mut self.shown_filter
        } else {
            &mut self.filter
        };
        filter.allows_with(&e.path, &pf)
    }

    /// Whether `e` is kept (shown, not excluded).
    fn admits(&mut self, e: &Entry) -> bool {
        let below = self.below(e);
        if !self.at.excl.is_empty() && self.at.excl.is_match(below) || !self.shown(e, false) {
            return false;
        }
        if self.at.real == self.at.rel {
            return true;
        }
        let mut lexical = e.clone();
        lexical.path = self.at.rel.join(below);
        self.shown(&lexical, true)
    }

    /// The path of `e` below the walk's start.
    fn below<'e>(&self, e: &'e Entry) -> &'e str {
        let skip = if self.at.real.is_root() {
            0
        } else {
            self.at.real.as_str().len() + 1
        };
        e.path.as_str().get(skip..).unwrap_or_default()
    }

    /// `e` (kept) at its shown path, what it adds to the answer, and its level below
    /// the directory asked for (its entries: 1).
    fn placed(&self, mut e: Entry) -> (Entry, u64, usize) {
        let below = self.below(&e);
        let level = below.bytes().filter(|b| *b == b'/').count() + 1;
        if self.at.real != self.at.rel {
            e.path = self.at.rel.join(below);
        }
        let cost = json_string_len(&e.name)
            + TREE_ENTRY_FIXED
            + TREE_ENTRY_PER_LEVEL.saturating_mul(level as u64);
        (e, cost, level)
    }

    /// Keeps `e` if it is shown and not excluded; enters it within the depth.
    fn take(&mut self, e: Cow<'_, Entry>) -> Take<Entry> {
        if !self.admits(&e) {
            return Take::Skip;
        }
        let (item, cost, level) = self.placed(e.into_owned());
        Take::Keep {
            item,
            cost,
            enter: level < self.at.depth,
        }
    }
}

/// Exclusion globs as the reference filesystem server reads them: relative to the
/// start, and a pattern without `*` also matches that name at any depth.
pub fn tree_exclusions(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let p = p.trim_start_matches("./").trim_end_matches('/');
        if p.is_empty() {
            continue;
        }
        let any_depth = (!p.contains('*')).then(|| format!("**/{p}"));
        for f in std::iter::once(p).chain(any_depth.as_deref()) {
            set.add(GlobBuilder::new(f).literal_separator(true).build()?);
        }
    }
    set.build()
}

/// What one `tree` entry adds beyond its name (keys and type of an indented JSON
/// object, escaped once more in its text block), and per level of indentation.
const TREE_ENTRY_FIXED: u64 = 64;

const TREE_ENTRY_PER_LEVEL: u64 = 16;
