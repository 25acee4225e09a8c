//! `grep`: lines matching a regex in the files `list` and `read` allow.

use crate::ops::cx::Cx;

use crate::ops::operation::{Operation, Places};
use serde_json::{Map, Value};
use std::cell::RefCell;

use grep_regex::RegexMatcherBuilder;

use crate::facts::Facts;
use crate::listing::*;
use crate::ops::output::Output;
use crate::regex_bound;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_workspace::{ContentGate, FileKind, Follow, GrepOptions, IncludeGlob};

/// `_fsgate/grep`.
#[derive(Debug, Clone)]
pub struct Grep {
    /// Regex.
    pub pattern: String,
    /// File or directory to search (default: the root).
    pub path: Option<String>,
    /// Case-insensitive.
    pub ignore_case: bool,
    /// Only files matching this glob.
    pub include_glob: Option<String>,
    /// Stop after this many matches.
    pub max_results: Option<u64>,
}

impl Operation for Grep {
    const LISTS: bool = true;

    fn name() -> &'static str {
        "grep"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        let mut out = vec![("pattern", self.pattern.as_str())];
        out.extend(self.path.as_deref().map(|p| ("path", p)));
        out.extend(self.include_glob.as_deref().map(|g| ("includeGlob", g)));
        out
    }

    fn places_mut(&mut self) -> Places<'_> {
        (self.path.as_mut(), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("pattern".into(), self.pattern.clone().into());
        args.insert("ignoreCase".into(), self.ignore_case.into());
        if let Some(g) = &self.include_glob {
            args.insert("includeGlob".into(), g.clone().into());
        }
        if let Some(n) = self.max_results {
            args.insert("maxResults".into(), n.into());
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.grep(
            &self.pattern,
            self.path.as_deref(),
            self.ignore_case,
            self.include_glob.as_deref(),
            self.max_results,
            facts,
        )
    }
}

impl Cx<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn grep(
        &self,
        pattern: &str,
        path: Option<&str>,
        ignore_case: bool,
        include_glob: Option<&str>,
        max_results: Option<u64>,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        facts.lease = Some(self.lease_pattern(pattern, ignore_case, facts)?);
        let query = GrepQuery::parse(pattern, ignore_case, include_glob, max_results)?;
        let (rp, res, is_dir) = self.grep_start(path, facts)?;
        let found = self.grep_search(&query, (&rp, &res.real, is_dir), facts);
        // The compiled pattern's share of the lease goes with it.
        drop(query);
        let (found, answer) = found?;
        if let Some(lease) = facts.lease.as_mut() {
            lease.resize(answer);
        }
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

    /// The budget a pattern holds while it is parsed, compiled and searched with,
    /// leased as its bounds become known: its parse before it is translated, its
    /// compile before it is compiled (`regex_bound`). Refuses a pattern above a bound
    /// before spending it.
    fn lease_pattern(
        &self,
        pattern: &str,
        ignore_case: bool,
        facts: &Facts,
    ) -> Result<crate::budget::Lease, GatewayError> {
        let too_large = |e: regex_bound::TooLarge| GatewayError::InvalidParams(e.to_string());
        let syntax = regex_bound::syntax(pattern).map_err(too_large)?;
        let mut lease = self.budget.lease_as(syntax.parse, facts.waiting);
        let bounds = syntax.bounds(ignore_case).map_err(too_large)?;
        lease.resize(bounds.lease_bytes());
        Ok(lease)
    }

    /// Where grep starts (the root when no path is given), its real path and whether it
    /// is a directory. The start needs `list`; a file also `read`, decided knowing its
    /// size.
    fn grep_start(
        &self,
        path: Option<&str>,
        facts: &mut Facts,
    ) -> Result<(crate::scope::ReqPath, fsgate_workspace::Resolved, bool), GatewayError> {
        let rp = match path {
            Some(p) => self.parse_path(p)?,
            None => self.req_path(
                RelPath::root(),
                self.show_path(self.ctx.style, &RelPath::root()),
            ),
        };
        facts.path = Some(rp.rel.as_str().to_string());
        let res = self.locate(OpClass::List, &rp, Follow::All, EntryKind::Unknown, facts)?;
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
        self.check_entry(Access::Grep, &rp.rel, &pf, &rp.shown, facts)?;
        if res.real != rp.rel {
            self.check_entry(Access::Grep, &res.real, &pf, &rp.shown, facts)?;
        }
        if !res.exists {
            return Err(GatewayError::NotFound { path: rp.shown });
        }
        Ok((rp, res, is_dir))
    }

    /// Searches from `real` with the answer's budget leased (added to the pattern's
    /// lease), and says how much of it is the answer's. The content rules judge the
    /// bytes grep searches: a file whose content a read would refuse shows no line (and,
    /// named on its own, is refused like a read).
    fn grep_search(
        &self,
        query: &GrepQuery,
        (rp, real, is_dir): (&crate::scope::ReqPath, &RelPath, bool),
        facts: &mut Facts,
    ) -> Result<(fsgate_workspace::GrepOutcome, u64), GatewayError> {
        let scanner = self
            .pol
            .content_scanner()
            .filter(|s| s.applies_to(OpClass::Read));
        // Called from the threads searching: the refusal (kept for a file named on its
        // own) goes through a lock.
        let refusal = std::sync::Mutex::new(None);
        let gate = |path: &RelPath, bytes: &[u8]| match self.check_content(
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
        let (room, item_extra) = self.answer_room();
        let per_hit = MAX_HIT_BYTES + item_extra;
        let answer = room
            .min((query.max as u64).saturating_mul(per_hit))
            .saturating_mul(RENDER_COPIES);
        match facts.lease.as_mut() {
            Some(lease) => lease.resize(lease.bytes().saturating_add(answer)),
            None => facts.lease = Some(self.budget.lease_as(answer, facts.waiting)),
        }
        let opts = GrepOptions {
            matcher: &query.matcher,
            include: query.include.as_ref(),
            max_results: query.max,
            max_file_bytes: self.pol.limits().max_read_bytes,
            max_answer_bytes: room,
            item_extra,
            content_gate: scanner.map(|_| &gate as &ContentGate),
            entry_sizes: self.pol.has_size_rules(),
        };
        let filters = RefCell::new(DirFilters::new(self.pol, Access::Grep));
        let found = self
            .workspace
            .grep(real, is_dir, &opts, &|e| filters.borrow_mut().allows(e))
            .map_err(|e| ws_error(e, &rp.shown))?;
        let refused = refusal.into_inner().ok().flatten();
        if let (false, Some(e)) = (is_dir, refused) {
            return Err(e);
        }
        Ok((found, answer))
    }
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
        // The size limit matches the bound `lease_pattern` checked first; the lazy DFA's
        // cache is bounded too (grep-regex's default is 1000 MiB a search).
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(ignore_case)
            .size_limit(usize::try_from(regex_bound::MAX_COMPILED_BYTES).unwrap_or(usize::MAX))
            .dfa_size_limit(regex_bound::DFA_CACHE_BYTES)
            .build(pattern)
            .map_err(|e| {
                // grep-regex reports on its wrapped pattern (`(?:...)`); the parser's own
                // message (the regex crate's) points into the pattern the agent sent,
                // and parsing compiles nothing.
                let msg = regex_syntax::Parser::new()
                    .parse(pattern)
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

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
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

/// Default and ceiling for grep's `maxResults`.
const GREP_DEFAULT_MAX: usize = 1000;

const GREP_CEILING: usize = 100_000;

/// What one grep hit adds to an answer, for the budget: a clipped line (4 KiB), a
/// path, the fields. (The answer itself is bounded exactly by the message limit.)
const MAX_HIT_BYTES: u64 = 4096 + 256 + 64;
