//! A session the agent opened through the editor, and one being opened; the refusal of
//! a session with no file access.

use crate::hosted::Admission;

/// A session the agent created through the editor.
#[derive(Debug, Clone)]
pub(super) struct Session {
    /// True if its `cwd` lies inside the workspace (else it gets no file access).
    pub(super) cwd_inside: bool,
    /// The `cwd` as given.
    pub(super) cwd: String,
    /// Several workspaces: the ones it may use (its `cwd`'s and its
    /// `additionalDirectories`'), as `<name>` roots; None: every workspace.
    pub(super) roots: fsgate_gateway::Roots,
}

/// A session request of the editor's in flight (`session/new`, `load`, `resume`,
/// `fork`).
pub(super) struct Opening {
    /// The `cwd` it asked for.
    pub(super) cwd: String,
    /// The session it names (load, resume: the session itself; fork: its source).
    pub(super) named: Option<String>,
    /// Its method.
    pub(super) method: &'static str,
    /// Its place at the hosted MCP server, if the server was added to it.
    pub(super) hosted: Option<Admission>,
    /// The workspaces it may use (see [`Session::roots`]).
    pub(super) roots: fsgate_gateway::Roots,
}

/// Rule id for a session request naming a directory fsgate does not serve.
pub(crate) const RULE_SESSION_DIRS: &str = "acp-session-dirs";

/// Rule id for a request of a session whose `cwd` lies outside every workspace: it has
/// no file access, by `fs/*` or through the MCP server hosted for it.
pub(super) const RULE_SESSION_CWD: &str = "acp-session-cwd";

/// The refusal of every file request of a session whose `cwd` lies outside every
/// workspace (`path`: the request's, if any).
pub(super) fn cwd_refusal(cwd: &str, path: &str) -> fsgate_base::error::GatewayError {
    fsgate_base::error::GatewayError::Refused {
        reason: format!(
            "the session's cwd {} lies outside the workspace; it has no file access",
            fsgate_gateway::clip(cwd)
        ),
        rule: RULE_SESSION_CWD.into(),
        path: path.into(),
    }
}
