//! Editor -> agent: each message routed, `initialize`'s `fs` capabilities set to the
//! policy's, and session requests noted and given the hosted MCP server.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::line::{id_key, line_of, with_newline};
use super::session::{Opening, RULE_SESSION_DIRS, cwd_refusal};
use super::state::{MAX_INITIALIZING, MAX_OPENING, Relay};
use crate::acp_ask;
use crate::hosted::Reach;
use crate::jsonrpc;
use fsgate_base::error::code;
use fsgate_decide::OpClass;

/// Where a message from the editor goes.
pub(super) enum Routed {
    /// To the agent (these bytes, newline included).
    Agent(Vec<u8>),
    /// Back to the editor: fsgate answered it (a refused session request).
    Editor(Vec<u8>),
    /// Nowhere: an answer to one of fsgate's own questions.
    Taken,
}

/// The session request `method` is, as a static name.
pub(super) fn opening_method(method: &str) -> Option<&'static str> {
    match method {
        "session/new" => Some("session/new"),
        "session/load" => Some("session/load"),
        "session/resume" => Some("session/resume"),
        "session/fork" => Some("session/fork"),
        _ => None,
    }
}

impl Relay {
    /// Editor -> agent: returns the bytes to forward, or None for the editor's answer
    /// to one of fsgate's own questions (taken here, never relayed).
    pub(super) fn editor_message(&self, raw: Vec<u8>) -> Routed {
        let Ok(mut v) = serde_json::from_slice::<Value>(&raw) else {
            return Routed::Agent(with_newline(raw));
        };
        if let Some(id) = acp_ask::answer_id(&v) {
            self.asker.take_response(id, &v);
            return Routed::Taken;
        }
        let method = v.get("method").and_then(Value::as_str).map(str::to_string);
        let id = v.get("id").cloned();
        if let (Some(_), Some(id)) = (&method, &id) {
            self.owed.relayed(id);
        }
        if method.as_deref() == Some("session/prompt") {
            self.prompted(&v["params"]);
        }
        if let (Some("session/prompt"), Some(id), Some(v_s)) =
            (method.as_deref(), &id, &self.view_sessions)
            && let Some(sid) = v["params"]["sessionId"].as_str()
        {
            v_s.prompted(&self.gw, id_key(id), sid);
        }
        Routed::Agent(match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => {
                if let Ok(mut ids) = self.initializing.lock()
                    && ids.len() < MAX_INITIALIZING
                {
                    ids.insert(id_key(&id));
                }
                // ACP v2 has no fs/* and no fs capability: the hosted MCP server is the
                // door, and the message passes as it is.
                if v["params"]["protocolVersion"]
                    .as_u64()
                    .is_some_and(|n| n >= 2)
                {
                    return Routed::Agent(with_newline(raw));
                }
                let (read, write) = (
                    self.gw.members().can_ever(OpClass::Read),
                    self.gw.members().can_ever(OpClass::Write),
                );
                // Only the two flags change; the rest of the message passes byte for byte.
                let text = std::str::from_utf8(&raw).ok();
                match text.and_then(|t| crate::raw_json::set_fs_capabilities(t, read, write)) {
                    Some(s) => with_newline(s.into_bytes()),
                    None => {
                        let params = &mut v["params"];
                        if !params.is_object() {
                            *params = json!({});
                        }
                        params["clientCapabilities"] =
                            json!({"fs": {"readTextFile": read, "writeTextFile": write}});
                        line_of(&v)
                    }
                }
            }
            (Some(m), Some(id)) if opening_method(m).is_some() => {
                let method = opening_method(m).unwrap_or("session/new");
                let roots = match self.session_roots(&v["params"]) {
                    Ok(roots) => roots,
                    Err(reason) => {
                        let err = jsonrpc::error_object(
                            code::REFUSED,
                            &format!("refused: {reason} (rule {RULE_SESSION_DIRS})"),
                            Some(json!({"reason": reason, "rule": RULE_SESSION_DIRS})),
                        );
                        let reply = self.refuse(&id, method, &v["params"], err);
                        return Routed::Editor(line_of(&reply));
                    }
                };
                self.opening(method, &id, &v, raw, roots)
            }
            _ => with_newline(raw),
        })
    }

    /// A session request: noted, and the hosted MCP server added to its `mcpServers`
    /// (the rest of the message passes byte for byte).
    pub(super) fn opening(
        &self,
        method: &'static str,
        id: &Value,
        v: &Value,
        raw: Vec<u8>,
        roots: fsgate_gateway::Roots,
    ) -> Vec<u8> {
        let params = &v["params"];
        let named = params["sessionId"].as_str().map(str::to_string);
        let mut opening = Opening {
            cwd: params["cwd"].as_str().unwrap_or_default().to_string(),
            named: named.clone(),
            method,
            hosted: None,
            roots: roots.clone(),
        };
        let mut out = raw;
        if let Some(h) = &self.hosted {
            let known = matches!(method, "session/load" | "session/resume")
                .then_some(named)
                .flatten();
            let taken: Vec<String> = params["mcpServers"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|e| e["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let wanted = if self.agent_acp.load(Ordering::Acquire) {
                Reach::Acp
            } else if self.agent_http.load(Ordering::Acquire) {
                Reach::Http
            } else {
                Reach::Stdio
            };
            // A session with no file access gets none through the hosted server either.
            let within = match self.cwd_inside(&opening.cwd) {
                true => fsgate_gateway::Ceiling::roots(roots),
                false => fsgate_gateway::Ceiling::shut(cwd_refusal(&opening.cwd, "")),
            };
            match h.admit(
                known.as_deref(),
                wanted,
                self.editor_sinks(),
                &taken,
                within,
            ) {
                Ok(a) => match std::str::from_utf8(&out)
                    .ok()
                    .and_then(|t| crate::raw_json::append_mcp_server(t, &a.entry))
                {
                    Some(text) => {
                        out = text.into_bytes();
                        opening.hosted = Some(a);
                    }
                    None => h.revoke(&a),
                },
                Err(e) => tracing::warn!("the hosted MCP server is not added to this session: {e}"),
            }
        }
        let server = opening
            .hosted
            .as_ref()
            .and_then(|a| a.entry["name"].as_str().map(str::to_owned));
        if let Ok(mut p) = self.pending.lock() {
            if p.len() < MAX_OPENING {
                p.insert(id_key(id), opening);
            } else if let (Some(h), Some(a)) = (&self.hosted, &opening.hosted) {
                h.revoke(a);
            }
        }
        self.with_profile(with_newline(out), server.as_deref())
    }
}
