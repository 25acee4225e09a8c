//! A session's scope: the parts of the workspace it may reach. Every session reaches the
//! whole workspace unless its client narrows it (MCP roots, see
//! `transport::mcp::roots`); a scope never reaches beyond the workspace.
//!
//! The gateway checks every request path against the scope where the path is named and
//! where it really leads, in [`Gateway::locate`](super::Gateway::locate).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;

/// Rule id for refusals of paths outside the session's roots.
pub(crate) const RULE_ROOTS: &str = "client-roots";

/// Directories a session is narrowed to (real workspace paths), shared by the requests
/// of one connection. None: the whole workspace.
pub type Roots = Option<Arc<[RelPath]>>;

/// A session's scope; the default (and every door but MCP) is the whole workspace.
#[derive(Debug, Clone, Default)]
pub struct Scope(Option<Arc<Shared>>);

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    settled: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Why the session reaches nothing at all: every call is refused with this.
    shut: Option<GatewayError>,
    roots: Roots,
    /// What the session may reach at most (an ACP session's workspaces): the client's
    /// roots narrow within it, never beyond.
    ceiling: Roots,
    /// The client was asked for its roots and has not answered yet.
    pending: bool,
    /// The client declared it has roots: a change it announces is waited for.
    declared: bool,
    /// The latest ask: only its answer settles the scope (an older answer that comes
    /// late must not undo a newer one).
    asked: u64,
}

impl Scope {
    /// A scope the session's client may narrow.
    pub(crate) fn narrowable() -> Scope {
        Scope(Some(Arc::default()))
    }

    /// A scope the client may narrow, reaching at most `ceiling` (None: the whole
    /// workspace, as `Scope::narrowable`).
    pub fn within(ceiling: Roots) -> Scope {
        let scope = Scope::narrowable();
        if let Some(mut s) = scope.lock() {
            s.roots = ceiling.clone();
            s.ceiling = ceiling;
        }
        scope
    }

    /// A scope fixed to `roots` (None: the whole workspace).
    pub fn fixed(roots: Roots) -> Scope {
        match roots {
            None => Scope::default(),
            Some(_) => Scope::within(roots),
        }
    }

    /// A scope that reaches nothing: every call is refused with `refusal` before it
    /// runs (and a path that got past would still be beneath no root).
    pub fn shut(refusal: GatewayError) -> Scope {
        let scope = Scope::within(Some(Arc::from(Vec::new())));
        if let Some(mut s) = scope.lock() {
            s.shut = Some(refusal);
        }
        scope
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, State>> {
        let shared = self.0.as_ref()?;
        Some(shared.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether a call must wait for roots on their way. Never for a shut scope: no
    /// roots could open it, so its calls are refused at once.
    pub fn waits(&self) -> bool {
        self.lock().is_some_and(|s| s.pending && s.shut.is_none())
    }

    /// The roots in force now.
    pub fn roots(&self) -> Roots {
        self.lock().and_then(|s| s.roots.clone())
    }

    /// New roots are on their way: calls wait for them ([`Self::settled`]). Returns
    /// the ask's ticket for [`Self::set`].
    pub fn expect(&self) -> u64 {
        let Some(mut s) = self.lock() else { return 0 };
        s.pending = true;
        s.asked += 1;
        s.asked
    }

    /// The client declared roots (MCP `initialize`): calls wait for them from now on.
    pub fn declare(&self) {
        if let Some(mut s) = self.lock() {
            s.declared = true;
            s.pending = true;
            s.asked += 1;
        }
    }

    /// The client announced new roots: if it declared roots, calls wait for them.
    pub fn changing(&self) {
        if let Some(mut s) = self.lock()
            && s.declared
        {
            s.pending = true;
            s.asked += 1;
        }
    }

    /// The answer to the ask `ticket` arrived (or the ask ended): `roots` is in force
    /// from now on, unless a newer ask is outstanding (then its answer decides, and
    /// this returns false).
    pub fn set(&self, ticket: u64, roots: Roots) -> bool {
        let Some(shared) = &self.0 else { return false };
        let mut s = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if ticket != s.asked {
            return false;
        }
        s.roots = narrow(&s.ceiling, roots);
        s.pending = false;
        shared.settled.notify_all();
        true
    }

    /// The roots, once no answer is outstanding. Err if none came within `wait` (the
    /// asker gives up sooner, so this is only a backstop): the call is refused rather
    /// than served with roots that may be about to narrow.
    pub fn settled(&self, wait: Duration) -> Result<Roots, GatewayError> {
        let Some(shared) = &self.0 else {
            return Ok(None);
        };
        let deadline = Instant::now() + wait;
        let mut s = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(refusal) = &s.shut {
            return Err(refusal.clone());
        }
        while s.pending {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(GatewayError::Refused {
                    reason: "the client's roots were asked for and have not arrived".into(),
                    rule: RULE_ROOTS.into(),
                    path: String::new(),
                });
            }
            s = shared
                .settled
                .wait_timeout(s, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        Ok(s.roots.clone())
    }
}

/// A request path, parsed: the lexical workspace path and the text the request gave,
/// with the session's roots as the workspace serving it names its paths. The roots are
/// mapped once, here (with several workspaces a scope names paths `<name>/...`): every
/// request path and every walk's start is built by [`ReqPath::new`], so none is ever
/// checked against another workspace's names.
#[derive(Debug, Clone)]
pub(crate) struct ReqPath {
    pub rel: RelPath,
    pub shown: String,
    /// The session's roots when the request was read, in this workspace's paths: the
    /// path must lie beneath one.
    roots: Roots,
}

impl ReqPath {
    /// `rel` in `gw`'s workspace, under the roots of `ctx`'s session there.
    pub(crate) fn new(
        workspace: Option<&Arc<str>>,
        roots: Roots,
        rel: RelPath,
        shown: String,
    ) -> ReqPath {
        ReqPath {
            rel,
            shown,
            roots: own_roots(workspace, roots),
        }
    }

    /// Whether `path` (of the same workspace) lies beneath the session's roots.
    pub(crate) fn in_roots(&self, path: &RelPath) -> bool {
        within(&self.roots, path)
    }
}

/// What a session may reach at most, for a door that makes its scopes (the MCP server
/// `fsgate acp` hosts for an ACP session): every workspace (the default), some
/// directories, or nothing at all, refused for a stated reason.
#[derive(Debug, Clone, Default)]
pub struct Ceiling {
    roots: Roots,
    shut: Option<GatewayError>,
}

impl Ceiling {
    /// At most `roots` (None: every workspace).
    pub fn roots(roots: Roots) -> Ceiling {
        Ceiling { roots, shut: None }
    }

    /// Nothing: every call refused with `refusal`.
    pub fn shut(refusal: GatewayError) -> Ceiling {
        Ceiling {
            roots: Some(Arc::from(Vec::new())),
            shut: Some(refusal),
        }
    }

    /// A scope under this ceiling that the client may narrow.
    pub fn narrowable(&self) -> Scope {
        match &self.shut {
            Some(e) => Scope::shut(e.clone()),
            None => Scope::within(self.roots.clone()),
        }
    }

    /// A scope fixed to this ceiling.
    pub fn fixed(&self) -> Scope {
        match &self.shut {
            Some(e) => Scope::shut(e.clone()),
            None => Scope::fixed(self.roots.clone()),
        }
    }
}

/// `roots` kept within `ceiling`: those beneath it (none given: the ceiling itself).
fn narrow(ceiling: &Roots, roots: Roots) -> Roots {
    match (ceiling, roots) {
        (None, roots) => roots,
        (Some(c), None) => Some(Arc::clone(c)),
        (Some(_), Some(r)) => Some(r.iter().filter(|p| within(ceiling, p)).cloned().collect()),
    }
}

/// Whether `path` is one of `roots` or beneath one.
pub fn within(roots: &Roots, path: &RelPath) -> bool {
    roots
        .as_ref()
        .is_none_or(|r| r.iter().any(|root| path.starts_with(root)))
}

/// The session's roots (MCP), which name paths as `<name>/<path>` when several
/// workspaces are served, narrowed to the workspace `name`'s and made its own.
pub(crate) fn own_roots(name: Option<&Arc<str>>, roots: Roots) -> Roots {
    let (Some(name), Some(roots)) = (name, roots.as_ref()) else {
        return roots;
    };
    let mine = crate::scope::named(name, &RelPath::root());
    let own: Vec<RelPath> = roots.iter().filter_map(|r| r.strip_prefix(&mine)).collect();
    Some(Arc::from(own))
}

/// `<name>/<path>`.
pub(crate) fn named(name: &str, rel: &RelPath) -> RelPath {
    let top = RelPath::root().join(name);
    if rel.is_root() {
        top
    } else {
        top.join(rel.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> RelPath {
        RelPath::parse_rooted(s).unwrap()
    }

    #[test]
    fn roots_narrow_component_wise() {
        let roots: Roots = Some(Arc::from(vec![rel("src"), rel("docs/api")]));
        assert!(within(&roots, &rel("src")));
        assert!(within(&roots, &rel("src/a.rs")));
        assert!(within(&roots, &rel("docs/api/x.md")));
        assert!(!within(&roots, &rel("srcx/a.rs")));
        assert!(!within(&roots, &rel("docs")));
        assert!(!within(&roots, &RelPath::root()));
        assert!(within(&None, &RelPath::root()));
    }

    #[test]
    fn a_shut_scope_refuses_at_once_and_reaches_nothing() {
        let refusal = GatewayError::Refused {
            reason: "no file access".into(),
            rule: "acp-session-cwd".into(),
            path: String::new(),
        };
        for scope in [
            Ceiling::shut(refusal.clone()).narrowable(),
            Ceiling::shut(refusal).fixed(),
        ] {
            scope.declare();
            let ticket = scope.expect();
            scope.set(ticket, Some(Arc::from(vec![rel("src")])));
            let err = scope.settled(Duration::from_secs(30)).expect_err("shut");
            assert_eq!(err.rule(), Some("acp-session-cwd"));
            assert!(!within(&scope.roots(), &rel("src/a.rs")));
            assert!(!within(&scope.roots(), &RelPath::root()));
        }
    }

    #[test]
    fn calls_wait_for_expected_roots() {
        let scope = Scope::narrowable();
        let ticket = scope.expect();
        let s2 = scope.clone();
        let setter = std::thread::spawn(move || s2.set(ticket, Some(Arc::from(vec![rel("a")]))));
        let roots = scope.settled(Duration::from_secs(30)).unwrap();
        setter.join().unwrap();
        assert_eq!(roots.unwrap().len(), 1);
        let old = scope.expect();
        let new = scope.expect();
        scope.set(old, None);
        assert!(
            scope.settled(Duration::ZERO).is_err(),
            "a stale answer settled it"
        );
        scope.set(new, Some(Arc::from(vec![rel("b"), rel("c")])));
        assert_eq!(
            scope.settled(Duration::ZERO).unwrap().map(|r| r.len()),
            Some(2)
        );
        assert!(Scope::default().settled(Duration::ZERO).unwrap().is_none());
        let undeclared = Scope::narrowable();
        undeclared.changing();
        assert!(
            undeclared.settled(Duration::ZERO).is_ok(),
            "nothing to wait for"
        );
        undeclared.declare();
        assert!(undeclared.settled(Duration::ZERO).is_err());
    }
}
