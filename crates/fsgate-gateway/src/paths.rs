//! A request's paths: parsed in the door's style, shown back in it, resolved beneath
//! the root and checked where they really lead, and a workspace failure as the
//! contract's error.

use super::scope::RULE_ROOTS;
use super::{
    Facts, Gateway, RULE_BOUNDARY, RULE_DEPTH, RULE_FILE_TYPE, RULE_LINK, RULE_NO_REPLACE, RULE_OS,
    RULE_UNINSPECTED, ReqPath,
};
use crate::ops::Cx;
use crate::ops::PathStyle;
use fsgate_base::error::GatewayError;
use fsgate_base::path::{PathError, RelPath};
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::{Follow, Resolved, WsError};

impl Cx<'_> {
    /// Parses a request path in the transport's style.
    pub(crate) fn parse_path(&self, input: &str) -> Result<ReqPath, GatewayError> {
        let root = self.workspace.root_path();
        let dealiased = self.dealias(self.ctx.style, input);
        let parsed = match self.ctx.style {
            PathStyle::Absolute => RelPath::parse_absolute(&dealiased, root),
            PathStyle::AbsoluteOrRelative => RelPath::parse_any(&dealiased, root),
            PathStyle::Rooted => RelPath::parse_rooted(&dealiased),
        };
        let shown = input.replace('\0', "\\0");
        match parsed {
            Ok(rel) => Ok(self.req_path(rel, shown)),
            Err(e @ (PathError::OutsideRoot { .. } | PathError::Escapes)) => {
                Err(GatewayError::Refused {
                    reason: e.to_string(),
                    rule: RULE_BOUNDARY.into(),
                    path: shown,
                })
            }
            Err(e) => Err(GatewayError::InvalidParams(format!("path {shown:?}: {e}"))),
        }
    }

    /// `rel` as a request path of `self.ctx`'s session in this workspace.
    pub(crate) fn req_path(&self, rel: RelPath, shown: String) -> ReqPath {
        ReqPath::new(self.name, self.ctx, rel, shown)
    }

    /// `input` with the operator's name for the root replaced by the canonical root
    /// ([`Workspace::dealias`](fsgate_workspace::Workspace::dealias)), for host-path
    /// styles only: workspace-rooted paths (WebSocket) are never host paths.
    pub(crate) fn dealias<'a>(
        &self,
        style: PathStyle,
        input: &'a str,
    ) -> std::borrow::Cow<'a, str> {
        match style {
            PathStyle::Rooted => std::borrow::Cow::Borrowed(input),
            _ => self.workspace.dealias(input),
        }
    }

    /// Renders a path of this workspace in the transport's style.
    pub(crate) fn show_path(&self, style: PathStyle, rel: &RelPath) -> String {
        match style {
            PathStyle::Absolute | PathStyle::AbsoluteOrRelative => {
                rel.to_absolute(self.workspace.root_path())
            }
            PathStyle::Rooted => rel.to_rooted(),
        }
    }

    /// Path gate + policy gate: checks the lexical path, resolves it beneath the root,
    /// and checks again where it really leads.
    pub(crate) fn locate(
        &self,
        class: OpClass,
        rp: &ReqPath,
        follow: Follow,
        kind: EntryKind,
        facts: &mut Facts,
    ) -> Result<Resolved, GatewayError> {
        Self::in_roots(rp, &rp.rel, facts)?;
        self.check(class, &rp.rel, kind, &rp.shown, facts)?;
        self.resolve_checked(class, rp, follow, kind, facts)
    }

    /// The second half of [`Gateway::locate`], for callers that checked the lexical path
    /// themselves: resolves it beneath the root and checks again where it really leads.
    pub(crate) fn resolve_checked(
        &self,
        class: OpClass,
        rp: &ReqPath,
        follow: Follow,
        kind: EntryKind,
        facts: &mut Facts,
    ) -> Result<Resolved, GatewayError> {
        let res = self
            .workspace
            .resolve(&rp.rel, follow)
            .map_err(|e| ws_error(e, &rp.shown))?;
        if res.real != rp.rel {
            if facts.unlinked {
                return Err(Self::linked(rp, facts));
            }
            Self::in_roots(rp, &res.real, facts)?;
            if let Some(ask) = facts.ask.as_mut() {
                ask.retarget(&rp.rel, &res.real);
            }
            self.check(class, &res.real, kind, &rp.shown, facts)?;
        }
        Ok(res)
    }

    /// The refusal of a path that leads through a symbolic link, for a request that
    /// may follow none (see [`How::noted`](crate::How::noted)).
    fn linked(rp: &ReqPath, facts: &mut Facts) -> GatewayError {
        facts.decision = Some("deny");
        facts.rule = Some(RULE_LINK.to_string());
        GatewayError::Refused {
            reason: format!(
                "`{}` leads through a symbolic link; fsgate undo follows none",
                rp.rel
            ),
            rule: RULE_LINK.into(),
            path: rp.shown.clone(),
        }
    }

    /// Refuses `path` (the request's, or where it leads) outside the session's roots.
    pub(crate) fn in_roots(
        rp: &ReqPath,
        path: &RelPath,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if rp.in_roots(path) {
            return Ok(());
        }
        facts.decision = Some("deny");
        facts.rule = Some(RULE_ROOTS.to_string());
        Err(GatewayError::Refused {
            reason: format!(
                "`{path}` is outside the roots this session's client gave (see list_allowed_directories)"
            ),
            rule: RULE_ROOTS.into(),
            path: rp.shown.clone(),
        })
    }
}

/// A path for an error message: long ones are cut, so a 10 KB path is not echoed whole.
pub fn clip(shown: &str) -> String {
    const MAX: usize = 200;
    if shown.len() <= MAX {
        return shown.to_string();
    }
    let mut end = MAX;
    while !shown.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &shown[..end], shown.len())
}

/// Maps a workspace failure to the contract's error, naming the request's path.
pub(crate) fn ws_error(e: WsError, shown: &str) -> GatewayError {
    let path = shown.to_string();
    match e {
        WsError::NotFound => GatewayError::NotFound { path },
        WsError::SymlinkEscape | WsError::Raced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_BOUNDARY.into(),
            path,
        },
        WsError::HardLink(_) | WsError::Special(_) => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_FILE_TYPE.into(),
            path,
        },
        WsError::TooLarge { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: "limits.max_read_bytes".into(),
            path,
        },
        WsError::IsDir
        | WsError::NotDir
        | WsError::NotEmpty
        | WsError::Exists
        | WsError::NotUtf8
        | WsError::CrossDirRename => GatewayError::InvalidParams(format!("{shown}: {e}")),
        WsError::OsDenied => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_OS.into(),
            path,
        },
        WsError::TooDeep { .. } => GatewayError::Limit {
            reason: e.to_string(),
            rule: RULE_DEPTH.into(),
            path,
        },
        WsError::Unseen(_) | WsError::Replaced => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_UNINSPECTED.into(),
            path,
        },
        WsError::DestinationExists | WsError::NoReplaceUnsupported => GatewayError::Refused {
            reason: e.to_string(),
            rule: RULE_NO_REPLACE.into(),
            path,
        },
        WsError::NameTooLong => GatewayError::InvalidParams(format!("{}: {e}", clip(shown))),
        WsError::Io(io) => GatewayError::Internal(format!("{}: {io}", clip(shown))),
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
