//! The sessions the agent opens: noted from its answers to session requests, recorded,
//! and each one's workspaces and file access.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::line::id_key;
use super::session::{Opening, Session, cwd_refusal};
use super::state::Relay;
use crate::acp;
use crate::hosted::Admission;
use crate::jsonrpc;
use fsgate_base::error::code;
use fsgate_base::path::RelPath;

impl Relay {
    /// Notes a session opened by the agent's answer to a session request.
    pub(super) fn note_response(&self, id: &Value, message: &Value) {
        if let Some(v) = &self.view_sessions {
            v.answered(&self.gw, &id_key(id));
        }
        let Some(opening) = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(&id_key(id)))
        else {
            return;
        };
        let Opening {
            cwd,
            named,
            method,
            hosted,
            roots,
        } = opening;
        // Load and resume keep the session named; new and fork answer with its id.
        let keeps = matches!(method, "session/load" | "session/resume");
        let sid = message["result"]["sessionId"]
            .as_str()
            .map(str::to_string)
            .or(named.filter(|_| keeps));
        let sid = sid.filter(|_| message.get("error").is_none());
        let (Some(sid), Some(h)) = (sid.as_ref(), &self.hosted) else {
            if let (Some(h), Some(a)) = (&self.hosted, &hosted) {
                h.revoke(a);
            }
            if let Some(sid) = sid {
                self.note_session(sid, cwd, None, roots);
            }
            return;
        };
        if let Some(a) = &hosted {
            h.name(a, sid);
        }
        self.note_session(sid.clone(), cwd, hosted, roots);
    }

    /// Records the session opened and keeps it for the agent's file requests.
    pub(super) fn note_session(
        &self,
        sid: String,
        cwd: String,
        hosted: Option<Admission>,
        roots: fsgate_gateway::Roots,
    ) {
        let cwd_inside = self.cwd_inside(&cwd);
        if !cwd_inside {
            tracing::warn!(session = %sid, %cwd, "session cwd is outside the workspace: no file access");
        }
        let mut details = serde_json::Map::new();
        details.insert("sessionId".into(), sid.clone().into());
        details.insert("cwd".into(), cwd.clone().into());
        details.insert("cwdInsideWorkspace".into(), cwd_inside.into());
        let version = self.acp_version.load(Ordering::Acquire);
        details.insert("acpProtocolVersion".into(), version.into());
        if let Some(a) = &hosted {
            let mut mcp = serde_json::Map::new();
            mcp.insert("name".into(), a.entry["name"].clone());
            mcp.insert("transport".into(), a.reach.as_str().into());
            if a.name != sid {
                // Records made before the agent named the session carry this name.
                mcp.insert("provisionalSession".into(), a.name.clone().into());
            }
            details.insert("mcpServer".into(), Value::Object(mcp));
        }
        if let Some(r) = &roots {
            let names: Vec<Value> = r.iter().map(|p| p.as_str().into()).collect();
            details.insert("workspaces".into(), names.into());
        }
        self.gw.record("session", details);
        if let Some(view) = &self.view {
            view.in_session(&sid);
        }
        if let Some(v) = &self.view_sessions {
            v.opened(&self.gw, &sid);
        }
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(
                sid,
                Session {
                    cwd_inside,
                    cwd,
                    roots,
                },
            );
        }
    }

    /// A prompt in a known session: the view's questions are asked there from now on.
    pub(super) fn prompted(&self, params: &Value) {
        let Some((view, sid)) = self.view.as_ref().zip(params["sessionId"].as_str()) else {
            return;
        };
        if self.sessions.lock().is_ok_and(|s| s.contains_key(sid)) {
            view.in_session(sid);
        }
    }

    /// Whether a session's `cwd` lies in a workspace (else it has no file access).
    pub(super) fn cwd_inside(&self, cwd: &str) -> bool {
        cwd.starts_with('/') && self.gw.members().named_path(cwd).is_some()
    }

    /// The workspaces a session request's `cwd` and `additionalDirectories` name, when
    /// several are served (None with one: the session has it whole). Err: one of
    /// `additionalDirectories` lies in no workspace served; it is never added.
    pub(super) fn session_roots(&self, params: &Value) -> Result<fsgate_gateway::Roots, String> {
        let mut names: Vec<RelPath> = Vec::new();
        let extra = params["additionalDirectories"].as_array();
        for dir in extra.into_iter().flatten() {
            let text = dir.as_str().unwrap_or_default();
            let place = text
                .starts_with('/')
                .then(|| self.gw.members().named_path(text))
                .flatten();
            let Some(place) = place else {
                return Err(format!(
                    "additionalDirectories: {} is not a directory fsgate serves (it serves {}); it is not added",
                    fsgate_gateway::clip(&dir.to_string()),
                    self.gw
                        .members()
                        .root_paths()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            names.extend(place.outermost());
        }
        if !self.gw.is_several() {
            return Ok(None);
        }
        let cwd = params["cwd"].as_str().unwrap_or_default();
        if cwd.starts_with('/')
            && let Some(place) = self.gw.members().named_path(cwd)
        {
            names.extend(place.outermost());
        }
        names.sort();
        names.dedup();
        Ok(Some(names.into()))
    }

    /// The refusal for a file request whose session is not usable, if any.
    pub(super) fn session_refusal(&self, params: &Value) -> Option<Value> {
        let sid = acp::session_of(params);
        let sessions = self.sessions.lock().ok()?;
        let (reason, rule) = match sid.as_deref().map(|s| sessions.get(s)) {
            None => (
                "file requests must name a sessionId".to_string(),
                "acp-session",
            ),
            Some(None) => (
                format!(
                    "unknown sessionId {:?}: no session/new or session/load created it",
                    sid.unwrap_or_default()
                ),
                "acp-session",
            ),
            Some(Some(s)) if !s.cwd_inside => {
                let path = params["path"].as_str().unwrap_or_default();
                return Some(cwd_refusal(&s.cwd, path).to_rpc_error());
            }
            Some(Some(_)) => return None,
        };
        Some(jsonrpc::error_object(
            code::REFUSED,
            &format!("refused: {reason} (rule {rule})"),
            Some(
                json!({"reason": reason, "rule": rule, "path": params.get("path").cloned().unwrap_or(Value::Null)}),
            ),
        ))
    }
}
