//! The relay's state, shared by its tasks: the gateway, the sessions, what the editor
//! is asked and shown; and the request context and refusals every part builds from it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::owed::Owed;
use super::session::{Opening, Session};
use crate::acp;
use crate::acp_ask::EditorAsker;
use crate::acp_notes::EditorNotes;
use crate::hosted::Hosted;
use crate::hosted_acp::AcpConnections;
use crate::jsonrpc;
use crate::outbox::Outbox;
use crate::relay::Refusal;
use crate::view_ask::ViewQuestions;
use fsgate_base::error::code;
use fsgate_gateway::Gateway;
use fsgate_gateway::Request;
use fsgate_gateway::agent_sessions::AgentSessions;

/// State shared by the relay tasks.
pub(super) struct Relay {
    pub(super) gw: Arc<Gateway>,
    pub(super) peer: String,
    /// Editor request ids (as JSON text) of session requests in flight.
    pub(super) pending: Mutex<HashMap<String, Opening>>,
    /// Sessions seen created, by id.
    pub(super) sessions: Mutex<HashMap<String, Session>>,
    /// Whether the policy lets the agent use `terminal/*`.
    pub(super) allow_terminal: bool,
    /// Editor request ids (as JSON text) of `initialize` in flight: the agent's answer
    /// gets fsgate's own `_meta.fsgate`.
    pub(super) initializing: Mutex<std::collections::HashSet<String>>,
    /// Puts `ask` rules' questions to the editor.
    pub(super) asker: Arc<EditorAsker>,
    /// Shows the editor each change fsgate made (when the policy's `[notify] acp`).
    pub(super) notes: Arc<EditorNotes>,
    /// The agent profile's `_meta`, merged into every session the editor opens.
    pub(super) session_meta: Option<Value>,
    /// The MCP server hosted for the agent, added to each session it opens.
    pub(super) hosted: Option<Arc<Hosted>>,
    /// The agent takes Streamable HTTP MCP servers (its `initialize` answer said so).
    pub(super) agent_http: AtomicBool,
    /// The agent takes MCP servers over ACP itself (`mcpCapabilities.acp`, a draft).
    pub(super) agent_acp: AtomicBool,
    /// The hosted server's MCP-over-ACP connections.
    pub(super) mcp_over_acp: Option<Arc<AcpConnections>>,
    /// The ACP protocol version the agent's `initialize` answer chose (1 until then).
    pub(super) acp_version: AtomicU64,
    /// What the agent still waits for or owes: see [`Owed`].
    pub(super) owed: Owed,
    /// Under `--confine-agent`: where the questions of the agent's view go.
    pub(super) view: Option<Arc<ViewQuestions>>,
    /// The sessions the view's records are made under (`--confine-agent`), told of each
    /// session opened and each prompt's turn.
    pub(super) view_sessions: Option<Arc<AgentSessions>>,
}

/// What the relay is given besides its ends: whether the agent may use `terminal/*`,
/// the hosted MCP server, the profile's session `_meta`, and the view's sessions.
pub(super) type RelayOptions = (
    bool,
    Option<Arc<Hosted>>,
    Option<Value>,
    Option<Arc<AgentSessions>>,
);

/// At most this many session requests awaiting the agent's answer are remembered.
pub(super) const MAX_OPENING: usize = 256;

/// At most this many editor `initialize` requests awaiting the agent's answer are
/// remembered (an editor sends one; the bound keeps a flood from growing fsgate).
pub(super) const MAX_INITIALIZING: usize = 16;

impl Relay {
    /// The relay between `peer` (the editor) and the agent, writing to the agent and
    /// the editor through their outboxes; MCP over ACP when a server is hosted.
    pub(super) fn new(
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

impl Relay {
    /// The workspaces the session may use, as the gateway's scope.
    fn session_scope(&self, sid: Option<&str>) -> fsgate_gateway::Scope {
        let roots = sid.and_then(|sid| {
            let sessions = self.sessions.lock().ok()?;
            sessions.get(sid)?.roots.clone()
        });
        fsgate_gateway::Scope::fixed(roots)
    }

    pub(super) fn ctx(&self, params: &Value) -> fsgate_gateway::ops::RequestCtx {
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
    pub(super) fn file_ctx(&self, params: &Value) -> fsgate_gateway::ops::RequestCtx {
        let mut ctx = self.ctx(params);
        ctx.asker = Some(Arc::clone(&self.asker) as Arc<dyn fsgate_gateway::ask::Asker>);
        if self.gw.policy().notify_acp() {
            ctx.notifier = Some(Arc::clone(&self.notes) as Arc<dyn fsgate_gateway::ChangeSink>);
        }
        ctx
    }

    /// Records a refusal fsgate makes itself (session, terminal) and builds the reply.
    pub(super) fn refuse(&self, id: &Value, method: &str, params: &Value, err: Value) -> Value {
        let refusal = acp::message(id.clone(), method, Err(err));
        crate::door::serve(&acp::Acp, &self.gw, &self.ctx(params), None, refusal).answer
    }

    /// Records a line the relay refuses (one record) and builds the replies to the
    /// requests in it.
    pub(super) fn refuse_line(&self, refusal: &Refusal) -> Vec<Value> {
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
            .serve(
                &self.ctx(&refusal.params),
                request,
                fsgate_gateway::How::alone(),
            )
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
}
