//! Transport `mcp`: an MCP server on stdio, built on the official Rust SDK (`rmcp`).
//!
//! It offers the contract's tools and, under their own names and argument shapes, the
//! reference filesystem server's (`@modelcontextprotocol/server-filesystem`), so an
//! existing client configuration can swap the command and keep working. Every tool is a
//! thin translation into one or more gateway [`fsgate_gateway::ops::Op`]s, run through
//! [`Gateway::serve`] on the blocking pool, so policy, audit and backups apply to each.
//! Refusals and failures are tool results with `isError: true` and a one-line reason;
//! protocol errors (unknown tool, malformed request) stay JSON-RPC errors.
//!
//! Protocol eras: rmcp serves both, the 2025 revisions' `initialize` handshake and the
//! 2026-07-28 revision's stateless requests (per-request `_meta` protocol version,
//! `server/discover`). What makes an answer depend on the request alone is the input
//! pump's (see `era`): a stateless request is answered in a context of its own, never
//! the 2025 session's (no roots, no person asked, no grant from the session, no log
//! messages), and nothing the SDK would end the connection over ever reaches it.
//!
//! Tool calls: every `tools/call` takes one path, beside the SDK (`call` reads it,
//! `direct` runs it and writes its answer as the SDK would have for the call's era).
//!
//! One record per message: the input pump records what never reaches a handler
//! (unparsable lines, batches, oversized lines) and every notification and client
//! response, once each; a tool call is recorded by its gateway operations (or, refused
//! before it runs, by the pump, from its answer); every other
//! request (`ping`, `resources/list`, a request the SDK refuses for its `_meta`...) is
//! recorded from its answer by the output copier, before the answer is written.
//!
//! Bounded memory: see `flow`. A tool answer whose encoded size exceeds the message
//! limit becomes a tool error instead.
//!
//! Layout: `guard`, `pump` and `era` (input), `wire` (the SDK's transport), `flow` (requests in flight, byte rooms), `args`
//! (argument structs = input schemas), `catalog` (names, annotations, output schemas),
//! `describe` (descriptions), `tools` (dispatch), `compat` (the reference server's
//! composed tools), `edits` (edit lists and diffs), `render` (results and errors),
//! `roots` (the client's roots, narrowing the session), `elicit` (asking a person for an
//! `ask` rule), `logs` (changes told to the client as log messages).

mod args;
mod call;
mod catalog;
mod compat;
mod copier;
mod describe;
mod direct;
mod edits;
mod elicit;
mod encoded;
mod era;
mod flow;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod guard;
mod logs;
mod mrtr;
mod outgoing;
mod pump;
mod render;
mod roots;
mod submit;
mod text_answer;
mod tool_id;
mod tools;
mod wire;

use std::sync::Arc;

use rmcp::model::{
    CustomRequest, CustomResult, DiscoverResult, ErrorCode, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::io::AsyncRead;
use tokio::sync::{Semaphore, mpsc};

use crate::stdio::{self, Sink};
use catalog::Catalog;
use flow::Flow;
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_gateway::{DoorSpec, Gateway};
use tool_id::ToolId;

/// What a line is, as the door's input pump judges it: another door that carries MCP
/// messages (HTTP) routes by the same judgement the pump will make.
pub(crate) use pump::{Line as InputLine, classify as classify_line};

/// The MCP server: the gateway, this connection's request context, the tool catalogue.
pub(crate) struct McpServer {
    /// Every tool call goes through it.
    gw: Arc<Gateway>,
    /// The connection's 2025-era session (one session in the audit log).
    ctx: Arc<RequestCtx>,
    /// Stateless requests': the whole workspace, nobody to ask, no log messages, and a
    /// session id of its own (an `allow_always` of the 2025 session is no grant here).
    stateless: Arc<RequestCtx>,
    /// Input and output schemas, generated at the first `tools/list` (not before the
    /// `initialize` answer: a quarter of a millisecond of start-up).
    catalog: std::sync::OnceLock<Catalog>,
    /// Bounds the tool calls running at once; more wait for a slot.
    slots: Arc<Semaphore>,
    /// Puts `ask` questions to the client, once it declared elicitation.
    elicit: Arc<elicit::Elicit>,
    /// Tells the client of changes, once it set a logging level.
    logs: Arc<logs::Logs>,
    /// Reads each tool call for the one path that runs it (see `call`, `direct`).
    calls: Arc<call::Calls>,
}

/// Tool calls served at once per connection. Fewer than on ACP: each holds its content
/// until the connection has room for its answer, and the content of many calls read at
/// once outgrows what their leases account for (copies while rendering, allocator
/// arenas per thread).
const MAX_IN_FLIGHT: usize = 16;

/// This door (MCP over stdio), as its requests carry it: a read's content is sent
/// twice (a text block and structured content, as the reference server does); files
/// are read in parts with `read_text_file`'s `line` and `limit`, binary and media
/// content with `read_media_file`.
pub const DOOR: DoorSpec = DoorSpec {
    name: "mcp",
    content_copies: 2,
    read_in_parts: "; read the file in parts (read_text_file with line and limit)",
    binary_read: "; use read_media_file",
    media_read: "; the policy lets media files (images, audio) be read with read_media_file \
                 if their content matches their extension",
};

/// Who one connection is, when another door carries it (MCP over HTTP, the server the
/// ACP proxy hosts for its agent): its audit session and transport, and who is asked
/// and told.
pub(crate) struct Identity {
    /// The audit log's session for every record of the connection.
    pub session: String,
    /// The door: [`DOOR`], or the same under another name for the records (MCP over
    /// HTTP, the server the ACP proxy hosts).
    pub door: &'static DoorSpec,
    /// Who is connected (an address, or pid/uid).
    pub peer: String,
    /// Who is asked when an `ask` rule decides, and told of changes.
    pub oversight: Oversight,
    /// What the connection may reach at most (the hosted server of an ACP session:
    /// that session's workspaces, or nothing when the session has no file access).
    pub within: fsgate_gateway::Ceiling,
}

/// Who is asked and told for a connection.
#[derive(Clone)]
pub(crate) enum Oversight {
    /// The MCP client: asked by elicitation, told by log messages (`[notify] mcp`).
    Client,
    /// The person of another door (the editor of `fsgate acp`): asked by `asker`, told
    /// by `notifier` (None: nobody); never the MCP client.
    Person {
        /// Asks the person.
        asker: Arc<dyn fsgate_gateway::ask::Asker>,
        /// Tells the person what changed.
        notifier: Option<Arc<dyn fsgate_gateway::ChangeSink>>,
    },
}

impl Identity {
    /// A plain MCP connection from `peer`, with a session id of its own.
    pub(crate) fn mcp(peer: String) -> Identity {
        Identity {
            session: session_id(),
            door: &DOOR,
            peer,
            oversight: Oversight::Client,
            within: fsgate_gateway::Ceiling::default(),
        }
    }
}

impl McpServer {
    /// A server for one connection, `who`.
    fn new(gw: Arc<Gateway>, who: Identity) -> McpServer {
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
    fn ask_roots(&self, peer: rmcp::service::Peer<RoleServer>, again: bool) {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if declared {
            self.calls.roots.ask(&self.gw, &self.ctx, peer, again);
        }
    }

    /// The workspace root, or with several every root, comma-separated.
    fn root(&self) -> String {
        self.gw
            .members()
            .root_paths()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tools offered: with several workspaces, each tool some workspace's
    /// policy offers (every call is still decided by the policy of its workspace).
    fn tools(&self) -> Vec<Tool> {
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
fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_tools()
        .enable_logging()
        .build()
}

/// A session id unique enough for the audit log: pid and start time.
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("mcp-{}-{nanos:x}", std::process::id())
}

impl ServerHandler for McpServer {
    // Logging is deprecated in the SDK (SEP-2577) but current in the 2025 revisions.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let root = self.root();
        let place = if self.gw.is_several() {
            format!(
                "several workspaces, {root}, each under its policy. Paths are absolute inside one of them \
                 (relative paths are relative to the first)"
            )
        } else {
            format!(
                "one workspace, {root}, under a policy. Paths are absolute inside it or relative to it"
            )
        };
        let instructions = format!(
            "fsgate serves {place}. Every call is checked and recorded; a refusal names the policy rule that \
             made it, so do not retry refused paths. Writes are atomic and replaced content is backed up."
        );
        let mut meta = rmcp::model::JsonObject::new();
        meta.insert("fsgate".into(), self.gw.meta());
        let mut info = InitializeResult::new(capabilities())
            .with_server_info(
                Implementation::new("fsgate", env!("CARGO_PKG_VERSION"))
                    .with_title("fsgate filesystem gateway")
                    .with_description("Policy-checked, audited access to one workspace"),
            )
            .with_instructions(instructions);
        info.meta = Some(MetaObject::from(meta));
        info
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if request.capabilities.roots.is_some() {
            // Calls wait for the roots from now on: the pump may take the first call
            // before the SDK has handed us `notifications/initialized`.
            self.ctx.scope.declare();
        }
        // A call that needs the roots before `notifications/initialized` asks for them.
        let _ = self.calls.roots.peer.set(context.peer.clone());
        if let Some(e) = &request.capabilities.elicitation {
            self.elicit.declared(e, context.peer.clone());
        }
        self.logs.start(context.peer.clone());
        let result = self.negotiate_initialize(&request)?;
        // Tool calls answer in the era it agreed on (see `call`).
        let _ = self
            .calls
            .session_version
            .set(result.protocol_version.clone());
        // The session's version is the one agreed on, as after the SDK's own handshake.
        let mut info = request;
        info.protocol_version = result.protocol_version.clone();
        context.peer.set_peer_info(info);
        Ok(result)
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.logs.set_level(request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.ask_roots(context.peer, false);
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.ask_roots(context.peer, true);
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(call::supported_versions())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let id = ToolId::from_name(name)?;
        self.tools().into_iter().find(|t| t.name == id.name())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        // The SDK hands over a known method whose params did not fit its schema
        // (`"arguments": "text"`) as a custom request: that is a params error.
        let (code, message) = era::unreadable(&request.method);
        Err(McpError::new(
            ErrorCode(code as i32),
            fsgate_base::error::echo(&message).into_owned(),
            None,
        ))
    }
}

/// Serves MCP on `input`/`output` until the client closes `input`; in-flight calls
/// finish first. A message longer than the policy's `limits.max_message_bytes` is
/// discarded and answered with a JSON-RPC error (-32600) naming the limit.
pub(crate) async fn serve<R>(
    gw: Arc<Gateway>,
    peer: String,
    input: R,
    output: Arc<Sink>,
) -> std::io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    serve_from(gw, Identity::mcp(peer), Input::Task(input), output).await
}

/// [`serve`] for a connection another door carries, as `who`: newline-delimited
/// messages in on `input`, whole messages out on `output`.
pub(crate) async fn serve_as<R>(
    gw: Arc<Gateway>,
    who: Identity,
    input: R,
    output: Arc<Sink>,
) -> std::io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    serve_from(gw, who, Input::Task(input), output).await
}

/// Where the input pump reads, and so where it runs.
enum Input<R> {
    /// A task of the runtime.
    Task(R),
    /// A thread of its own, reading with blocking reads: a request alone then runs on
    /// the thread that read it with no runtime thread woken (issue 12).
    Thread(stdio::ThreadReader, stdio::Stopper),
}

/// The running pump.
enum Pumping {
    Task(tokio::task::JoinHandle<std::io::Result<()>>),
    Thread(stdio::OnThread<std::io::Result<()>>),
}

impl Pumping {
    /// Stops reading unless the input has ended; the pump's error, if any.
    async fn stop(self) -> Option<std::io::Error> {
        match self {
            Pumping::Task(t) => {
                t.abort();
                t.await.ok().and_then(Result::err)
            }
            Pumping::Thread(t) => t.stop().await.and_then(Result::err),
        }
    }
}

/// [`serve`], the pump reading `input` where it says.
async fn serve_from<R>(
    gw: Arc<Gateway>,
    who: Identity,
    input: Input<R>,
    output: Arc<Sink>,
) -> std::io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let max = usize::try_from(gw.policy().limits().max_message_bytes).unwrap_or(usize::MAX);
    let flow = Flow::new(max.saturating_mul(2));
    let server = McpServer::new(gw, who);
    // client -> guard -> pump -> pipe -> SDK -> pipe -> copier -> client. The pump's own
    // answers reach the copier on a short queue; the direct path writes its own.
    let (answers, own) = mpsc::channel::<outgoing::Outgoing>(16);
    let door = direct::Direct::start(
        Arc::clone(&server.gw),
        server.calls.states.clone(),
        Arc::clone(&flow),
        (max, Arc::clone(&server.slots)),
        (Arc::clone(&output), answers.clone()),
    )?;
    let (to_sdk, sdk_in) = mpsc::channel(wire::QUEUED);
    let (sdk_out, from_sdk) = tokio::io::duplex(256 * 1024);
    let pump = pump::Pump::new(
        Arc::clone(&server.gw),
        (Arc::clone(&server.ctx), Arc::clone(&server.stateless)),
        Arc::clone(&server.calls),
        Arc::clone(&flow),
        (answers, door),
        capabilities(),
    );
    let pumping = match input {
        Input::Task(r) => Pumping::Task(tokio::spawn(pump::run(
            pump,
            guard::LineGuard::new(r, max),
            to_sdk,
        ))),
        Input::Thread(r, stop) => {
            let run = pump::run(pump, guard::LineGuard::new(r, max), to_sdk);
            Pumping::Thread(stdio::on_thread("fsgate-mcp-input", run, stop)?)
        }
    };
    let copier = copier::Copier {
        flow,
        gw: Arc::clone(&server.gw),
        ctx: Arc::clone(&server.ctx),
        stateless: Arc::clone(&server.stateless),
    };
    let copying = tokio::spawn(copier.run(from_sdk, output, own));
    let transport = wire::Wire::new(sdk_in, sdk_out);
    // Without the SDK's opening handshake, which ended the connection on any message but
    // a request: `initialize` is a request like the others here (see `pump`).
    let running = rmcp::service::serve_directly(server, transport, None);
    let served = match running.waiting().await {
        Ok(reason) => {
            tracing::debug!(?reason, "mcp session ended");
            Ok(())
        }
        Err(e) => Err(std::io::Error::other(e)),
    };
    // Normally the pump has ended (input closed); if the SDK ended first, stop reading.
    if let Some(e) = pumping.stop().await {
        tracing::debug!("mcp input: {e}");
    }
    // The SDK's end of the pipe is gone with the service: the copier drains and ends.
    let copied = copying
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    served.and(copied)
}

/// Serves MCP on this process's stdin/stdout (`fsgate serve --transport mcp`).
pub async fn serve_stdio(gw: Arc<Gateway>, peer: String) -> std::io::Result<()> {
    match stdio::ThreadReader::stdin() {
        Ok((r, stop)) => {
            let input = Input::<stdio::ThreadReader>::Thread(r, stop);
            serve_from(gw, Identity::mcp(peer), input, Sink::stdout()).await
        }
        Err(e) => {
            tracing::debug!("stdin read by the runtime: {e}");
            serve(gw, peer, stdio::stdin(), Sink::stdout()).await
        }
    }
}
