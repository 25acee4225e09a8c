//! A request's paths: parsed in the door's style, shown back in it, resolved beneath
//! the root and checked where they really lead, and a workspace failure as the
//! contract's error.

use crate::door::PathStyle;
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::rules::{RULE_BOUNDARY, RULE_LINK};
use crate::scope::RULE_ROOTS;
use crate::scope::ReqPath;
use fsgate_base::error::GatewayError;
use fsgate_base::path::{PathError, RelPath};
use fsgate_decide::{EntryKind, OpClass};
use fsgate_workspace::{Follow, Resolved};

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
        ReqPath::new(self.name, self.ctx.scope.roots(), rel, shown)
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
            .map_err(|e| crate::rules::ws_error(e, &rp.shown))?;
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
