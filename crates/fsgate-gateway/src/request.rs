//! Who asks: a request's door, session, peer and scope, and whom to ask and tell.

use std::sync::Arc;

use crate::ask::Asker;
use crate::door::{DoorSpec, PathStyle};
use crate::notes::ChangeSink;
use crate::scope::Scope;

/// Who is asking: carried into refusals and audit records.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    /// The transport's path convention.
    pub style: PathStyle,
    /// The session id the request named (or the connection's).
    pub session: String,
    /// The door it came through: its name for the records, the shape of its answers.
    pub door: &'static DoorSpec,
    /// pid/uid of the stdio peer, or the remote address.
    pub peer: String,
    /// The parts of the workspace the session may reach (MCP roots narrow it).
    pub scope: Scope,
    /// Who to ask when an `ask` rule decides (None: the client cannot be asked).
    pub asker: Option<Arc<dyn Asker>>,
    /// Who to tell of each change the gateway made (None: nobody).
    pub notifier: Option<Arc<dyn ChangeSink>>,
}
