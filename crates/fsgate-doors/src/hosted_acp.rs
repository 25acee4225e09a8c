//! The hosted MCP server over the ACP connection itself: ACP's draft MCP-over-ACP
//! transport (`mcpCapabilities.acp`, unstable in the ACP schema). An agent that
//! advertises it is given the entry `{"type": "acp", "name": "fsgate", "serverId": ID}`
//! and reaches the server with `mcp/connect` (the server's id), `mcp/message` (one MCP
//! message, its method and params flattened into the params; a request when the
//! envelope has an id) and `mcp/disconnect`, all on its stdout to fsgate.
//!
//! Each connection is a door of its own running the stdio door's code, as the bridge's
//! (`fsgate mcp-connect`) is: the same policy, `ask` rules put to the editor, backups
//! and one audit log, under the ACP session whose server id it named. The envelope's
//! id is the MCP message's id, so the door's answer is, byte for byte, the answer to
//! the agent's `mcp/message`. What the door sends on its own (notifications, a
//! `roots/list` request) goes to the agent as `mcp/message` from fsgate, its requests
//! under ids of fsgate's namespace ([`ID_PREFIX`]), whose answers come back here.
//!
//! Server ids and connection ids not fsgate's (an editor's own ACP-transport servers)
//! are not touched: those messages are relayed as any other.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::hosted::Hosted;
use super::http::Principal;
use super::outbox::{Outbox, SharedRoom, shared_room};
use crate::jsonrpc;
use crate::mcp::identity::Identity;
use crate::stdio::sink::Sink;
use fsgate_base::error::code;
use fsgate_gateway::Gateway;

/// Ids of fsgate's own `mcp/message` requests to the agent start with this.
pub(crate) const ID_PREFIX: &str = "fsgate-mcp-";

/// Connections open at once, over every session (each is a door).
const MAX_CONNECTIONS: usize = 256;

/// Requests of a door to the agent awaiting its answer, over every connection.
const MAX_OUTGOING: usize = 256;

/// Bytes between a connection's queue and its door's input pump.
const INPUT_PIPE: usize = 64 * 1024;

/// What the proxy does with one of the agent's messages.
pub(crate) enum Taken {
    /// Not fsgate's: relay it.
    Relay,
    /// Handled; this reply (if any) goes to the agent.
    Reply(Option<Value>),
}

/// One connection: its door's input.
struct Conn {
    input: Outbox<Vec<u8>>,
}

/// The MCP-over-ACP connections of one `fsgate acp`.
pub(crate) struct AcpConnections {
    gw: Arc<Gateway>,
    hosted: Arc<Hosted>,
    /// Who the agent is, for the doors' records.
    peer: String,
    /// Where answers and fsgate's messages to the agent go.
    to_agent: Outbox<Vec<u8>>,
    conns: Mutex<HashMap<String, Conn>>,
    /// fsgate's requests to the agent: its id -> (connection, the door's own id).
    outgoing: Mutex<HashMap<String, (String, Value)>>,
    counter: AtomicU64,
    /// Room all connections' unread input shares (the agent's messages to the doors).
    inputs: SharedRoom,
}

impl AcpConnections {
    pub(crate) fn new(
        gw: Arc<Gateway>,
        hosted: Arc<Hosted>,
        peer: String,
        to_agent: Outbox<Vec<u8>>,
    ) -> Arc<AcpConnections> {
        let inputs = shared_room(max_input(&hosted));
        Arc::new(AcpConnections {
            gw,
            hosted,
            peer,
            to_agent,
            conns: Mutex::new(HashMap::new()),
            outgoing: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            inputs,
        })
    }

    /// One of the agent's requests or notifications (`id` None): taken if it is an
    /// `mcp/*` message for fsgate's server or one of its connections.
    pub(crate) async fn request(
        self: &Arc<Self>,
        id: Option<&Value>,
        method: &str,
        params: &Value,
    ) -> Taken {
        match method {
            "mcp/connect" => match params["serverId"].as_str() {
                Some(server) => self.connect(id, server),
                None => Taken::Relay,
            },
            "mcp/message" | "mcp/disconnect" => {
                let Some(conn) = params["connectionId"].as_str() else {
                    return Taken::Relay;
                };
                if !self.is_ours(conn) {
                    return Taken::Relay;
                }
                if method == "mcp/disconnect" {
                    self.disconnect(conn);
                    return Taken::Reply(id.map(|id| jsonrpc::result_response(id, json!({}))));
                }
                self.message(id, conn, params).await
            }
            _ => Taken::Relay,
        }
    }

    /// The agent's answer to a message: taken if it answers one of fsgate's requests.
    pub(crate) async fn response(&self, id: &Value, message: &Value) -> bool {
        let Some(key) = id.as_str().filter(|s| s.starts_with(ID_PREFIX)) else {
            return false;
        };
        let Some((conn, inner)) = self.outgoing.lock().ok().and_then(|mut o| o.remove(key)) else {
            return false;
        };
        let mut answer = json!({"jsonrpc": "2.0", "id": inner});
        for k in ["result", "error"] {
            if let Some(v) = message.get(k) {
                answer[k] = v.clone();
            }
        }
        self.to_door(&conn, line_of(&answer)).await;
        true
    }

    /// Every connection ends (the agent is gone).
    pub(crate) fn close(&self) {
        let all: Vec<String> = self
            .conns
            .lock()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        for c in all {
            self.disconnect(&c);
        }
    }

    fn is_ours(&self, conn: &str) -> bool {
        self.conns.lock().is_ok_and(|c| c.contains_key(conn))
    }

    /// `mcp/connect` naming `server`: a new connection if the server is fsgate's.
    fn connect(self: &Arc<Self>, id: Option<&Value>, server: &str) -> Taken {
        let Some(principal) = self.hosted.acp_principal(server) else {
            return Taken::Relay;
        };
        let Some(id) = id else {
            return Taken::Reply(None);
        };
        match self.open(principal) {
            Ok(conn) => Taken::Reply(Some(jsonrpc::result_response(
                id,
                json!({"connectionId": conn}),
            ))),
            Err(why) => {
                let err = jsonrpc::error_object(code::LIMIT, &why, None);
                Taken::Reply(Some(jsonrpc::error_response(id, err)))
            }
        }
    }

    /// Starts a door for `principal`; the new connection's id.
    fn open(self: &Arc<Self>, principal: Arc<Principal>) -> Result<String, String> {
        let mut conns = self
            .conns
            .lock()
            .map_err(|_| "internal error".to_string())?;
        if conns.len() >= MAX_CONNECTIONS {
            return Err(format!(
                "too many MCP connections open at once (at most {MAX_CONNECTIONS})"
            ));
        }
        if principal.sessions.fetch_add(1, Ordering::AcqRel) >= principal.max_sessions {
            principal.sessions.fetch_sub(1, Ordering::AcqRel);
            return Err("too many MCP connections for this session".into());
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let conn_id = format!("{ID_PREFIX}conn-{n}");
        let max = self.hosted.max_message();
        let (input, input_rx) = Outbox::<Vec<u8>>::new(max.saturating_mul(2));
        let input = input.sharing(&self.inputs);
        let (door_in, door_side) = tokio::io::duplex(INPUT_PIPE);
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = Sink::new(DoorWriter {
            tx,
            room: self.hosted.room(),
        });
        let who = Identity {
            session: principal
                .session()
                .unwrap_or_else(|| format!("acp-mcp-{n}")),
            door: principal.door,
            peer: self.peer.clone(),
            oversight: principal.oversight.clone(),
            within: principal.within.clone(),
        };
        tokio::spawn(feed(input_rx, door_in));
        tokio::spawn(Arc::clone(self).from_door(conn_id.clone(), rx, max));
        let (gw, p) = (Arc::clone(&self.gw), Arc::clone(&principal));
        tokio::spawn(async move {
            let session = who.session.clone();
            if let Err(e) = crate::mcp::serve_as(gw, who, door_side, sink).await {
                tracing::debug!(%session, "mcp-over-acp connection ended: {e}");
            }
            p.sessions.fetch_sub(1, Ordering::AcqRel);
        });
        conns.insert(conn_id.clone(), Conn { input });
        Ok(conn_id)
    }

    /// Ends a connection: its door reads the end of its input and stops.
    fn disconnect(&self, conn: &str) {
        let gone = self.conns.lock().ok().and_then(|mut c| c.remove(conn));
        drop(gone);
        if let Ok(mut o) = self.outgoing.lock() {
            o.retain(|_, (c, _)| c != conn);
        }
    }

    /// `mcp/message` on a connection of fsgate's: the MCP message to its door.
    async fn message(&self, id: Option<&Value>, conn: &str, params: &Value) -> Taken {
        let Some(method) = params["method"].as_str() else {
            let err =
                jsonrpc::error_object(code::INVALID_PARAMS, "mcp/message needs a method", None);
            return Taken::Reply(id.map(|id| jsonrpc::error_response(id, err)));
        };
        let mut inner = json!({"jsonrpc": "2.0", "method": method});
        if let Some(id) = id {
            inner["id"] = id.clone();
        }
        if !params["params"].is_null() {
            inner["params"] = params["params"].clone();
        }
        if self.to_door(conn, line_of(&inner)).await {
            // The door answers it, under the same id.
            return Taken::Reply(None);
        }
        let err = jsonrpc::error_object(code::INVALID_REQUEST, "the MCP connection ended", None);
        Taken::Reply(id.map(|id| jsonrpc::error_response(id, err)))
    }

    /// Queues `line` for the door of `conn`; false if it is gone.
    async fn to_door(&self, conn: &str, line: Vec<u8>) -> bool {
        let input = self
            .conns
            .lock()
            .ok()
            .and_then(|c| c.get(conn).map(|c| c.input.clone()));
        match input {
            Some(i) => i.send_bytes(line).await,
            None => false,
        }
    }

    /// The door's output, one message a line, to the agent.
    async fn from_door(
        self: Arc<Self>,
        conn: String,
        mut rx: mpsc::UnboundedReceiver<Bytes>,
        max: usize,
    ) {
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = rx.recv().await {
            pending.extend_from_slice(&chunk);
            while let Some(end) = memchr::memchr(b'\n', &pending) {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if let Some(out) = self.wrap(&conn, &line[..end]) {
                    let _ = self.to_agent.send_bytes(out).await;
                }
            }
            // Its room is given back only now: what waits for the agent is counted.
            drop(chunk);
            if pending.len() > max.saturating_add(INPUT_PIPE) {
                tracing::warn!(%conn, "mcp-over-acp: the door wrote an endless line; connection ended");
                self.disconnect(&conn);
                return;
            }
        }
        self.disconnect(&conn);
    }

    /// What the agent gets for one line of the door: an answer as it is; a notification
    /// or request wrapped in `mcp/message` (a request under an id of fsgate's).
    fn wrap(&self, conn: &str, line: &[u8]) -> Option<Vec<u8>> {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            return None;
        };
        let Some(method) = v.get("method").and_then(Value::as_str) else {
            let mut out = line.to_vec();
            out.push(b'\n');
            return Some(out);
        };
        let mut params = json!({"connectionId": conn, "method": method});
        if let Some(p) = v.get("params") {
            params["params"] = p.clone();
        }
        let mut msg = json!({"jsonrpc": "2.0", "method": "mcp/message", "params": params});
        if let Some(inner) = v.get("id") {
            let n = self.counter.fetch_add(1, Ordering::Relaxed);
            let key = format!("{ID_PREFIX}{n}");
            let mut out = self.outgoing.lock().ok()?;
            if out.len() >= MAX_OUTGOING {
                tracing::warn!(%conn, "mcp-over-acp: too many requests to the agent unanswered; one dropped");
                return None;
            }
            out.insert(key.clone(), (conn.to_owned(), inner.clone()));
            msg["id"] = key.into();
        }
        Some(line_of(&msg))
    }
}

/// Bytes of the agent's messages all connections' doors may have unread: four messages'
/// worth, as the HTTP server's answers.
fn max_input(hosted: &Hosted) -> usize {
    hosted.max_message().saturating_mul(4)
}

/// Writes a connection's queued messages into its door's input.
async fn feed(
    mut rx: mpsc::UnboundedReceiver<crate::outbox::Queued<Vec<u8>>>,
    mut door: tokio::io::DuplexStream,
) {
    while let Some(m) = rx.recv().await {
        if door.write_all(&m.msg).await.is_err() {
            return;
        }
    }
    let _ = door.shutdown().await;
}

/// The door's output, queued for [`AcpConnections::from_door`] in the hosted server's
/// answer room (an agent that reads nothing holds the door's writer, not the gateway's
/// memory).
struct DoorWriter {
    tx: mpsc::UnboundedSender<Bytes>,
    room: Arc<super::http::AnswerRoom>,
}

impl Write for DoorWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let share = self.room.take(buf.len());
        self.tx
            .send(super::http::held(buf.to_vec(), share))
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the agent is gone")
            })?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn line_of(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}
