//! Who one connection is, when another door carries it, and who is asked and told
//! for it.

use std::sync::Arc;

use fsgate_gateway::DoorSpec;

/// Who one connection is, when another door carries it (MCP over HTTP, the server the
/// ACP proxy hosts for its agent): its audit session and transport, and who is asked
/// and told.
pub(crate) struct Identity {
    /// The audit log's session for every record of the connection.
    pub session: String,
    /// The door: [`DOOR`](super::DOOR), or the same under another name for the records (MCP over
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
