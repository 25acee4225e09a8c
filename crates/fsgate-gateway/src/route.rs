//! Several workspaces behind one gateway: which one a request's path lies in.
//!
//! Each workspace is served by a [`Gateway`] of its own (its handle, its policy, its
//! backups; one shared audit log). The first one also routes: on ACP and MCP an
//! absolute path goes to the workspace whose root contains it, component-wise (the
//! roots never nest, so at most one does); a relative one (MCP) to the first. On the
//! WebSocket channel `/<name>/...` names the workspace. A path in no workspace, and a
//! rename from one workspace to another, are refused here, with a record. Results name
//! paths as `<name>/<path>`, which [`Gateway::show_path`] turns back into the door's form.
//! Which workspace a path lies in is [`Members`]' to say; serving it is this file's.

use crate::door::PathStyle;
use crate::ops;
use std::sync::Arc;

use serde_json::Value;

use crate::budget::Lease;
use crate::gateway::Gateway;
use crate::members::{Members, Route};
use crate::ops::Op;
use crate::ops::id::OpId;
use crate::ops::output::Output;
use crate::record::record_message;
use crate::request::RequestCtx;
use crate::rules::RULE_BOUNDARY;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;

impl Gateway {
    /// Serves the workspaces `others` beside this one, every one under its name.
    pub fn with_members(mut self, name: &str, others: Vec<(String, Gateway)>) -> Gateway {
        self.name = Some(Arc::from(name));
        self.others = others
            .into_iter()
            .map(|(n, mut g)| {
                g.name = Some(Arc::from(n.as_str()));
                g.budget = Arc::clone(&self.budget);
                g.grants = Arc::clone(&self.grants);
                Arc::new(g)
            })
            .collect();
        self
    }

    /// This workspace's name, when several are served.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Every workspace served: this one first, then the others.
    pub fn members(&self) -> Members<'_> {
        Members::of(self)
    }

    /// Whether several workspaces are served (every path then names one).
    pub fn is_several(&self) -> bool {
        self.name.is_some()
    }
}

/// Serves `op` where its paths lie among the workspaces `gw` serves.
pub(super) fn route_op(
    gw: &Gateway,
    ctx: &RequestCtx,
    op: Op,
    batch: Option<&crate::batch::Batch>,
) -> (Result<Output, GatewayError>, Option<Lease>) {
    match gw.members().route(ctx.style, op) {
        Route::To(i, op) => {
            let Some(member) = gw.members().nth(i) else {
                return (
                    Err(GatewayError::Internal("no such workspace".into())),
                    None,
                );
            };
            let (out, lease) = handle_in(member, ctx, op, batch);
            (out.map(|o| named_output(member.name(), o)), lease)
        }
        Route::Everywhere(op) => everywhere(gw, ctx, op, batch),
        Route::Top(op) => (top(gw, ctx, &op), None),
        Route::Refused(op, e) => (handle_refused(gw, ctx, op, e), None),
    }
}

/// An output's paths with the workspace's `name` in front.
fn named_output(name: Option<&str>, out: Output) -> Output {
    match name {
        Some(name) => out.map_paths(|p| crate::scope::named(name, &p)),
        None => out,
    }
}

/// A relative glob or a pathless grep, run in every workspace the session reaches,
/// one after another (each recorded in its own workspace's record); the matches follow one another,
/// cut at half the message limit.
fn everywhere(
    gw: &Gateway,
    ctx: &RequestCtx,
    op: Op,
    batch: Option<&crate::batch::Batch>,
) -> (Result<Output, GatewayError>, Option<Lease>) {
    let room = gw.policy().limits().max_message_bytes / 2;
    let mut merged: Option<Output> = None;
    for member in reached(gw, ctx) {
        // Each answer's lease is let go before the next workspace is searched: one
        // lease may hold the whole budget, and the next would wait for it forever.
        let (out, _lease) = handle_in(member, ctx, op.clone(), batch);
        let out = match out {
            Ok(o) => named_output(member.name(), o),
            Err(e) => return (Err(e), None),
        };
        merged = Some(match merged {
            None => out,
            Some(so_far) => merge(so_far, out, &op),
        });
    }
    let Some(merged) = merged else {
        return (Err(GatewayError::Internal("no workspace".into())), None);
    };
    let (merged, used) = cut_to(merged, room);
    let waiting = batch.map_or(crate::budget::Waiting::Wait, crate::batch::Batch::waiting);
    let lease = gw.budget.lease_as(used.saturating_mul(3), waiting);
    (Ok(merged), Some(lease))
}

/// The workspaces the session's roots reach (each, when they narrow nothing); none
/// reached: the first, which refuses the search as outside the roots, with a record.
fn reached<'g>(gw: &'g Gateway, ctx: &RequestCtx) -> Vec<&'g Gateway> {
    let roots = ctx.scope.roots();
    let reached: Vec<&Gateway> = gw
        .members()
        .filter(|m| {
            crate::scope::own_roots(m.name.as_ref(), roots.clone()).is_none_or(|r| !r.is_empty())
        })
        .collect();
    match reached.is_empty() {
        true => vec![gw],
        false => reached,
    }
}

/// `ls /` and `stat /` on the WebSocket channel: the workspaces, as directories.
/// Any other operation on `/` is refused: it is no directory of its own.
fn top(gw: &Gateway, ctx: &RequestCtx, op: &Op) -> Result<Output, GatewayError> {
    let out = match op.id() {
        OpId::Ls | OpId::Tree => Ok(Output::Entries {
            entries: gw.members().top_entries(),
            truncated: false,
            next: None,
        }),
        OpId::Stat => {
            let (out, _) = handle_in(gw, ctx, op.clone(), None);
            return out;
        }
        _ => Err(GatewayError::Refused {
            reason: format!(
                "`/` holds the workspaces ({}); name one: /<name>/...",
                gw.members().served()
            ),
            rule: RULE_BOUNDARY.into(),
            path: "/".into(),
        }),
    };
    let outcome = match &out {
        Ok(_) => Ok(()),
        Err(e) => Err((e.code(), e.message())),
    };
    record_message(gw.audit.as_ref(), ctx, op.name(), outcome, None)?;
    out
}

/// Records a request refused before any workspace took it.
fn handle_refused(
    gw: &Gateway,
    ctx: &RequestCtx,
    op: Op,
    err: GatewayError,
) -> Result<Output, GatewayError> {
    let mut note = serde_json::Map::new();
    note.insert("workspaces".into(), Value::String(gw.members().served()));
    gw.handle_with(ctx, op, (note, None, false), Err(err)).0
}

impl Op {
    /// `self`, whose paths are rooted in the workspace `name`, with them named as the
    /// rooted style names a path when several workspaces are served (`/<name>/...`), so
    /// that the routing above takes it to that workspace (the view of one workspace
    /// among several: every path it asks about is its own workspace's).
    pub fn in_workspace(mut self, name: &str) -> Op {
        let (first, second) = self.places_mut();
        for place in [first, second].into_iter().flatten() {
            *place = match place.trim_start_matches('/') {
                "" => format!("/{name}"),
                rest => format!("/{name}/{rest}"),
            };
        }
        self
    }
}

/// `op` served in `member`'s workspace, in `batch` if one is given.
fn handle_in(
    member: &Gateway,
    ctx: &RequestCtx,
    op: Op,
    batch: Option<&crate::batch::Batch>,
) -> (Result<Output, GatewayError>, Option<Lease>) {
    member.handle_with(ctx, op, (serde_json::Map::new(), batch, false), Ok(()))
}

/// Two answers of one glob or grep, run in two workspaces, as one.
fn merge(a: Output, b: Output, op: &Op) -> Output {
    match (a, b) {
        (
            Output::Paths {
                mut paths,
                truncated,
            },
            Output::Paths {
                paths: more,
                truncated: t2,
            },
        ) => {
            paths.extend(more);
            Output::Paths {
                paths,
                truncated: truncated || t2,
            }
        }
        (
            Output::Grep {
                mut hits,
                truncated,
            },
            Output::Grep {
                hits: more,
                truncated: t2,
            },
        ) => {
            hits.extend(more);
            let max = match op {
                Op::Grep(ops::Grep {
                    max_results: Some(m),
                    ..
                }) => usize::try_from(*m).unwrap_or(usize::MAX),
                _ => usize::MAX,
            };
            let cut = hits.len() > max;
            hits.truncate(max);
            Output::Grep {
                hits,
                truncated: truncated || t2 || cut,
            }
        }
        (a, _) => a,
    }
}

/// The bytes a result path or hit takes in an answer, roughly (its root and the JSON
/// around it included).
fn weight(path: &RelPath, line: &str) -> u64 {
    u64::try_from(path.as_str().len() + line.len() + 256).unwrap_or(u64::MAX)
}

/// `out` cut to at most `room` bytes of answer (said to be cut), and what it weighs.
fn cut_to(out: Output, room: u64) -> (Output, u64) {
    let mut used = 0u64;
    let mut fits = |w: u64| {
        used = used.saturating_add(w);
        used <= room
    };
    match out {
        Output::Paths { paths, truncated } => {
            let n = paths.iter().take_while(|p| fits(weight(p, ""))).count();
            let cut = n < paths.len();
            let paths = paths.into_iter().take(n).collect();
            (
                Output::Paths {
                    paths,
                    truncated: truncated || cut,
                },
                used.min(room),
            )
        }
        Output::Grep { hits, truncated } => {
            let n = hits
                .iter()
                .take_while(|h| fits(weight(&h.path, &h.line)))
                .count();
            let cut = n < hits.len();
            let hits = hits.into_iter().take(n).collect();
            (
                Output::Grep {
                    hits,
                    truncated: truncated || cut,
                },
                used.min(room),
            )
        }
        other => (other, 0),
    }
}

impl Gateway {
    /// Renders a workspace path in the transport's style.
    pub fn show_path(&self, style: PathStyle, rel: &RelPath) -> String {
        match style {
            PathStyle::Absolute | PathStyle::AbsoluteOrRelative if self.is_several() => self
                .members()
                .show_named(rel)
                .unwrap_or_else(|| rel.to_absolute(self.workspace.root_path())),
            PathStyle::Absolute | PathStyle::AbsoluteOrRelative => {
                rel.to_absolute(self.workspace.root_path())
            }
            PathStyle::Rooted => rel.to_rooted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_workspace::GrepMatch;

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    fn hit(path: &str) -> GrepMatch {
        GrepMatch {
            path: rel(path),
            line_number: 1,
            line: "x".into(),
        }
    }

    #[test]
    fn a_views_op_is_named_in_its_workspace() {
        let op = Op::Rename(ops::Rename {
            from: "/a/b".into(),
            to: "/c".into(),
            replace: true,
        })
        .in_workspace("lib");
        match op {
            Op::Rename(ops::Rename { from, to, .. }) => {
                assert_eq!((from.as_str(), to.as_str()), ("/lib/a/b", "/lib/c"))
            }
            other => panic!("{other:?}"),
        }
        match (Op::Stat(ops::Stat {
            path: "/".into(),
            follow: true,
        }))
        .in_workspace("lib")
        {
            Op::Stat(ops::Stat { path, .. }) => assert_eq!(path, "/lib"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_path_is_named_by_its_workspace() {
        assert_eq!(
            crate::scope::named("docs", &RelPath::root()).as_str(),
            "docs"
        );
        assert_eq!(
            crate::scope::named("docs", &rel("a/b.md")).as_str(),
            "docs/a/b.md"
        );
    }

    #[test]
    fn merged_greps_keep_to_max_results_and_say_they_were_cut() {
        let grep = |hits| Output::Grep {
            hits,
            truncated: false,
        };
        let op = Op::Grep(ops::Grep {
            pattern: "x".into(),
            path: None,
            ignore_case: false,
            include_glob: None,
            max_results: Some(2),
        });
        match merge(
            grep(vec![hit("a/1")]),
            grep(vec![hit("b/1"), hit("b/2")]),
            &op,
        ) {
            Output::Grep { hits, truncated } => {
                let paths: Vec<_> = hits.iter().map(|h| h.path.as_str()).collect();
                assert_eq!(paths, ["a/1", "b/1"]);
                assert!(truncated);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_merged_answer_is_cut_to_its_room() {
        let paths: Vec<RelPath> = (0..100).map(|i| rel(&format!("w/{i}"))).collect();
        let (out, used) = cut_to(Output::paths(paths), 10 * 260);
        match out {
            Output::Paths { paths, truncated } => {
                assert!(paths.len() < 100 && !paths.is_empty());
                assert!(truncated);
            }
            other => panic!("{other:?}"),
        }
        assert!(used <= 10 * 260);
    }
}
