//! `tree`: names and kinds beneath a directory, without metadata, in one answer.

use std::borrow::Cow;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::listing::*;
use crate::ops::{Output, RequestCtx};
use crate::{Facts, Gateway, entry_facts, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_policy::{Access, EntryKind, OpClass, Policy};
use fsgate_workspace::{Entry, Follow, PageSpec, Visit, json_string_len};

impl Gateway {
    /// Names and kinds beneath a directory, at most `depth` levels down, depth-first in
    /// name order, without metadata. Each entry is checked as `ls` checks it, and what
    /// is hidden or excluded is not entered. Stops at `max_entries` or at the message
    /// room, saying it was cut.
    pub(crate) fn tree(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
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
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(pol, OpClass::List, &rp, Follow::All, EntryKind::Dir, facts)?;
        let mut walk = TreeCollect {
            filter: DirFilters::new(pol, Access::Ls),
            shown_filter: DirFilters::new(pol, Access::Ls),
            sizes: pol.has_size_rules().then_some(&self.workspace),
            real: &res.real,
            rel: &rp.rel,
            depth,
            max_entries,
            excl: &excl,
            room: self.answer_room(pol, ctx).0,
            used: 0,
            out: Vec::new(),
            truncated: false,
        };
        let listed = if depth == 1 {
            // One directory: a page of it, the entries taken as listed.
            let spec = PageSpec {
                after,
                max: max_entries.min(LIST_PAGE),
                metadata: false,
                meta_first: false,
            };
            let page = self
                .workspace
                .list_page(&res.real, &spec, &mut |e| walk.admits(e));
            page.map(|page| {
                // Each was admitted (shown, not excluded) as the page was chosen.
                for e in page.entries {
                    if walk.keep(e) == Visit::Stop {
                        break;
                    }
                }
                walk.truncated |= page.more;
            })
        } else {
            let mut visit = |e: Cow<'_, Entry>| walk.take(e);
            self.workspace.walk_names(&res.real, &mut visit).map(|_| ())
        };
        listed.map_err(|e| ws_error(e, &rp.shown))?;
        let (entries, used, truncated) = (walk.out, walk.used, walk.truncated);
        facts.lease = Some(
            self.budget
                .lease_as(used.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        if depth == 1 {
            return Ok(paged(entries, truncated, facts));
        }
        if truncated {
            facts.args.insert("truncated".into(), true.into());
        }
        Ok(Output::Entries {
            entries,
            truncated,
            next: None,
        })
    }
}

/// Collects a `tree` walk's entries: visible, not excluded, within depth and room.
struct TreeCollect<'a> {
    /// Decides entries where they really are, and where they are shown when the walk
    /// started through a symlink.
    filter: DirFilters<'a>,
    shown_filter: DirFilters<'a>,
    /// Where to look up a file's size, when some rule has a size condition (a tree's
    /// walk reads no metadata).
    sizes: Option<&'a fsgate_workspace::Workspace>,
    /// Where the walk really starts, and the (lexical) directory it was asked for.
    real: &'a RelPath,
    rel: &'a RelPath,
    depth: usize,
    max_entries: usize,
    excl: &'a GlobSet,
    room: u64,
    used: u64,
    out: Vec<Entry>,
    truncated: bool,
}

impl TreeCollect<'_> {
    /// Whether `e` is shown (as `ls` would show it), its size looked up for a file when
    /// size conditions need it; the entry itself stays without metadata.
    fn shown(&mut self, e: &Entry, lexical: bool) -> bool {
        let mut pf = entry_facts(e);
        if let Some(ws) = self.sizes
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

    /// Whether `take` would keep `e` (shown, not excluded), leaving the room alone.
    fn admits(&mut self, e: &Entry) -> bool {
        let below = self.below(e);
        if !self.excl.is_empty() && self.excl.is_match(below) || !self.shown(e, false) {
            return false;
        }
        if self.real == self.rel {
            return true;
        }
        let mut lexical = e.clone();
        lexical.path = self.rel.join(below);
        self.shown(&lexical, true)
    }

    /// The path of `e` below the walk's start.
    fn below<'e>(&self, e: &'e Entry) -> &'e str {
        let skip = if self.real.is_root() {
            0
        } else {
            self.real.as_str().len() + 1
        };
        e.path.as_str().get(skip..).unwrap_or_default()
    }

    /// How deep `e`, at its shown path, is below the directory asked for (its entries: 1).
    fn rel_level(&self, e: &Entry) -> u64 {
        let skip = if self.rel.is_root() {
            0
        } else {
            self.rel.as_str().len() + 1
        };
        let below = e.path.as_str().get(skip..).unwrap_or_default();
        below.bytes().filter(|b| *b == b'/').count() as u64 + 1
    }

    /// Keeps `e` if it is shown; says whether to enter it.
    fn take(&mut self, e: Cow<'_, Entry>) -> Visit {
        let below = self.below(&e);
        // (An empty set is not asked: a match builds a candidate, an allocation.)
        let excluded = !self.excl.is_empty() && self.excl.is_match(below);
        if excluded || !self.shown(&e, false) {
            return Visit::Skip;
        }
        let lexical = (self.real != self.rel).then(|| self.rel.join(below));
        let mut e = e.into_owned();
        if let Some(path) = lexical {
            e.path = path;
            if !self.shown(&e, true) {
                return Visit::Skip;
            }
        }
        self.room_for(e)
    }

    /// Keeps `e`, which [`admits`](Self::admits) let through, if there is room.
    fn keep(&mut self, mut e: Entry) -> Visit {
        if self.real != self.rel {
            e.path = self.rel.join(self.below(&e));
        }
        self.room_for(e)
    }

    /// Keeps `e` (shown, at its shown path) if the answer has room; says whether to
    /// enter it.
    fn room_for(&mut self, e: Entry) -> Visit {
        let level = self.rel_level(&e);
        self.used += json_string_len(&e.name) + TREE_ENTRY_FIXED + TREE_ENTRY_PER_LEVEL * level;
        if self.out.len() >= self.max_entries || self.used > self.room {
            self.used = self.used.min(self.room);
            self.truncated = true;
            return Visit::Stop;
        }
        self.out.push(e);
        if (level as usize) < self.depth {
            Visit::Descend
        } else {
            Visit::Skip
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
