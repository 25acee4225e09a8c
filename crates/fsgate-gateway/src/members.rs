//! The workspaces one gateway serves, first the one that routes, then the others: what
//! routing reads of them (their names and roots), and which one a path lies in. Serving
//! a routed request, which needs the whole gateway, is `route.rs`'s.

use std::sync::Arc;

use serde_json::Value;

use crate::gateway::Gateway;

use crate::rules::RULE_BOUNDARY;

use crate::door::PathStyle;
use crate::ops::Op;
use crate::ops::id::OpId;
use crate::scope::named;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_workspace::{Entry, FileKind};

/// Rule id for a rename from one workspace to another.
pub(crate) const RULE_CROSS: &str = "workspace-cross";

/// Every workspace served, in order: the first, then the others (one alone when a
/// single workspace is served). An iterator over them; its other methods always read
/// them all, wherever the iterator stands.
#[derive(Clone)]
pub struct Members<'a> {
    first: &'a Gateway,
    others: &'a [Arc<Gateway>],
    /// The next one [`Iterator::next`] gives (0: the first).
    at: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = &'a Gateway;

    fn next(&mut self) -> Option<&'a Gateway> {
        let next = match self.at {
            0 => Some(self.first),
            i => self.others.get(i - 1).map(|g| &**g),
        };
        if next.is_some() {
            self.at += 1;
        }
        next
    }
}

/// Where one operation goes.
pub(crate) enum Route {
    /// To the workspace at this index (0: the first), with its paths as that
    /// workspace reads them.
    To(usize, Op),
    /// To every workspace (a relative glob, a grep with no path), answers merged.
    Everywhere(Op),
    /// The WebSocket root that holds the workspaces (`ls /`).
    Top(Op),
    /// Refused before any workspace saw it.
    Refused(Op, GatewayError),
}

impl<'a> Members<'a> {
    /// `first` and the workspaces it routes to.
    pub(crate) fn of(first: &'a Gateway) -> Members<'a> {
        Members {
            first,
            others: &first.others,
            at: 0,
        }
    }

    /// All of them again, from the first.
    fn all(&self) -> Members<'a> {
        Members::of(self.first)
    }

    /// The workspaces served beside the first (several `--workspace`).
    pub fn others(&self) -> &'a [Arc<Gateway>] {
        self.others
    }

    /// The root directory of every workspace served, in order (for messages: a door
    /// shows them, it never opens them).
    pub fn root_paths(&self) -> impl Iterator<Item = &'a std::path::Path> + use<'a> {
        self.all().map(|m| m.workspace.root_path())
    }

    /// Whether some workspace's policy allows `class` at all (capability flags).
    pub fn can_ever(&self, class: fsgate_decide::OpClass) -> bool {
        self.all().any(|m| m.policy().can_ever(class))
    }

    pub(crate) fn route(&self, style: PathStyle, mut op: Op) -> Route {
        let (first, second) = op.places_mut();
        let Some(first) = first else {
            return Route::Everywhere(op);
        };
        if style == PathStyle::Rooted && RelPath::parse_rooted(first).is_ok_and(|p| p.is_root()) {
            return Route::Top(op);
        }
        if style != PathStyle::Rooted && !first.starts_with('/') {
            // A relative glob searches every workspace; another relative path is the
            // first workspace's (MCP), or refused there as not absolute (ACP).
            return match op.id() {
                OpId::Glob => Route::Everywhere(op),
                _ => Route::To(0, op),
            };
        }
        let (at, rest) = match self.place(style, first) {
            Ok(found) => found,
            Err(e) => return Route::Refused(op, e),
        };
        if let Some(to) = second {
            match self.place(style, to) {
                Err(e) => return Route::Refused(op, e),
                Ok((at2, _)) if at2 != at => {
                    let err = self.cross_refusal(first, to, at, at2);
                    return Route::Refused(op, err);
                }
                Ok((_, Some(rest2))) => *to = rest2,
                Ok((_, None)) => {}
            }
        }
        if let Some(rest) = rest {
            *first = rest;
        }
        Route::To(at, op)
    }

    /// The workspace `text` lies in, and on the WebSocket channel the path within it.
    /// A relative path (ACP, MCP) is the first workspace's; a text that does not parse
    /// goes there too, to be refused as it always has been.
    fn place(&self, style: PathStyle, text: &str) -> Result<(usize, Option<String>), GatewayError> {
        let Ok(lexical) = RelPath::parse_rooted(text) else {
            return Ok((0, None));
        };
        if style != PathStyle::Rooted && !text.starts_with('/') {
            return Ok((0, None));
        }
        if style == PathStyle::Rooted {
            let mut parts = lexical.as_str().splitn(2, '/');
            let name = parts.next().unwrap_or("");
            let rest = format!("/{}", parts.next().unwrap_or(""));
            return match self.all().position(|m| m.name() == Some(name)) {
                Some(i) => Ok((i, Some(rest))),
                None => Err(self.outside(text, &format!("no workspace is named `{name}`"))),
            };
        }
        let found = self.all().enumerate().find(|(_, m)| {
            let dealiased = m.workspace.dealias(text);
            RelPath::parse_absolute(&dealiased, m.workspace.root_path()).is_ok()
        });
        match found {
            Some((i, _)) => Ok((i, None)),
            None => Err(self.outside(text, "it lies in none of the workspace roots")),
        }
    }

    /// The refusal of a path in no workspace, naming them all.
    fn outside(&self, text: &str, why: &str) -> GatewayError {
        let shown = crate::rules::clip(&text.replace('\0', "\\0"));
        GatewayError::Refused {
            reason: format!(
                "`{shown}` is outside the workspaces: {why} (served: {})",
                self.served()
            ),
            rule: RULE_BOUNDARY.into(),
            path: shown,
        }
    }

    /// `[{name, root}, ...]`, for `_meta.fsgate` and the `start` record.
    pub fn json(&self) -> Value {
        self.all()
            .map(|m| {
                serde_json::json!({
                    "name": m.name().unwrap_or(""),
                    "root": m.workspace.root_path().to_string_lossy(),
                })
            })
            .collect()
    }

    /// `name=/root, ...` for messages.
    pub(crate) fn served(&self) -> String {
        self.all()
            .map(|m| {
                format!(
                    "{}={}",
                    m.name().unwrap_or(""),
                    m.workspace.root_path().display()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn cross_refusal(&self, from: &str, to: &str, a: usize, b: usize) -> GatewayError {
        let name = |i: usize| self.all().nth(i).and_then(Gateway::name).unwrap_or("");
        GatewayError::Refused {
            reason: format!(
                "rename across workspaces is not supported: `{}` is in workspace `{}`, `{}` in `{}`; copy the file (read, write) and remove the original instead",
                crate::rules::clip(from),
                name(a),
                crate::rules::clip(to),
                name(b)
            ),
            rule: RULE_CROSS.into(),
            path: crate::rules::clip(from),
        }
    }

    /// `ls /` on the WebSocket channel: the workspaces, as directories.
    pub(crate) fn top_entries(&self) -> Vec<Entry> {
        self.all().filter_map(top_entry).collect()
    }

    /// A path of the results (`<name>/<path>`) in the door's form (several
    /// workspaces): absolute under that workspace's root, or `/<name>/<path>`.
    pub(crate) fn show_named(&self, rel: &RelPath) -> Option<String> {
        let mut parts = rel.as_str().splitn(2, '/');
        let name = parts.next()?;
        let member = self.all().find(|m| m.name() == Some(name))?;
        let rest = RelPath::parse_rooted(&format!("/{}", parts.next().unwrap_or(""))).ok()?;
        Some(rest.to_absolute(member.workspace.root_path()))
    }

    /// `path` (absolute, or relative to the first workspace) as `<name>/<path>` in the
    /// workspace that holds it, or as the one workspace's own path; None outside every
    /// workspace. Lexical only.
    pub fn named_path(&self, path: &str) -> Option<RelPath> {
        if !path.starts_with('/') {
            let rel = RelPath::parse_rooted(path).ok()?;
            return Some(match &self.first.name {
                Some(name) => named(name, &rel),
                None => rel,
            });
        }
        self.all().find_map(|m| {
            let rel = RelPath::parse_absolute(&m.workspace.dealias(path), m.workspace.root_path())
                .ok()?;
            Some(match &m.name {
                Some(name) => named(name, &rel),
                None => rel,
            })
        })
    }
}

/// A workspace as an entry of the WebSocket root: a directory under its name.
fn top_entry(m: &Gateway) -> Option<Entry> {
    let name = m.name()?;
    Some(Entry {
        name: name.into(),
        path: named(name, &RelPath::root()),
        kind: FileKind::Directory,
        size: None,
        modified: None,
        mode: None,
        id: None,
        ino: None,
    })
}
