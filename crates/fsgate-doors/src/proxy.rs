//! `fsgate acp`: host an ACP agent. Editor (our stdio) <-> agent (the child's stdio):
//! every message is relayed as the raw line it arrived as, except that fsgate answers
//! the agent's `fs/*` and `_fsgate/*` requests itself, from the workspace, under the
//! policy, and sets the `fs` capabilities of the editor's `initialize` to the policy's.
//! What comes from the agent is relayed only if [`relay::classify_agent_line`] finds it
//! exactly one unambiguous message naming no file or terminal method; anything an
//! editor could read as one is answered by fsgate or refused (and recorded).
//!
//! The editor's messages are relayed to the agent unchanged: the editor is the user's
//! side, and no agent line that could ask it for a file reaches it, so no file answer
//! can come back from it.
//!
//! Ids need no rewriting: requests in each direction are answered by the other side
//! (or by fsgate, for the agent's file requests, which never reach the editor), and a
//! message with a `method` is a request while one without is a response, so equal ids
//! travelling in opposite directions never meet.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::acp;
use super::acp_ask::{self, EditorAsker, EditorNotes};
use super::hosted::{Admission, Hosted, Reach};
use super::hosted_acp::{AcpConnections, Taken};
use super::jsonrpc::{self, Incoming};
use super::lines::{Line, read_line};
use super::relay::{self, Refusal, Relay as Verdict};
use super::view_ask::ViewQuestions;
use crate::outbox::{Outbox, Queued};
use fsgate_base::error::code;
use fsgate_base::path::RelPath;
use fsgate_decide::OpClass;
use fsgate_gateway::Gateway;
use fsgate_gateway::agent_sessions::AgentSessions;
use fsgate_gateway::{How, Request};

/// How long the agent gets to finish its turn once the editor closed stdin, and then to
/// exit once its own stdin is closed, before it is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// How long the agent's stdout is still read once the agent exited.
const DRAIN: Duration = Duration::from_secs(1);

/// A session the agent created through the editor.
#[derive(Debug, Clone)]
struct Session {
    /// True if its `cwd` lies inside the workspace (else it gets no file access).
    cwd_inside: bool,
    /// The `cwd` as given.
    cwd: String,
    /// Several workspaces: the ones it may use (its `cwd`'s and its
    /// `additionalDirectories`'), as `<name>` roots; None: every workspace.
    roots: fsgate_gateway::Roots,
}

/// A session request of the editor's in flight (`session/new`, `load`, `resume`,
/// `fork`).
struct Opening {
    /// The `cwd` it asked for.
    cwd: String,
    /// The session it names (load, resume: the session itself; fork: its source).
    named: Option<String>,
    /// Its method.
    method: &'static str,
    /// Its place at the hosted MCP server, if the server was added to it.
    hosted: Option<Admission>,
    /// The workspaces it may use (see [`Session::roots`]).
    roots: fsgate_gateway::Roots,
}

/// Where a message from the editor goes.
enum Routed {
    /// To the agent (these bytes, newline included).
    Agent(Vec<u8>),
    /// Back to the editor: fsgate answered it (a refused session request).
    Editor(Vec<u8>),
    /// Nowhere: an answer to one of fsgate's own questions.
    Taken,
}

/// State shared by the relay tasks.
struct Relay {
    gw: Arc<Gateway>,
    peer: String,
    /// Editor request ids (as JSON text) of session requests in flight.
    pending: Mutex<HashMap<String, Opening>>,
    /// Sessions seen created, by id.
    sessions: Mutex<HashMap<String, Session>>,
    /// Whether the policy lets the agent use `terminal/*`.
    allow_terminal: bool,
    /// Editor request ids (as JSON text) of `initialize` in flight: the agent's answer
    /// gets fsgate's own `_meta.fsgate`.
    initializing: Mutex<std::collections::HashSet<String>>,
    /// Puts `ask` rules' questions to the editor.
    asker: Arc<EditorAsker>,
    /// Shows the editor each change fsgate made (when the policy's `[notify] acp`).
    notes: Arc<EditorNotes>,
    /// The agent profile's `_meta`, merged into every session the editor opens.
    session_meta: Option<Value>,
    /// The MCP server hosted for the agent, added to each session it opens.
    hosted: Option<Arc<Hosted>>,
    /// The agent takes Streamable HTTP MCP servers (its `initialize` answer said so).
    agent_http: AtomicBool,
    /// The agent takes MCP servers over ACP itself (`mcpCapabilities.acp`, a draft).
    agent_acp: AtomicBool,
    /// The hosted server's MCP-over-ACP connections.
    mcp_over_acp: Option<Arc<AcpConnections>>,
    /// The ACP protocol version the agent's `initialize` answer chose (1 until then).
    acp_version: AtomicU64,
    /// What the agent still waits for or owes: see [`Owed`].
    owed: Owed,
    /// Under `--confine-agent`: where the questions of the agent's view go.
    view: Option<Arc<ViewQuestions>>,
    /// The sessions the view's records are made under (`--confine-agent`), told of each
    /// session opened and each prompt's turn.
    view_sessions: Option<Arc<AgentSessions>>,
}

/// What the relay is given besides its ends: whether the agent may use `terminal/*`,
/// the hosted MCP server, the profile's session `_meta`, and the view's sessions.
pub type RelayOptions = (
    bool,
    Option<Arc<Hosted>>,
    Option<Value>,
    Option<Arc<AgentSessions>>,
);

/// The editor's requests the agent has not answered yet, and the replies fsgate owes
/// the agent: once the editor closed its input, the agent's stdin stays open until both
/// are settled (or [`GRACE`] passed), so that the agent can finish the turn it was in,
/// with fsgate's answers to its file requests.
#[derive(Default)]
struct Owed {
    /// Ids (as JSON text) of editor requests relayed to the agent and not answered.
    by_agent: Mutex<std::collections::HashSet<String>>,
    /// Replies fsgate owes the agent (its file requests being served).
    by_fsgate: std::sync::atomic::AtomicUsize,
    /// Woken whenever either goes down.
    settled: tokio::sync::Notify,
}

/// At most this many unanswered editor requests are tracked for [`Owed`].
const MAX_OWED: usize = 4096;

impl Owed {
    fn relayed(&self, id: &Value) {
        if let Ok(mut ids) = self.by_agent.lock()
            && ids.len() < MAX_OWED
        {
            ids.insert(id_key(id));
        }
    }

    fn answered(&self, id: &Value) {
        let removed = self
            .by_agent
            .lock()
            .is_ok_and(|mut ids| ids.remove(&id_key(id)));
        if removed {
            self.settled.notify_waiters();
        }
    }

    /// fsgate took on a reply to the agent; [`Owed::replied`] once it is queued.
    fn owe(&self) {
        self.by_fsgate.fetch_add(1, Ordering::AcqRel);
    }

    fn replied(&self) {
        self.by_fsgate.fetch_sub(1, Ordering::AcqRel);
        self.settled.notify_waiters();
    }

    fn is_settled(&self) -> bool {
        self.by_fsgate.load(Ordering::Acquire) == 0
            && self.by_agent.lock().map_or(true, |ids| ids.is_empty())
    }

    /// Waits until nothing is owed either way, at most `limit`.
    async fn wait_settled(&self, limit: Duration) {
        let wait = async {
            loop {
                let woken = self.settled.notified();
                if self.is_settled() {
                    return;
                }
                woken.await;
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}

/// Rule id for a session request naming a directory fsgate does not serve.
pub(crate) const RULE_SESSION_DIRS: &str = "acp-session-dirs";

/// Rule id for a request of a session whose `cwd` lies outside every workspace: it has
/// no file access, by `fs/*` or through the MCP server hosted for it.
const RULE_SESSION_CWD: &str = "acp-session-cwd";

/// The refusal of every file request of a session whose `cwd` lies outside every
/// workspace (`path`: the request's, if any).
fn cwd_refusal(cwd: &str, path: &str) -> fsgate_base::error::GatewayError {
    fsgate_base::error::GatewayError::Refused {
        reason: format!(
            "the session's cwd {} lies outside the workspace; it has no file access",
            fsgate_gateway::clip(cwd)
        ),
        rule: RULE_SESSION_CWD.into(),
        path: path.into(),
    }
}

/// At most this many session requests awaiting the agent's answer are remembered.
const MAX_OPENING: usize = 256;

/// At most this many editor `initialize` requests awaiting the agent's answer are
/// remembered (an editor sends one; the bound keeps a flood from growing fsgate).
const MAX_INITIALIZING: usize = 16;

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// The session request `method` is, as a static name.
fn opening_method(method: &str) -> Option<&'static str> {
    match method {
        "session/new" => Some("session/new"),
        "session/load" => Some("session/load"),
        "session/resume" => Some("session/resume"),
        "session/fork" => Some("session/fork"),
        _ => None,
    }
}

/// Raw bytes plus a newline, ready to write.
fn line_of(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

fn with_newline(mut raw: Vec<u8>) -> Vec<u8> {
    raw.push(b'\n');
    raw
}

impl Relay {
    /// Editor -> agent: returns the bytes to forward, or None for the editor's answer
    /// to one of fsgate's own questions (taken here, never relayed).
    fn editor_message(&self, raw: Vec<u8>) -> Routed {
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
                match text.and_then(|t| super::raw_json::set_fs_capabilities(t, read, write)) {
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
    fn opening(
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
                    .and_then(|t| super::raw_json::append_mcp_server(t, &a.entry))
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

    /// Who the hosted server asks and tells: the editor, as for `fs/*`.
    fn editor_sinks(
        &self,
    ) -> (
        Arc<dyn fsgate_gateway::ask::Asker>,
        Option<Arc<dyn fsgate_gateway::ChangeSink>>,
    ) {
        let notes = self
            .gw
            .policy()
            .notify_acp()
            .then(|| Arc::clone(&self.notes) as Arc<dyn fsgate_gateway::ChangeSink>);
        (
            Arc::clone(&self.asker) as Arc<dyn fsgate_gateway::ask::Asker>,
            notes,
        )
    }

    /// A session request (one line, its newline included) with the agent profile's
    /// `_meta` merged in, naming `server` (the hosted server's name in this session);
    /// byte for byte when there is no profile or its params are not an object.
    fn with_profile(&self, raw: Vec<u8>, server: Option<&str>) -> Vec<u8> {
        use fsgate_sandbox::profile::{HOSTED_SERVER, merge_session_meta, meta_for_server};
        let Some(meta) = &self.session_meta else {
            return raw;
        };
        let Ok(mut message) = serde_json::from_slice::<Value>(&raw) else {
            return raw;
        };
        let meta = match server {
            Some(name) if name != HOSTED_SERVER => meta_for_server(meta, name),
            _ => meta.clone(),
        };
        if merge_session_meta(&mut message["params"], &meta) {
            line_of(&message)
        } else {
            raw
        }
    }

    /// The agent's answer to the editor's `initialize`, with fsgate's `_meta.fsgate`
    /// (policy, sandbox, where the audit log and backups are) put in its result, in
    /// place of anything the agent wrote there: the editor learns it from fsgate, never
    /// from the agent. Other answers pass byte for byte.
    fn stamp_initialize(&self, id: &Value, mut message: Value, raw: Vec<u8>) -> Vec<u8> {
        let ours = self
            .initializing
            .lock()
            .is_ok_and(|mut ids| ids.remove(&id_key(id)));
        let Some(result) = message.get_mut("result").filter(|_| ours) else {
            return with_newline(raw);
        };
        let mcp = &result["agentCapabilities"]["mcpCapabilities"];
        let (http, over_acp) = (
            mcp["http"] == Value::Bool(true),
            mcp["acp"] == Value::Bool(true),
        );
        self.agent_http.store(http, Ordering::Release);
        self.agent_acp.store(over_acp, Ordering::Release);
        let version = result["protocolVersion"].as_u64().unwrap_or(1);
        self.acp_version.store(version, Ordering::Release);
        let Some(result) = result.as_object_mut() else {
            return with_newline(raw);
        };
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(serde_json::Map::new());
        }
        meta["fsgate"] = self.gw.meta();
        meta["fsgate"]["acpProtocolVersion"] = version.into();
        if let Some(h) = &self.hosted {
            meta["fsgate"]["mcpServer"] =
                json!({"name": super::hosted::SERVER_NAME, "url": h.url()});
        }
        line_of(&message)
    }

    /// Notes a session opened by the agent's answer to a session request.
    fn note_response(&self, id: &Value, message: &Value) {
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
    fn note_session(
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
    fn prompted(&self, params: &Value) {
        let Some((view, sid)) = self.view.as_ref().zip(params["sessionId"].as_str()) else {
            return;
        };
        if self.sessions.lock().is_ok_and(|s| s.contains_key(sid)) {
            view.in_session(sid);
        }
    }

    /// Whether a session's `cwd` lies in a workspace (else it has no file access).
    fn cwd_inside(&self, cwd: &str) -> bool {
        cwd.starts_with('/') && self.gw.members().named_path(cwd).is_some()
    }

    /// The workspaces the session may use, as the gateway's scope.
    fn session_scope(&self, sid: Option<&str>) -> fsgate_gateway::Scope {
        let roots = sid.and_then(|sid| {
            let sessions = self.sessions.lock().ok()?;
            sessions.get(sid)?.roots.clone()
        });
        fsgate_gateway::Scope::fixed(roots)
    }

    /// The workspaces a session request's `cwd` and `additionalDirectories` name, when
    /// several are served (None with one: the session has it whole). Err: one of
    /// `additionalDirectories` lies in no workspace served; it is never added.
    fn session_roots(&self, params: &Value) -> Result<fsgate_gateway::Roots, String> {
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

    fn ctx(&self, params: &Value) -> fsgate_gateway::ops::RequestCtx {
        let session = acp::session_of(params).unwrap_or_default();
        fsgate_gateway::ops::RequestCtx {
            style: fsgate_gateway::ops::PathStyle::Absolute,
            scope: self.session_scope(Some(&session)),
            session,
            door: &acp::DOOR,
            peer: self.peer.clone(),
            asker: None,
            notifier: None,
        }
    }

    /// The context of one of the agent's file requests: an ask rule asks the editor,
    /// and changes are shown to it unless the policy says not to.
    fn file_ctx(&self, params: &Value) -> fsgate_gateway::ops::RequestCtx {
        let mut ctx = self.ctx(params);
        ctx.asker = Some(Arc::clone(&self.asker) as Arc<dyn fsgate_gateway::ask::Asker>);
        if self.gw.policy().notify_acp() {
            ctx.notifier = Some(Arc::clone(&self.notes) as Arc<dyn fsgate_gateway::ChangeSink>);
        }
        ctx
    }

    /// Records a refusal fsgate makes itself (session, terminal) and builds the reply.
    fn refuse(&self, id: &Value, method: &str, params: &Value, err: Value) -> Value {
        let refusal = acp::message(id.clone(), method, Err(err));
        crate::door::serve(&acp::Acp, &self.gw, &self.ctx(params), None, refusal).answer
    }

    /// Records a line the relay refuses (one record) and builds the replies to the
    /// requests in it.
    fn refuse_line(&self, refusal: &Refusal) -> Vec<Value> {
        let outcome = Err((
            refusal.error["code"]
                .as_i64()
                .unwrap_or(code::INVALID_REQUEST),
            refusal.error["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ));
        let request = Request::message(refusal.name.as_str(), outcome);
        let error = match self
            .gw
            .serve(&self.ctx(&refusal.params), request, How::alone())
            .0
        {
            Ok(_) => refusal.error.clone(),
            Err(e) => e.to_rpc_error(),
        };
        refusal
            .ids
            .iter()
            .map(|id| jsonrpc::error_response(id, error.clone()))
            .collect()
    }

    /// The refusal for a file request whose session is not usable, if any.
    fn session_refusal(&self, params: &Value) -> Option<Value> {
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

/// How the hosted agent ended.
#[derive(Debug, Clone, Copy)]
pub struct AgentEnd {
    /// Its exit status.
    pub status: ExitStatus,
    /// Whether fsgate killed it: the editor had closed its input and the agent had not
    /// exited [`GRACE`] later.
    pub killed_after_eof: bool,
}

/// Relays between the editor (`editor_in`/`editor_out`) and the agent (`agent_in` is
/// the child's stdin, `agent_out` its stdout) until the agent exits. Returns how.
///
/// The child was spawned before the gateway confined itself (so the agent is not bound
/// by the gateway's own Landlock ruleset); its pipes are adopted by the runtime here.
pub async fn run<EI, EO>(
    gw: Arc<Gateway>,
    peer: String,
    editor_in: EI,
    editor_out: EO,
    mut child: std::process::Child,
    (allow_terminal, hosted, session_meta, view_sessions): RelayOptions,
    view: Option<Arc<ViewQuestions>>,
) -> std::io::Result<AgentEnd>
where
    EI: AsyncRead + Unpin + Send + 'static,
    EO: AsyncWrite + Unpin + Send + 'static,
{
    let (agent_in, agent_out) = agent_pipes(&mut child)?;
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || child.wait());
    let max = usize::try_from(gw.policy().limits().max_message_bytes).unwrap_or(usize::MAX);
    // Each direction holds at most twice the message limit of unwritten bytes: a side
    // that stops reading stalls the other's relay instead of growing the gateway.
    let (to_editor, editor_rx) = Outbox::<Vec<u8>>::new(max.saturating_mul(2));
    let (to_agent, agent_rx) = Outbox::<Vec<u8>>::new(max.saturating_mul(2));
    let relay = Relay::new(
        (gw, peer),
        (allow_terminal, hosted, session_meta, view_sessions),
        (&to_agent, &to_editor),
        max,
        view,
    );
    let (close_agent_tx, close_agent_rx) = tokio::sync::oneshot::channel::<()>();
    // Closed once the agent and its relay are done: the hosted server's sessions may
    // hold the editor's outbox a while longer (they end on their own).
    let (close_editor_tx, close_editor_rx) = tokio::sync::oneshot::channel::<()>();
    let editor_writer = tokio::spawn(write_raw(editor_rx, editor_out, Some(close_editor_rx)));
    let agent_writer = tokio::spawn(write_raw(agent_rx, agent_in, Some(close_agent_rx)));

    // Editor -> agent.
    let outs = (to_agent.clone(), to_editor.clone());
    let mut editor_reader = tokio::spawn(relay_editor(
        Arc::clone(&relay),
        editor_in,
        outs,
        (max, close_agent_tx),
    ));

    // Agent -> editor (or fsgate).
    let outs = (to_agent.clone(), to_editor.clone());
    let agent_reader = tokio::spawn(relay_agent(Arc::clone(&relay), agent_out, outs, max));

    let (status, killed_after_eof) = wait_agent(waiter, &mut editor_reader, pid).await?;
    // The agent is gone: stop reading the editor, which may keep its end open (its
    // input has nowhere to go), so that the writers below see their channels close.
    editor_reader.abort();
    drain_agent(agent_reader).await;
    // Nobody is asked once the relay ends (a process left in the agent's view may ask
    // while the runtime is being shut down).
    relay.asker.close();
    if let Some(h) = &relay.hosted {
        h.close();
    }
    if let Some(a) = &relay.mcp_over_acp {
        a.close();
    }
    drop(relay);
    let _ = agent_writer.await;
    let _ = close_editor_tx.send(());
    let _ = editor_writer.await;
    Ok(AgentEnd {
        status,
        killed_after_eof,
    })
}

/// The agent's stdin and stdout, enlarged (large answers, a whole file read, pass in
/// fewer pipe-fulls) and made async.
fn agent_pipes(
    child: &mut std::process::Child,
) -> std::io::Result<(tokio::process::ChildStdin, tokio::process::ChildStdout)> {
    let agent_in = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("agent stdin not piped"))?;
    let agent_out = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("agent stdout not piped"))?;
    crate::stdio::enlarge_pipe(agent_in.as_fd());
    crate::stdio::enlarge_pipe(agent_out.as_fd());
    let agent_in = tokio::process::ChildStdin::from_std(agent_in)?;
    let agent_out = tokio::process::ChildStdout::from_std(agent_out)?;
    Ok((agent_in, agent_out))
}

/// Waits for the agent to exit; if the editor left first, gives it a grace period,
/// then kills it. Its status, and whether it was killed.
async fn wait_agent(
    mut waiter: tokio::task::JoinHandle<std::io::Result<std::process::ExitStatus>>,
    editor_reader: &mut tokio::task::JoinHandle<()>,
    pid: u32,
) -> std::io::Result<(std::process::ExitStatus, bool)> {
    Ok(tokio::select! {
        s = &mut waiter => (s.map_err(std::io::Error::other)??, false),
        _ = wait_editor_then_grace(editor_reader) => {
            tracing::info!("editor closed stdin; agent did not exit within {GRACE:?}; killing it");
            kill(pid);
            (waiter.await.map_err(std::io::Error::other)??, true)
        }
    })
}

impl Relay {
    /// The relay between `peer` (the editor) and the agent, writing to the agent and
    /// the editor through their outboxes; MCP over ACP when a server is hosted.
    fn new(
        (gw, peer): (Arc<Gateway>, String),
        (allow_terminal, hosted, session_meta, view_sessions): RelayOptions,
        (to_agent, to_editor): (&Outbox<Vec<u8>>, &Outbox<Vec<u8>>),
        max: usize,
        view: Option<Arc<ViewQuestions>>,
    ) -> Arc<Relay> {
        let mcp_over_acp = hosted.as_ref().map(|h| {
            AcpConnections::new(
                Arc::clone(&gw),
                Arc::clone(h),
                peer.clone(),
                to_agent.clone(),
            )
        });
        let asker = Arc::new(EditorAsker::new(
            to_editor.clone(),
            tokio::runtime::Handle::current(),
        ));
        if let Some(v) = &view {
            v.connect(&asker);
        }
        Arc::new(Relay {
            gw,
            peer,
            pending: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            allow_terminal,
            initializing: Mutex::new(std::collections::HashSet::new()),
            asker,
            notes: Arc::new(EditorNotes::spawn(to_editor.clone(), max.saturating_mul(2))),
            hosted,
            agent_http: AtomicBool::new(false),
            agent_acp: AtomicBool::new(false),
            mcp_over_acp,
            acp_version: AtomicU64::new(1),
            session_meta,
            view_sessions,
            owed: Owed::default(),
            view,
        })
    }
}

/// Editor -> agent: each line the editor writes, until it closes fsgate's stdin; then
/// the agent's stdin is closed once it has what it waits for (at most [`GRACE`] later).
async fn relay_editor<EI: AsyncRead + Unpin>(
    r: Arc<Relay>,
    editor_in: EI,
    (to_agent, to_editor): (Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    (max, close_agent): (usize, tokio::sync::oneshot::Sender<()>),
) {
    let mut reader = BufReader::new(editor_in);
    loop {
        match read_line(&mut reader, max).await {
            Ok(Line::Message(raw)) => {
                if raw.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match r.editor_message(raw) {
                    Routed::Agent(bytes) => {
                        if !to_agent.send_bytes(bytes).await {
                            break;
                        }
                    }
                    // A session request fsgate refuses itself (a directory it does not serve).
                    Routed::Editor(bytes) => {
                        let _ = to_editor.send_bytes(bytes).await;
                    }
                    Routed::Taken => {}
                }
            }
            Ok(Line::TooLong { len }) => {
                let msg = format!("message of {len} bytes exceeds the limit of {max} bytes");
                let err = jsonrpc::error_object(code::INVALID_REQUEST, &msg, None);
                let reply = line_of(&jsonrpc::error_response(&Value::Null, err));
                let _ = to_editor.send_bytes(reply).await;
            }
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    // The editor is gone: nobody can answer a question, and the agent's stdin is closed
    // so it can end gracefully, once it has what it waits for.
    r.asker.close();
    r.owed.wait_settled(GRACE).await;
    let _ = close_agent.send(());
    // Its sessions of the hosted server end with it: an open stream there (Gemini CLI's
    // MCP client keeps one) would keep an agent alive that otherwise ends on EOF.
    if let Some(h) = &r.hosted {
        h.close();
    }
}

/// Agent -> editor (or fsgate): each line the agent writes, until it closes its stdout;
/// then waits for the file requests being served.
async fn relay_agent(
    r: Arc<Relay>,
    agent_out: tokio::process::ChildStdout,
    outs: (Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    max: usize,
) {
    let mut reader = BufReader::new(agent_out);
    let mut handlers = tokio::task::JoinSet::new();
    // At most this many of the agent's file requests are served at once; reading the
    // agent pauses while all slots are taken.
    let slots = Arc::new(tokio::sync::Semaphore::new(acp::MAX_IN_FLIGHT));
    loop {
        let raw = match read_line(&mut reader, max).await {
            Ok(Line::Message(raw)) => raw,
            Ok(Line::TooLong { len }) => {
                tracing::warn!("agent sent a message of {len} bytes, over the limit; dropped");
                continue;
            }
            Ok(Line::Eof) | Err(_) => break,
        };
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !agent_line(&r, raw, &outs, (&slots, &mut handlers)).await {
            break;
        }
    }
    while handlers.join_next().await.is_some() {}
}

/// One line of the agent's: served, relayed or refused. False: stop reading.
async fn agent_line(
    r: &Arc<Relay>,
    raw: Vec<u8>,
    (to_agent, to_editor): &(Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    (slots, handlers): (&Arc<tokio::sync::Semaphore>, &mut tokio::task::JoinSet<()>),
) -> bool {
    match relay::classify_agent_line(&raw) {
        Verdict::Serve { id, method, params } => {
            let Ok(permit) = Arc::clone(slots).acquire_owned().await else {
                return false;
            };
            r.owed.owe();
            let to_agent = to_agent.clone();
            handlers.spawn(serve_file(
                Arc::clone(r),
                to_agent,
                permit,
                id,
                method,
                params,
            ));
        }
        Verdict::Terminal { id, method, params } => {
            r.owed.owe();
            let (allowed, reply) = terminal(r, id, method, params).await;
            if let Some(reply) = reply {
                let _ = to_agent.send_bytes(line_of(&reply)).await;
            }
            r.owed.replied();
            if allowed {
                let _ = to_editor.send_bytes(with_newline(raw)).await;
            }
        }
        Verdict::Forward(Incoming::Response { id, message }) => {
            if let Some(a) = &r.mcp_over_acp
                && a.response(&id, &message).await
            {
                return true;
            }
            r.owed.answered(&id);
            r.note_response(&id, &message);
            let bytes = r.stamp_initialize(&id, message, raw);
            let _ = to_editor.send_bytes(bytes).await;
        }
        Verdict::Forward(msg) => match take_mcp_message(r, &msg).await {
            Some(reply) => {
                if let Some(reply) = reply {
                    let _ = to_agent.send_bytes(line_of(&reply)).await;
                }
            }
            None => {
                let _ = to_editor.send_bytes(with_newline(raw)).await;
            }
        },
        Verdict::Refuse(refusal) => {
            // Lenient editors would serve what this line may be read as.
            tracing::warn!(name = ?refusal.name, "agent sent a line that is not exactly one unambiguous message; not relayed");
            r.owed.owe();
            let r2 = Arc::clone(r);
            let replies = tokio::task::spawn_blocking(move || r2.refuse_line(&refusal))
                .await
                .unwrap_or_default();
            for reply in replies {
                let _ = to_agent.send_bytes(line_of(&reply)).await;
            }
            r.owed.replied();
        }
    }
    true
}

/// An `mcp/*` message of the agent's for the hosted server (MCP-over-ACP): Some(the
/// reply to send it, if any) when fsgate took it, None to relay it.
async fn take_mcp_message(r: &Arc<Relay>, msg: &Incoming) -> Option<Option<Value>> {
    let a = r.mcp_over_acp.as_ref()?;
    let (id, method, params) = match msg {
        Incoming::Request { id, method, params } => (Some(id), method, params),
        Incoming::Notification { method, params } => (None, method, params),
        _ => return None,
    };
    if !method.starts_with("mcp/") {
        return None;
    }
    match a.request(id, method, params).await {
        Taken::Relay => None,
        Taken::Reply(reply) => Some(reply),
    }
}

/// Answers one of the agent's file requests (fsgate serves it; the editor never sees it).
async fn serve_file(
    r: Arc<Relay>,
    to_agent: Outbox<Vec<u8>>,
    permit: tokio::sync::OwnedSemaphorePermit,
    id: Value,
    method: String,
    params: Value,
) {
    // Kept for the error reply: a null id would leave the agent's request pending forever.
    let id2 = id.clone();
    let r2 = Arc::clone(&r);
    let (resp, lease) = tokio::task::spawn_blocking(move || match r.session_refusal(&params) {
        Some(err) => (r.refuse(&id, &method, &params, err), Vec::new()),
        None if method.starts_with("fs/") && r.acp_version.load(Ordering::Acquire) >= 2 => {
            let msg = format!(
                "{method} is not part of ACP protocol version 2: use the MCP server `{}` listed in the session",
                super::hosted::SERVER_NAME
            );
            let err = jsonrpc::error_object(code::METHOD_NOT_FOUND, &msg, None);
            (r.refuse(&id, &method, &params, err), Vec::new())
        }
        None => {
            let ctx = r.file_ctx(&params);
            acp::answer_in(&r.gw, &ctx, acp::AcpRequest { id, method, params })
        }
    })
    .await
    .unwrap_or_else(|_| {
        let err =
            jsonrpc::error_object(code::INTERNAL, "internal error: request task failed", None);
        (jsonrpc::error_response(&id2, err), Vec::new())
    });
    let _ = to_agent.send_bytes(line_of(&resp)).await;
    r2.owed.replied();
    drop(lease);
    drop(permit);
}

/// A `terminal/*` request or notification: audited either way; relayed only if the
/// policy allows terminals. Returns whether to relay it, and the reply to the agent.
async fn terminal(
    r: &Arc<Relay>,
    id: Option<Value>,
    method: String,
    params: Value,
) -> (bool, Option<Value>) {
    let r2 = Arc::clone(r);
    tokio::task::spawn_blocking(move || {
        if r2.allow_terminal {
            let served = r2
                .gw
                .serve(
                    &r2.ctx(&params),
                    Request::message(method.as_str(), Ok(())),
                    How::alone(),
                )
                .0;
            match (served, id) {
                (Ok(_), _) => (true, None),
                (Err(e), Some(id)) => (false, Some(jsonrpc::error_response(&id, e.to_rpc_error()))),
                (Err(_), None) => (false, None),
            }
        } else {
            let reason = "terminal access is not allowed by the policy ([acp] allow_terminal)";
            let err = jsonrpc::error_object(
                code::REFUSED,
                &format!("refused: {reason} (rule acp.allow_terminal)"),
                Some(json!({"reason": reason, "rule": "acp.allow_terminal", "path": Value::Null})),
            );
            let reply = r2.refuse(&id.clone().unwrap_or(Value::Null), &method, &params, err);
            (false, id.map(|_| reply))
        }
    })
    .await
    .unwrap_or((false, None))
}

/// Relays what the agent wrote before it exited; a process it left behind may hold its
/// stdout open (ended with the agent's tree afterwards), so at most [`DRAIN`].
async fn drain_agent(mut agent_reader: tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(DRAIN, &mut agent_reader)
        .await
        .is_err()
    {
        tracing::info!(
            "the agent exited; its stdout is still open after {DRAIN:?}: not read further"
        );
        agent_reader.abort();
    }
}

async fn wait_editor_then_grace(editor_reader: &mut tokio::task::JoinHandle<()>) {
    let _ = editor_reader.await;
    tokio::time::sleep(GRACE).await;
}

/// Writes raw lines; with `close`, stops (dropping, so closing, the writer) when told.
async fn write_raw<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<Queued<Vec<u8>>>,
    mut out: W,
    close: Option<tokio::sync::oneshot::Receiver<()>>,
) -> std::io::Result<()> {
    let mut close = close;
    loop {
        let next = match close.as_mut() {
            Some(c) => tokio::select! {
                m = rx.recv() => m,
                _ = c => {
                    // Flush what is queued, then close.
                    while let Ok(m) = rx.try_recv() {
                        out.write_all(&m.msg).await?;
                    }
                    out.flush().await?;
                    let _ = out.shutdown().await;
                    return Ok(());
                }
            },
            None => rx.recv().await,
        };
        let Some(m) = next else { break };
        out.write_all(&m.msg).await?;
        out.flush().await?;
    }
    let _ = out.shutdown().await;
    Ok(())
}

fn kill(pid: u32) {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // EPERM here means a Landlock signal scope on fsgate covers its own agent.
    if let Err(e) = rustix::process::kill_process(pid, rustix::process::Signal::KILL) {
        tracing::error!("cannot kill the agent (pid {}): {e}", pid.as_raw_nonzero());
    }
}
