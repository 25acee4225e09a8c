//! What the SDK serves, answered: `initialize` (its capabilities noted), logging
//! levels, roots announced, `server/discover`, `tools/list`, and a request it could not
//! read.

use rmcp::model::{
    CustomRequest, CustomResult, DiscoverResult, ErrorCode, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::server::{McpServer, capabilities};
use super::tool_id::ToolId;
use super::{call, era};

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
