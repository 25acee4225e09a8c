//! `glob`: the visible paths a pattern matches.

use crate::ops::cx::Cx;

use crate::ops::operation::{Operation, Places};
use globset::GlobBuilder;
use serde_json::{Map, Value};

use crate::door::PathStyle;
use crate::facts::Facts;
use crate::listing::*;
use crate::ops::output::Output;
use crate::rules::ws_error;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::{Entry, Follow};

/// `_fsgate/glob`.
#[derive(Debug, Clone)]
pub struct Glob {
    /// Pattern, relative to the root or absolute under it.
    pub pattern: String,
}

impl Operation for Glob {
    const LISTS: bool = true;

    fn name() -> &'static str {
        "glob"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("pattern", self.pattern.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.pattern), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        args.insert("pattern".into(), self.pattern.clone().into());
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.glob(&self.pattern, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn glob(&self, pattern: &str, facts: &mut Facts) -> Result<Output, GatewayError> {
        let rel_pattern = self.relative_pattern(pattern)?;
        facts.path = Some(rel_pattern.clone());
        let glob = GlobBuilder::new(&rel_pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| {
                GatewayError::InvalidParams(format!("invalid glob {pattern:?}: {}", e.kind()))
            })?
            .compile_matcher();
        let base = glob_base(&rel_pattern);
        let rp = self.req_path(base.clone(), self.show_path(self.ctx.style, &base));
        let res = match self.locate(OpClass::List, &rp, Follow::All, EntryKind::Dir, facts) {
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
        let room = self.answer_room();
        // The answer may fill the whole room: hold that much of the budget for it.
        facts.lease = Some(
            self.budget
                .lease_as(room.0.saturating_mul(RENDER_COPIES), facts.waiting),
        );
        // Each thread of the walk decides entries with filters of its own.
        let new_visible = || {
            let mut filters = DirFilters::new(self.pol, Access::Glob);
            move |e: &Entry| filters.allows(e)
        };
        let sizes = self.pol.has_size_rules();
        let (paths, truncated) = self
            .workspace
            .glob(&glob, &res.real, room, (&new_visible, sizes))
            .map_err(|e| ws_error(e, &rp.shown))?;
        if truncated {
            facts.args.insert("truncated".into(), true.into());
        }
        Ok(Output::Paths { paths, truncated })
    }

    /// A glob pattern relative to the root: relative as given, or absolute under it.
    fn relative_pattern(&self, pattern: &str) -> Result<String, GatewayError> {
        if pattern.contains('\0') {
            return Err(GatewayError::InvalidParams(
                "pattern contains a NUL byte".into(),
            ));
        }
        let dealiased = self.dealias(self.ctx.style, pattern);
        let pattern = dealiased.as_ref();
        let rel = if pattern.starts_with('/') && self.ctx.style != PathStyle::Rooted {
            let root = self.workspace.root_path().to_string_lossy().into_owned();
            let root = root.trim_end_matches('/');
            match pattern.strip_prefix(root) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    rest.trim_start_matches('/').to_string()
                }
                _ => {
                    return Err(GatewayError::Refused {
                        reason: format!("glob pattern is outside the workspace root {root}"),
                        rule: crate::rules::RULE_BOUNDARY.into(),
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
                rule: crate::rules::RULE_BOUNDARY.into(),
                path: pattern.to_string(),
            });
        }
        if rel.is_empty() {
            return Err(GatewayError::InvalidParams("empty glob pattern".into()));
        }
        Ok(rel)
    }
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
