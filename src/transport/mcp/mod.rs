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
        let outcome = match &result {
            Ok(_) => Ok(()),
            Err(e) => Err((i64::from(e.code.0), e.message.to_string())),
        };
        self.gw
            .record_other(&self.ctx, "initialize", outcome)
            .map_err(|e| McpError::internal_error(e.message(), None))?;
        result
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        self.gw
            .record_other(&self.ctx, "server/discover", Ok(()))
            .map_err(|e| McpError::internal_error(e.message(), None))?;
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
        // Every request gets its audit record before its reply.
        self.gw
            .record_other(&self.ctx, "tools/list", Ok(()))
            .map_err(|e| McpError::internal_error(e.message(), None))?;
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
            let outcome = Err((i64::from(err.code.0), err.message.to_string()));
            self.gw
                .record_other(&self.ctx, &request.method, outcome)
                .map_err(|e| McpError::internal_error(e.message(), None))?;
            return Err(err);
        }
        let p = request.params.unwrap_or_default();
        let (bytes, limit) = (&p["bytes"], &p["limit"]);
        self.gw
            .record_other(
                &self.ctx,
                "oversized-message",
                Err((
                    crate::error::code::INVALID_REQUEST,
                    format!("message of {bytes} bytes exceeds the limit of {limit} bytes"),
                )),
            )
            .map_err(|e| McpError::internal_error(e.message(), None))?;
        Err(McpError::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "message of {bytes} bytes exceeds the limit of {limit} bytes (rule \
                 limits.max_message_bytes); it was discarded"
            ),
            Some(
                serde_json::json!({"rule": "limits.max_message_bytes", "bytes": bytes, "limit": limit}),
            ),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = ToolId::from_name(&request.name) else {
            let msg = format!("unknown tool: {}", request.name);
            self.gw
                .record_other(
                    &self.ctx,
                    "tools/call",
                    Err((crate::error::code::INVALID_PARAMS, msg.clone())),
                )
                .map_err(|e| McpError::internal_error(e.message(), None))?;
            return Err(McpError::invalid_params(msg, None));
        };
        let args = request.arguments.unwrap_or_default();
        let (gw, ctx) = (Arc::clone(&self.gw), Arc::clone(&self.ctx));
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .map_err(|_| McpError::internal_error("server shutting down", None))?;
        let result = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            tools::call(&gw, &ctx, tool, args)
        })
        .await
        .unwrap_or_else(|e| {
            tracing::error!(tool = tool.name(), "tool task failed: {e}");
            CallToolResult::error(vec![ContentBlock::text(
                "internal error: the tool task failed",
            )])
        });
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
    let input = guard::LineGuard::new(input, max);
    let transport = AsyncRwTransport::new_server(input, output)
        .with_max_line_length(max.saturating_add(guard::SLACK));
    match McpServer::new(gw, peer).serve(transport).await {
        Ok(running) => {
            let reason = running.waiting().await.map_err(std::io::Error::other)?;
            tracing::debug!(?reason, "mcp session ended");
            Ok(())
        }
        // The client went away before its first request.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// Serves MCP on this process's stdin/stdout (`fsgate serve --transport mcp`).
pub async fn serve_stdio(gw: Arc<Gateway>, peer: String) -> std::io::Result<()> {
    serve(gw, peer, tokio::io::stdin(), tokio::io::stdout()).await
}
