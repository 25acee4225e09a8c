//! ls, stat, glob, tree and grep: an entry is shown iff `list` allows it, and grep shows
//! a file's lines iff `list` and `read` allow it (see `Access`).

use std::borrow::Cow;
use std::cell::RefCell;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use grep_regex::RegexMatcherBuilder;

use super::{Facts, Gateway, entry_facts, ws_error};
use crate::ops::{Output, PathStyle, RequestCtx};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_policy::{Access, EntryFilter, EntryKind, OpClass, PathFacts, Policy};
use fsgate_workspace::{
    ContentGate, Entry, FileKind, Follow, GrepOptions, IncludeGlob, PageSpec, Visit, WsError,
    json_string_len,
};

/// The largest answer a listing (ls, tree, glob, grep) is built to, even under a larger
/// message limit: a listing is cut at its room (`truncated`), not refused, so it need not
/// fill a limit sized for whole reads, and many listings at once hold less.
const LISTING_ANSWER_CAP: u64 = 16 * 1024 * 1024;

/// Default and ceiling for grep's `maxResults`.
const GREP_DEFAULT_MAX: usize = 1000;
const GREP_CEILING: usize = 100_000;
/// A listing is held about three times while it is answered (the hits, the JSON value
/// the door builds, its encoding): its budget lease counts all three.
const RENDER_COPIES: u64 = 3;
/// What one grep hit adds to an answer, for the budget: a clipped line (4 KiB), a
/// path, the fields. (The answer itself is bounded exactly by the message limit.)
const MAX_HIT_BYTES: u64 = 4096 + 256 + 64;

/// What one `ls` entry adds to an answer beyond its name and path: keys, type, size,
/// modification time, permissions (the WebSocket channel's entries, the largest).
const ENTRY_FIXED: u64 = 136;
/// Entries one page of a directory listing holds at most (`ls`, `list_directory`, the
/// WebSocket `list`): what a listing holds in memory is bounded by this, not by the
/// directory (see [`fsgate_workspace::Page`]).
pub(crate) const LIST_PAGE: usize = 10_000;
/// What one `tree` entry adds beyond its name (keys and type of an indented JSON
/// object, escaped once more in its text block), and per level of indentation.
const TREE_ENTRY_FIXED: u64 = 64;
const TREE_ENTRY_PER_LEVEL: u64 = 16;

impl Gateway {
    pub(super) fn ls(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        cursor: Option<&str>,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let after = checked_cursor(cursor)?;
        let res = self.locate(pol, OpClass::List, &rp, Follow::All, EntryKind::Dir, facts)?;
        // Entries are shown under the requested (lexical) directory, as asked; each is
        // checked where it really is and where it is shown (once if they are the same).
        let moved = res.real != rp.rel;
        let real_dir = pol.entry_filter(Access::Ls, &res.real);
        let shown_dir = moved.then(|| pol.entry_filter(Access::Ls, &rp.rel));
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
            metadata: true,
            meta_first: pol.has_size_rules(),
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
        let (entries, used, cut) = self.fit_entries(pol, ctx, shown);
        // Hold budget for the answer while it is rendered and queued.
        facts.lease = Some(
            self.budget
                .lease_as(used.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        Ok(paged(entries, cut || page.more, facts))
    }

    /// The leading entries whose answer fits the message room, its estimated size, and
    /// whether any were left out.
    fn fit_entries(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        mut entries: Vec<Entry>,
    ) -> (Vec<Entry>, u64, bool) {
        let (room, extra) = self.answer_room(pol, ctx);
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

    pub(super) fn stat(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let (real, info) = self.locate_stat(pol, &rp, facts)?;
        if info.kind == FileKind::File && info.nlink > 1 {
            return Err(ws_error(WsError::HardLink(info.nlink), &rp.shown));
        }
        let kind = if info.kind == FileKind::Directory {
            FileKind::Directory
        } else {
            FileKind::File
        };
        // Decided again knowing the kind and size, where it is named and where it
        // really is (once if that is the same place).
        let places: &[&RelPath] = if real == rp.rel {
            &[&rp.rel]
        } else {
            &[&rp.rel, &real]
        };
        let pf = match kind {
            FileKind::Directory => PathFacts::kind(EntryKind::Dir),
            _ => PathFacts::file(info.size),
        };
        for p in places.iter().copied() {
            Self::check_entry(pol, Access::Stat, p, &pf, &rp.shown, facts)?;
        }
        Ok(Output::Stat { path: rp.rel, info })
    }

    /// Where `rp` really is and its metadata, as [`Gateway::locate`] and a stat there
    /// find them. A path without symlinks is its own real path: then one `openat2`
    /// (beneath the root, no symlinks) serves both, instead of one to resolve and
    /// another to stat. Anything else (a symlink, a missing name) goes the long way,
    /// which also gives the errors.
    fn locate_stat(
        &self,
        pol: &Policy,
        rp: &super::ReqPath,
        facts: &mut Facts,
    ) -> Result<(RelPath, fsgate_workspace::StatInfo), GatewayError> {
        let (class, kind) = (OpClass::List, EntryKind::Unknown);
        Self::in_roots(rp, &rp.rel, facts)?;
        Self::check(pol, class, &rp.rel, kind, &rp.shown, facts)?;
        if let Ok(info) = self.workspace.stat(&rp.rel) {
            return Ok((rp.rel.clone(), info));
        }
        let res = self.resolve_checked(pol, class, rp, Follow::All, kind, facts)?;
        let info = self
            .workspace
            .stat(&res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        Ok((res.real, info))
    }

    /// Names and kinds beneath a directory, at most `depth` levels down, depth-first in
    /// name order, without metadata. Each entry is checked as `ls` checks it, and what
    /// is hidden or excluded is not entered. Stops at `max_entries` or at the message
    /// room, saying it was cut.
    pub(super) fn tree(
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
                for e in page.entries {
                    if walk.take(Cow::Owned(e)) == Visit::Stop {
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

    pub(super) fn glob(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        pattern: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rel_pattern = self.relative_pattern(ctx, pattern)?;
        facts.path = Some(rel_pattern.clone());
        let glob = GlobBuilder::new(&rel_pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                GatewayError::InvalidParams(format!("invalid glob {pattern:?}: {}", e.kind()))
            })?
            .compile_matcher();
        let base = glob_base(&rel_pattern);
        let rp = super::ReqPath {
            shown: self.show_path(ctx.style, &base),
            rel: base,
            roots: ctx.scope.roots(),
        };
        let res = match self.locate(pol, OpClass::List, &rp, Follow::All, EntryKind::Dir, facts) {
            Ok(r) => r,
            Err(GatewayError::NotFound { .. }) => return Ok(Output::paths(Vec::new())),
            Err(e) => return Err(e),
        };
        if !res.exists {
            return Ok(Output::paths(Vec::new()));
        }
        if res.real != rp.rel {
            // The base is reached through a symlink: match on the lexical names.
            return Err(GatewayError::InvalidParams(format!(
                "glob base {} is a symlink; glob from where it leads instead",
                rp.shown
            )));
        }
        let room = self.answer_room(pol, ctx);
        // The answer may fill the whole room: hold that much of the budget for it.
        facts.lease = Some(
            self.budget
                .lease_as(room.0.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        let filters = RefCell::new(DirFilters::new(pol, Access::Glob));
        let sizes = pol.has_size_rules();
        let (paths, truncated) = self
            .workspace
            .glob(
                &glob,
                &res.real,
                room,
                (&|e| filters.borrow_mut().allows(e), sizes),
            )
            .map_err(|e| ws_error(e, &rp.shown))?;
        if truncated {
            facts.args.insert("truncated".into(), true.into());
        }
        Ok(Output::Paths { paths, truncated })
    }

    /// A glob pattern relative to the root: relative as given, or absolute under it.
    fn relative_pattern(&self, ctx: &RequestCtx, pattern: &str) -> Result<String, GatewayError> {
        if pattern.contains('\0') {
            return Err(GatewayError::InvalidParams(
                "pattern contains a NUL byte".into(),
            ));
        }
        let dealiased = self.dealias(ctx.style, pattern);
        let pattern = dealiased.as_ref();
        let rel = if pattern.starts_with('/') && ctx.style != PathStyle::Rooted {
            let root = self.workspace.root_path().to_string_lossy().into_owned();
            let root = root.trim_end_matches('/');
            match pattern.strip_prefix(root) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    rest.trim_start_matches('/').to_string()
                }
                _ => {
                    return Err(GatewayError::Refused {
                        reason: format!("glob pattern is outside the workspace root {root}"),
                        rule: super::RULE_BOUNDARY.into(),
                        path: pattern.to_string(),
                    });
                }
            }
        } else {
            pattern.trim_start_matches('/').to_string()
        };
        if rel.split('/').any(|c| c == "..") {
            return Err(GatewayError::Refused {
                reason: "glob pattern climbs out of the workspace with `..`".into(),
                rule: super::RULE_BOUNDARY.into(),
                path: pattern.to_string(),
            });
        }
        if rel.is_empty() {
            return Err(GatewayError::InvalidParams("empty glob pattern".into()));
        }
        Ok(rel)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn grep(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        pattern: &str,
        path: Option<&str>,
        ignore_case: bool,
        include_glob: Option<&str>,
        max_results: Option<u64>,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let query = GrepQuery::parse(pattern, ignore_case, include_glob, max_results)?;
        let (rp, res, is_dir) = self.grep_start(pol, ctx, path, facts)?;
        let found = self.grep_search(pol, ctx, &query, (&rp, &res.real, is_dir), facts)?;
        // Files with a match whose content was refused (a file without one is not
        // judged: it shows nothing either way).
        if found.withheld > 0 {
            facts
                .args
                .insert("withheld_files".into(), found.withheld.into());
        }
        let (mut hits, truncated) = (found.hits, found.truncated);
        // Report under the requested (lexical) path.
        if res.real != rp.rel {
            relabel_hits(&mut hits, &res.real, &rp.rel);
        }
        facts.args.insert("matches".into(), hits.len().into());
        if truncated {
            facts.args.insert("truncated".into(), true.into());
        }
        Ok(Output::Grep { hits, truncated })
    }

    /// Where grep starts (the root when no path is given), its real path and whether it
    /// is a directory. The start needs `list`; a file also `read`, decided knowing its
    /// size.
    fn grep_start(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: Option<&str>,
        facts: &mut Facts,
    ) -> Result<(super::ReqPath, fsgate_workspace::Resolved, bool), GatewayError> {
        let rp = match path {
            Some(p) => self.parse_path(ctx, p)?,
            None => super::ReqPath {
                rel: RelPath::root(),
                shown: self.show_path(ctx.style, &RelPath::root()),
                roots: ctx.scope.roots(),
            },
        };
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(
            pol,
            OpClass::List,
            &rp,
            Follow::All,
            EntryKind::Unknown,
            facts,
        )?;
        let info = self
            .workspace
            .stat(&res.real)
            .map_err(|e| ws_error(e, &rp.shown))?;
        let is_dir = info.kind == FileKind::Directory;
        // Decided again knowing the kind (a directory: `list`; a file: also `read`).
        let pf = if is_dir {
            PathFacts::kind(EntryKind::Dir)
        } else {
            PathFacts::file(info.size)
        };
        Self::check_entry(pol, Access::Grep, &rp.rel, &pf, &rp.shown, facts)?;
        if res.real != rp.rel {
            Self::check_entry(pol, Access::Grep, &res.real, &pf, &rp.shown, facts)?;
        }
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        Ok((rp, res, is_dir))
    }

    /// Searches from `real` with the answer's budget leased. The content rules judge
    /// the bytes grep searches: a file whose content a read would refuse shows no line
    /// (and, named on its own, is refused like a read).
    fn grep_search(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        query: &GrepQuery,
        (rp, real, is_dir): (&super::ReqPath, &RelPath, bool),
        facts: &mut Facts,
    ) -> Result<fsgate_workspace::GrepOutcome, GatewayError> {
        let scanner = pol
            .content_scanner()
            .filter(|s| s.applies_to(OpClass::Read));
        // Called from the threads searching: the refusal (kept for a file named on its
        // own) goes through a lock.
        let refusal = std::sync::Mutex::new(None);
        let gate = |path: &RelPath, bytes: &[u8]| match Self::check_content(
            pol,
            OpClass::Read,
            path,
            bytes,
            &rp.shown,
        ) {
            Ok(()) => true,
            Err(e) => {
                if let Ok(mut r) = refusal.lock() {
                    *r = Some(e);
                }
                false
            }
        };
        // Hold budget for the largest answer these hits can make (lines are clipped).
        let (room, item_extra) = self.answer_room(pol, ctx);
        let per_hit = MAX_HIT_BYTES + item_extra;
        let answer = room.min((query.max as u64).saturating_mul(per_hit));
        facts.lease = Some(
            self.budget
                .lease_as(answer.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        let opts = GrepOptions {
            matcher: &query.matcher,
            include: query.include.as_ref(),
            max_results: query.max,
            max_file_bytes: pol.limits().max_read_bytes,
            max_answer_bytes: room,
            item_extra,
            content_gate: scanner.map(|_| &gate as &ContentGate),
            entry_sizes: pol.has_size_rules(),
        };
        let filters = RefCell::new(DirFilters::new(pol, Access::Grep));
        let found = self
            .workspace
            .grep(real, is_dir, &opts, &|e| filters.borrow_mut().allows(e))
            .map_err(|e| ws_error(e, &rp.shown))?;
        let refused = refusal.into_inner().ok().flatten();
        if let (false, Some(e)) = (is_dir, refused) {
            return Err(e);
        }
        Ok(found)
    }

    /// How many bytes a listing may fill in the answer (the message limit, less room
    /// for the envelope; MCP answers carry it twice), and what each item adds beyond
    /// its relative path (the root, for absolute paths).
    fn answer_room(&self, pol: &Policy, ctx: &RequestCtx) -> (u64, u64) {
        let max = pol.limits().max_message_bytes.min(LISTING_ANSWER_CAP);
        let envelope = 4096 + max / 16;
        let copies = if ctx.transport == "mcp" { 2 } else { 1 };
        let room = max.saturating_sub(envelope) / copies;
        let extra = match ctx.style {
            crate::ops::PathStyle::Rooted => 1,
            _ => self.workspace.root_path().as_os_str().len() as u64 + 1,
        };
        (room, extra)
    }
}

/// Decides a walk's entries as `decide_entry` does (`Access::Ls`: what `visible` shows;
/// `Access::Grep`: files whose lines grep may show), through one [`EntryFilter`] per
/// directory, made again when the walk moves to another directory.
struct DirFilters<'p> {
    pol: &'p Policy,
    op: Access,
    /// The directory the filter is for, and the filter.
    cur: Option<(String, EntryFilter<'p>)>,
}

impl<'p> DirFilters<'p> {
    fn new(pol: &'p Policy, op: Access) -> Self {
        DirFilters { pol, op, cur: None }
    }

    fn allows(&mut self, e: &Entry) -> bool {
        self.allows_with(&e.path, &entry_facts(e))
    }

    fn allows_with(&mut self, path: &RelPath, pf: &PathFacts) -> bool {
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

    /// Keeps `e` if it is shown; says whether to enter it.
    fn take(&mut self, e: Cow<'_, Entry>) -> Visit {
        let skip = if self.real.is_root() {
            0
        } else {
            self.real.as_str().len() + 1
        };
        // The path below the start, for the exclusions and the level.
        let below = e.path.as_str().get(skip..).unwrap_or_default();
        // (An empty set is not asked: a match builds a candidate, an allocation.)
        let excluded = !self.excl.is_empty() && self.excl.is_match(below);
        if excluded || !self.shown(&e, false) {
            return Visit::Skip;
        }
        let level = below.bytes().filter(|b| *b == b'/').count() as u64 + 1;
        let lexical = (self.real != self.rel).then(|| self.rel.join(below));
        let mut e = e.into_owned();
        if let Some(path) = lexical {
            e.path = path;
            if !self.shown(&e, true) {
                return Visit::Skip;
            }
        }
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

/// A cursor as the request gave it: a name (at most 255 bytes, no `/`), or none.
fn checked_cursor(cursor: Option<&str>) -> Result<Option<&str>, GatewayError> {
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
fn paged(entries: Vec<Entry>, truncated: bool, facts: &mut Facts) -> Output {
    if truncated {
        facts.args.insert("truncated".into(), true.into());
    }
    let next = entries.last().filter(|_| truncated).map(|e| e.name.clone());
    Output::Entries {
        entries,
        truncated,
        next,
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

/// The directory to walk for a glob: its literal leading components, minus the last.
fn glob_base(pattern: &str) -> RelPath {
    let comps: Vec<&str> = pattern.split('/').filter(|c| !c.is_empty()).collect();
    let mut lit = Vec::new();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        if c.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        lit.push(*c);
    }
    RelPath::parse_rooted(&format!("/{}", lit.join("/"))).unwrap_or_default()
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A grep request's arguments, checked: the pattern compiled, the include glob, the
/// number of hits wanted (at most [`GREP_CEILING`]).
struct GrepQuery {
    matcher: grep_regex::RegexMatcher,
    include: Option<IncludeGlob>,
    max: usize,
}

impl GrepQuery {
    fn parse(
        pattern: &str,
        ignore_case: bool,
        include_glob: Option<&str>,
        max_results: Option<u64>,
    ) -> Result<GrepQuery, GatewayError> {
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(ignore_case)
            .build(pattern)
            .map_err(|e| {
                // grep-regex reports on its wrapped pattern (`(?:...)`); the regex crate's
                // own message points into the pattern the agent sent.
                let msg = regex::Regex::new(pattern)
                    .err()
                    .map_or_else(|| e.to_string(), |re| re.to_string());
                GatewayError::InvalidParams(format!("invalid regex: {}", one_line(&msg)))
            })?;
        let include = include_glob
            .map(IncludeGlob::new)
            .transpose()
            .map_err(|e| {
                GatewayError::InvalidParams(format!("invalid includeGlob: {}", e.kind()))
            })?;
        let max = match max_results {
            None => GREP_DEFAULT_MAX,
            Some(0) => {
                return Err(GatewayError::InvalidParams(
                    "maxResults must be at least 1".into(),
                ));
            }
            Some(n) => usize::try_from(n).unwrap_or(GREP_CEILING).min(GREP_CEILING),
        };
        Ok(GrepQuery {
            matcher,
            include,
            max,
        })
    }
}

/// Hits found beneath `real` (a symlink's target), named again beneath `requested`.
fn relabel_hits(hits: &mut [fsgate_workspace::GrepMatch], real: &RelPath, requested: &RelPath) {
    for h in hits {
        if let Some(rest) = h.path.strip_prefix(real) {
            h.path = if rest.is_root() {
                requested.clone()
            } else {
                RelPath::parse_rooted(&format!("/{}/{}", requested.as_str(), rest.as_str()))
                    .unwrap_or_else(|_| h.path.clone())
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Gateway;
    use crate::ops::{Op, Output};
    use fsgate_audit::{AuditLog, AuditSettings, OpenOptions};
    use fsgate_base::error::GatewayError;
    use fsgate_policy::Policy;
    use fsgate_workspace::{FileKind, Workspace};

    fn gateway(ws: &std::path::Path, log: &std::path::Path) -> Gateway {
        let pol = Policy::builtin_default().expect("policy");
        let audit = AuditLog::open(
            log,
            &AuditSettings::default(),
            pol.sha256(),
            OpenOptions::default(),
        )
        .expect("audit");
        Gateway::new(pol, Workspace::open(ws).expect("ws")).with_audit(audit)
    }

    fn stat(gw: &Gateway, path: &str) -> Result<(String, FileKind, u64), GatewayError> {
        match gw
            .handle(&crate::tests::ctx(), Op::Stat { path: path.into() })
            .0?
        {
            Output::Stat { path, info } => Ok((path.as_str().to_string(), info.kind, info.size)),
            other => panic!("{other:?}"),
        }
    }

    /// A path without symlinks is stated with one open; one through a symlink, a
    /// missing one, a secret reached through a symlink and a hard-linked file are
    /// answered as the long way answers them.
    #[test]
    fn stat_answers_alike_with_and_without_symlinks() {
        let ws = tempfile::tempdir().expect("tmp");
        let state = tempfile::tempdir().expect("tmp");
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        std::fs::create_dir(ws.path().join("real")).expect("mkdir");
        std::fs::write(ws.path().join("real/a.txt"), "hello").expect("write");
        std::fs::write(ws.path().join("real/token"), "x").expect("write");
        std::os::unix::fs::symlink("real", ws.path().join("via")).expect("symlink");
        std::os::unix::fs::symlink(".env", ws.path().join("innocent")).expect("symlink");
        std::fs::write(ws.path().join(".env"), "K=v").expect("write");
        std::fs::hard_link(ws.path().join("real/token"), ws.path().join("t2")).expect("ln");
        let file = ("real/a.txt".to_string(), FileKind::File, 5);
        assert_eq!(stat(&gw, "/real/a.txt").expect("stat"), file);
        // Shown where it was asked for, found where it really is.
        let via = stat(&gw, "/via/a.txt").expect("stat");
        assert_eq!(via, ("via/a.txt".to_string(), FileKind::File, 5));
        assert_eq!(stat(&gw, "/real").expect("stat").1, FileKind::Directory);
        assert!(matches!(
            stat(&gw, "/real/missing"),
            Err(GatewayError::NotFound { .. })
        ));
        assert!(matches!(
            stat(&gw, "/innocent"),
            Err(GatewayError::Refused { .. })
        ));
        assert!(matches!(
            stat(&gw, "/.env"),
            Err(GatewayError::Refused { .. })
        ));
        assert!(stat(&gw, "/t2").is_err(), "a file with two links");
    }
}
