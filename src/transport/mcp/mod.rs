//! Transport `mcp`: an MCP server on stdio, built on the official Rust SDK (`rmcp`).
//!
//! It offers the contract's tools and, under their own names and argument shapes, the
//! reference filesystem server's (`@modelcontextprotocol/server-filesystem`), so an
//! existing client configuration can swap the command and keep working. Every tool is a
//! thin translation into one or more gateway [`crate::ops::Op`]s, run through
//! [`Gateway::handle`] on the blocking pool, so policy, audit and backups apply to each.
//! Refusals and failures are tool results with `isError: true` and a one-line reason;
//! protocol errors (unknown tool, malformed request) stay JSON-RPC errors.
//!
//! Protocol eras: rmcp serves both by itself, negotiating by what the client sends
//! first: the 2025 revisions' `initialize` handshake, and the 2026-07-28 revision's
//! stateless requests (per-request `_meta` protocol version, `server/discover`).
//!
//! Layout: `args` (argument structs = input schemas), `catalog` (names, annotations,
//! output schemas), `describe` (descriptions), `tools` (dispatch), `compat` (the
//! reference server's composed tools), `edits` (edit lists and diffs), `render` (results
//! and errors).

mod args;
mod catalog;
mod compat;
mod describe;
mod edits;
mod guard;
mod leases;
mod render;
mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, DiscoverResult, ErrorCode, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;

use crate::gateway::Gateway;
use crate::gateway::Request;
use crate::ops::{PathStyle, RequestCtx};
use catalog::{Catalog, ToolId};

/// The MCP server: the gateway, this connection's request context, the tool catalogue.
pub struct McpServer {
    /// Every tool call goes through it.
    gw: Arc<Gateway>,
    /// One stdio connection is one session in the audit log, whichever protocol era.
    ctx: Arc<RequestCtx>,
    /// Input and output schemas, generated once.
    catalog: Catalog,
    /// Bounds the tool calls running at once; more wait for a slot.
    slots: Arc<Semaphore>,
    /// Content budget held by answers the SDK has not written out yet.
    held: Arc<leases::Held>,
}

/// Tool calls served at once per connection (as on the ACP transport).
const MAX_IN_FLIGHT: usize = 64;

impl McpServer {
    /// A server for one connection from `peer`.
    pub fn new(gw: Arc<Gateway>, peer: String) -> McpServer {
        let ctx = RequestCtx {
            style: PathStyle::AbsoluteOrRelative,
            session: session_id(),
            transport: "mcp",
            peer,
        };
        McpServer {
            gw,
            ctx: Arc::new(ctx),
            catalog: Catalog::new(),
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            held: Arc::new(leases::Held::default()),
        }
    }

    /// Records a request answered without a workspace operation, before its reply (on
    /// the blocking pool: the record is synced). Err: the reply is withheld.
    async fn audit(&self, op: &str, outcome: Result<(), &McpError>) -> Result<(), McpError> {
        let outcome = outcome.map_err(|e| (i64::from(e.code.0), e.message.to_string()));
        let (gw, ctx, op) = (Arc::clone(&self.gw), Arc::clone(&self.ctx), op.to_string());
        match tokio::task::spawn_blocking(move || gw.serve(&ctx, Request::message(op, outcome)))
            .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(McpError::internal_error(e.message(), None)),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }

    fn root(&self) -> String {
        self.gw
            .workspace()
            .root_path()
            .to_string_lossy()
            .into_owned()
    }
}

/// A session id unique enough for the audit log: pid and start time.
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("mcp-{}-{nanos:x}", std::process::id())
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let root = self.root();
        let instructions = format!(
            "fsgate serves one workspace, {root}, under a policy. Paths are absolute inside it or relative \
             to it. Every call is checked and recorded; a refusal names the policy rule that made it, so do \
             not retry refused paths. Writes are atomic and replaced content is backed up."
        );
        let mut meta = rmcp::model::JsonObject::new();
        meta.insert("fsgate".into(), self.gw.meta());
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
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
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request);
        self.audit("initialize", result.as_ref().map(|_| ()))
            .await?;
        result
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        self.audit("server/discover", Ok(())).await?;
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
        self.audit("tools/list", Ok(())).await?;
        Ok(ListToolsResult::with_all_items(
            self.catalog.tools(&self.gw.policy(), &self.root()),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let id = ToolId::from_name(name)?;
        self.catalog
            .tools(&self.gw.policy(), &self.root())
            .into_iter()
            .find(|t| t.name == id.name())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        if request.method != guard::OVERSIZED_METHOD {
            // The SDK hands over a known method whose params did not fit its schema
            // (`"arguments": "text"`) as a custom request: that is a params error.
            let known = matches!(
                request.method.as_str(),
                "initialize"
                    | "ping"
                    | "tools/list"
                    | "tools/call"
                    | "server/discover"
                    | "resources/list"
                    | "resources/read"
                    | "prompts/list"
                    | "prompts/get"
                    | "completion/complete"
                    | "logging/setLevel"
            );
            let err = if known {
                McpError::invalid_params(
                    format!(
                        "invalid params for `{}`: they do not match the method's schema",
                        request.method
                    ),
                    None,
                )
            } else {
                McpError::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("unknown method `{}`", request.method),
                    None,
                )
            };
            self.audit(&request.method, Err(&err)).await?;
            return Err(err);
        }
        let p = request.params.unwrap_or_default();
        let (bytes, limit) = (&p["bytes"], &p["limit"]);
        let err = McpError::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "message of {bytes} bytes exceeds the limit of {limit} bytes (rule \
                 limits.max_message_bytes); it was discarded"
            ),
            Some(
                serde_json::json!({"rule": "limits.max_message_bytes", "bytes": bytes, "limit": limit}),
            ),
        );
        self.audit("oversized-message", Err(&err)).await?;
        Err(err)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = ToolId::from_name(&request.name) else {
            let err = McpError::invalid_params(format!("unknown tool: {}", request.name), None);
            self.audit("tools/call", Err(&err)).await?;
            return Err(err);
        };
        let args = request.arguments.unwrap_or_default();
        let (gw, ctx) = (Arc::clone(&self.gw), Arc::clone(&self.ctx));
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| McpError::internal_error("server shutting down", None))?;
        let (result, taken) = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let result = tools::call(&gw, &ctx, tool, args);
            (result, leases::take())
        })
        .await
        .unwrap_or_else(|e| {
            tracing::error!(tool = tool.name(), "tool task failed: {e}");
            let text = "internal error: the tool task failed";
            (
                CallToolResult::error(vec![ContentBlock::text(text)]),
                Vec::new(),
            )
        });
        let id = serde_json::to_string(&context.id).unwrap_or_default();
        self.held.keep(id, taken);
        Ok(result.into())
    }
}

/// Serves MCP on `input`/`output` until the client closes `input`; in-flight calls
/// finish first. A message longer than the policy's `limits.max_message_bytes` is
/// discarded and answered with a JSON-RPC error (-32600) naming the limit.
pub async fn serve<R, W>(gw: Arc<Gateway>, peer: String, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let max = usize::try_from(gw.policy().limits().max_message_bytes).unwrap_or(usize::MAX);
    let (errors_tx, errors_rx) = tokio::sync::mpsc::unbounded_channel();
    let input = guard::LineGuard::new(input, max).with_parse_errors(errors_tx);
    // The SDK writes into a pipe; one task copies its lines out and slips the answers to
    // unparsable lines in between them, never inside one.
    let (sdk_out, from_sdk) = tokio::io::duplex(256 * 1024);
    let server = McpServer::new(gw, peer);
    let copier = tokio::spawn(copy_out(
        from_sdk,
        output,
        errors_rx,
        Arc::clone(&server.gw),
        Arc::clone(&server.ctx),
        Arc::clone(&server.held),
    ));
    let transport = AsyncRwTransport::new_server(input, sdk_out)
        .with_max_line_length(max.saturating_add(guard::SLACK));
    let served = match server.serve(transport).await {
        Ok(running) => match running.waiting().await {
            Ok(reason) => {
                tracing::debug!(?reason, "mcp session ended");
                Ok(())
            }
            Err(e) => Err(std::io::Error::other(e)),
        },
        // The client went away before its first request.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    };
    // The SDK's end of the pipe is gone with the service: the copier drains and ends.
    let copied = copier
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    served.and(copied)
}

/// Copies the SDK's output lines to `to`, and answers each unparsable input line (as
/// reported by the guard) with a -32700 error, recorded in the audit log first.
async fn copy_out<R, W>(
    from: R,
    mut to: W,
    mut errors: tokio::sync::mpsc::UnboundedReceiver<String>,
    gw: Arc<Gateway>,
    ctx: Arc<RequestCtx>,
    held: Arc<leases::Held>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    let mut errors_open = true;
    let answer = |message: String| {
        let (gw, ctx) = (Arc::clone(&gw), Arc::clone(&ctx));
        async move {
            let recorded = tokio::task::spawn_blocking(move || {
                gw.serve(
                    &ctx,
                    Request::message(
                        "invalid-message",
                        Err((crate::error::code::PARSE_ERROR, message.clone())),
                    ),
                )
                .map(|_| message)
            })
            .await;
            let error = match recorded {
                Ok(Ok(message)) => {
                    serde_json::json!({"code": crate::error::code::PARSE_ERROR, "message": message})
                }
                Ok(Err(e)) => e.to_rpc_error(),
                Err(e) => {
                    serde_json::json!({"code": crate::error::code::INTERNAL, "message": e.to_string()})
                }
            };
            let mut bytes = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": error})
                .to_string()
                .into_bytes();
            bytes.push(b'\n');
            bytes
        }
    };
    loop {
        tokio::select! {
            // Cancel-safe enough: bytes read so far stay in `line` for the next call.
            n = from.read_until(b'\n', &mut line) => {
                if n? == 0 {
                    to.write_all(&line).await?;
                    break;
                }
                if line.ends_with(b"\n") {
                    to.write_all(&line).await?;
                    to.flush().await?;
                    held.written(&line);
                    line.clear();
                }
            }
            msg = errors.recv(), if errors_open => match msg {
                Some(m) => {
                    let bytes = answer(m).await;
                    to.write_all(&bytes).await?;
                    to.flush().await?;
                }
                None => errors_open = false,
            },
        }
    }
    while let Ok(m) = errors.try_recv() {
        let bytes = answer(m).await;
        to.write_all(&bytes).await?;
    }
    to.flush().await?;
    to.shutdown().await
}

/// Serves MCP on this process's stdin/stdout (`fsgate serve --transport mcp`).
pub async fn serve_stdio(gw: Arc<Gateway>, peer: String) -> std::io::Result<()> {
    serve(gw, peer, tokio::io::stdin(), tokio::io::stdout()).await
}
