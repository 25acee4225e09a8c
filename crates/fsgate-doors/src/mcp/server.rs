//! The MCP server of one connection: the gateway, its request contexts (the 2025
//! session's and the stateless requests'), the tool catalogue, and who is asked and told.

use std::sync::Arc;

use rmcp::model::{ServerCapabilities, Tool};

use rmcp::RoleServer;

use tokio::sync::Semaphore;

use super::catalog::Catalog;

use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{PathStyle, RequestCtx};

use super::identity::{Identity, Oversight};
use super::{call, elicit, logs, mrtr, roots};

/// The MCP server: the gateway, this connection's request context, the tool catalogue.
pub(crate) struct McpServer {
    /// Every tool call goes through it.
    pub(super) gw: Arc<Gateway>,
    /// The connection's 2025-era session (one session in the audit log).
    pub(super) ctx: Arc<RequestCtx>,
    /// Stateless requests': the whole workspace, nobody to ask, no log messages, and a
    /// session id of its own (an `allow_always` of the 2025 session is no grant here).
    pub(super) stateless: Arc<RequestCtx>,
    /// Input and output schemas, generated at the first `tools/list` (not before the
    /// `initialize` answer: a quarter of a millisecond of start-up).
    pub(super) catalog: std::sync::OnceLock<Catalog>,
    /// Bounds the tool calls running at once; more wait for a slot.
    pub(super) slots: Arc<Semaphore>,
    /// Puts `ask` questions to the client, once it declared elicitation.
    pub(super) elicit: Arc<elicit::Elicit>,
    /// Tells the client of changes, once it set a logging level.
    pub(super) logs: Arc<logs::Logs>,
    /// Reads each tool call for the one path that runs it (see `call`, `direct`).
    pub(super) calls: Arc<call::Calls>,
}

/// Tool calls served at once per connection. Fewer than on ACP: each holds its content
/// until the connection has room for its answer, and the content of many calls read at
/// once outgrows what their leases account for (copies while rendering, allocator
/// arenas per thread).
const MAX_IN_FLIGHT: usize = 16;

impl McpServer {
    /// A server for one connection, `who`.
    pub(super) fn new(gw: Arc<Gateway>, who: Identity) -> McpServer {
        let elicit = Arc::new(elicit::Elicit::new());
        let logs = Arc::new(logs::Logs::new(Arc::clone(&gw)));
        let person = matches!(who.oversight, Oversight::Person { .. });
        let states = match person {
            true => None,
            false => mrtr::States::new()
                .inspect_err(|e| tracing::warn!("{e}: stateless requests are not asked"))
                .ok()
                .map(Arc::new),
        };
        let (asker, notifier) = match who.oversight {
            Oversight::Person { asker, notifier } => (asker, notifier),
            // Without notes the gateway builds none; a reload turning them on holds for
            // the connections that start after it.
            Oversight::Client => (
                Arc::clone(&elicit) as Arc<dyn fsgate_gateway::ask::Asker>,
                gw.policy()
                    .notify_mcp()
                    .then(|| Arc::clone(&logs) as Arc<dyn fsgate_gateway::ChangeSink>),
            ),
        };
        let stateless = RequestCtx {
            style: PathStyle::AbsoluteOrRelative,
            // Another door's person's session (an ACP session) is one, whatever the era
            // of the request; an MCP client's stateless requests are a session apart.
            session: match person {
                true => who.session.clone(),
                false => format!("{}-stateless", who.session),
            },
            door: who.door,
            peer: who.peer.clone(),
            scope: who.within.fixed(),
            // Another door's person is asked about any request; an MCP client only
            // through an InputRequiredResult, per request (see `mrtr`).
            asker: Some(match person {
                true => Arc::clone(&asker),
                false => Arc::new(elicit::NoAsking),
            }),
            notifier: None,
        };
        let ctx = RequestCtx {
            style: PathStyle::AbsoluteOrRelative,
            session: who.session,
            door: who.door,
            peer: who.peer,
            scope: who.within.narrowable(),
            asker: Some(asker),
            notifier,
        };
        let (ctx, stateless) = (Arc::new(ctx), Arc::new(stateless));
        let calls = Arc::new(call::Calls {
            ctx: Arc::clone(&ctx),
            stateless: Arc::clone(&stateless),
            states,
            session_version: std::sync::OnceLock::new(),
            roots: roots::Asking::default(),
        });
        McpServer {
            gw,
            ctx,
            stateless,
            catalog: std::sync::OnceLock::new(),
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            elicit,
            logs,
            calls,
        }
    }

    /// Asks a client that declared the `roots` capability for its roots (see [`roots`]);
    /// `again`: even if they were asked for already (the client announced a change).
    pub(super) fn ask_roots(&self, peer: rmcp::service::Peer<RoleServer>, again: bool) {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if declared {
            self.calls.roots.ask(&self.gw, &self.ctx, peer, again);
        }
    }

    /// The workspace root, or with several every root, comma-separated.
    pub(super) fn root(&self) -> String {
        self.gw
            .members()
            .root_paths()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tools offered: with several workspaces, each tool some workspace's
    /// policy offers (every call is still decided by the policy of its workspace).
    pub(super) fn tools(&self) -> Vec<Tool> {
        let root = self.root();
        let mut tools: Vec<Tool> = Vec::new();
        for m in self.gw.members() {
            for t in self
                .catalog
                .get_or_init(Catalog::new)
                .tools(&m.policy(), &root)
            {
                if !tools.iter().any(|have| have.name == t.name) {
                    tools.push(t);
                }
            }
        }
        tools
    }
}

/// What the server declares: tools, and (2025 revisions) logging. Nothing else: the
/// input pump answers requests of other features "method not found".
// Logging is deprecated in the SDK (SEP-2577) but current in the 2025 revisions.
#[allow(deprecated)]
pub(super) fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_tools()
        .enable_logging()
        .build()
}
