//! One MCP session over HTTP: an MCP door of its own (the stdio door's code, fed one
//! message a line), the router of its output, and a bound on its requests at once.
//! A 2025-era session has an `Mcp-Session-Id`; each principal also has one door for
//! the stateless 2026-07-28 wire, whose requests carry everything themselves.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::sync::Semaphore;

use super::body::Room;
use super::router::{RouteWriter, Router};
use crate::mcp::{self, identity::Identity};
use crate::stdio::sink::Sink;
use fsgate_gateway::Gateway;

/// Bytes between the exchanges and the door's input pump.
const INPUT_PIPE: usize = 64 * 1024;

/// One MCP session.
pub(crate) struct McpSession {
    /// Its `Mcp-Session-Id`; None for a principal's stateless door.
    pub id: Option<String>,
    /// Its session in the audit log.
    pub name: String,
    /// Whose it is: only that principal's requests reach it.
    pub principal: Arc<Principal>,
    /// The door's input; None once the session ended.
    input: tokio::sync::Mutex<Option<DuplexStream>>,
    /// Where the door's output goes.
    pub router: Arc<Router>,
    /// Requests at once.
    pub slots: Arc<Semaphore>,
    /// When a request last came.
    used: Mutex<Instant>,
    /// Set when the session is ended, or its door stopped.
    ended: Arc<AtomicBool>,
}

impl McpSession {
    /// Starts a session and its door, as `who`, on the current runtime.
    pub(crate) fn start(
        gw: Arc<Gateway>,
        who: Identity,
        (id, principal): (Option<String>, Arc<Principal>),
        room: Arc<Room>,
        max_in_flight: usize,
    ) -> Arc<McpSession> {
        let (ours, door_side) = tokio::io::duplex(INPUT_PIPE);
        let router = Router::new(room);
        let sink = Sink::new(RouteWriter(Arc::clone(&router)));
        let session = who.session.clone();
        let session_name = session.clone();
        let routed = Arc::clone(&router);
        let ended = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&ended);
        tokio::spawn(async move {
            if let Err(e) = mcp::serve_as(gw, who, door_side, sink).await {
                tracing::debug!(%session, "http: mcp session ended: {e}");
            }
            // Whoever still waits learns the session ended; later requests get 404.
            stopped.store(true, Ordering::Release);
            routed.close();
        });
        Arc::new(McpSession {
            id,
            name: session_name,
            principal,
            input: tokio::sync::Mutex::new(Some(ours)),
            router,
            slots: Arc::new(Semaphore::new(max_in_flight.max(1))),
            used: Mutex::new(Instant::now()),
            ended,
        })
    }

    /// Hands one message (one line, no newline in it) to the door.
    pub(crate) async fn send(&self, line: &[u8]) -> std::io::Result<()> {
        self.touch();
        let mut input = self.input.lock().await;
        let Some(pipe) = input.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the session ended",
            ));
        };
        pipe.write_all(line).await?;
        pipe.write_all(b"\n").await?;
        pipe.flush().await
    }

    /// Marks the session used now.
    pub(crate) fn touch(&self) {
        *self.used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Whether it has been unused (no request waiting, no stream open) for `idle`.
    pub(crate) fn idle_for(&self, idle: std::time::Duration) -> bool {
        let since = self
            .used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        since >= idle && self.router.waiting() == 0 && !self.router.streaming()
    }

    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Ends the session: its door reads the end of its input, finishes the requests it
    /// holds and stops; its stream and waiting exchanges are closed.
    pub(crate) fn end(self: &Arc<Self>) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        self.router.close();
        let me = Arc::clone(self);
        let close = async move {
            me.input.lock().await.take();
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(close);
            }
            Err(_) => {
                if let Ok(mut input) = self.input.try_lock() {
                    input.take();
                }
            }
        }
    }
}

/// Whom a token stands for.
pub(crate) struct Principal {
    /// The session its records carry: one ACP session's (provisional until the agent
    /// named it); None: each MCP session gets an id of its own.
    pub session: Mutex<Option<String>>,
    /// The door its requests come through.
    pub door: &'static fsgate_gateway::DoorSpec,
    /// Who is asked when an `ask` rule decides, and told of changes.
    pub oversight: crate::mcp::identity::Oversight,
    /// MCP sessions open now, and at most.
    pub sessions: AtomicUsize,
    pub max_sessions: usize,
    /// Its door for the stateless (2026-07-28) wire, once used.
    pub stateless: Mutex<Option<Arc<McpSession>>>,
    /// What its connections may reach at most (an ACP session's workspaces, or
    /// nothing).
    pub within: fsgate_gateway::Ceiling,
}

impl Principal {
    pub(crate) fn new(
        session: Option<String>,
        door: &'static fsgate_gateway::DoorSpec,
        max_sessions: usize,
    ) -> Principal {
        Principal {
            session: Mutex::new(session),
            door,
            oversight: crate::mcp::identity::Oversight::Client,
            sessions: AtomicUsize::new(0),
            max_sessions,
            stateless: Mutex::new(None),
            within: fsgate_gateway::Ceiling::default(),
        }
    }

    /// The session its records carry now, if it has one.
    pub(crate) fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ends its stateless door, if any.
    pub(crate) fn end_stateless(&self) {
        let door = self
            .stateless
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(d) = door {
            d.end();
        }
    }
}
