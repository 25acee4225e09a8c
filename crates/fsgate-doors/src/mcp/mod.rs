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
//! `server` is the connection's SDK handler's state and `handler` its answers to what
//! the SDK serves; `identity` says who a connection is.

mod args;
mod call;
mod catalog;
mod classify;
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
mod handler;
pub(crate) mod identity;
mod logs;
mod mrtr;
mod outgoing;
mod pump;
mod pump_replies;
mod render;
mod roots;
mod server;
mod submit;
mod text_answer;
mod tool_id;
mod tools;
mod wire;

use std::sync::Arc;

use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use crate::stdio::{self, sink::Sink};
use flow::Flow;
use identity::{Identity, Oversight};
use server::{McpServer, capabilities};

use fsgate_gateway::{DoorSpec, Gateway};

/// What a line is, as the door's input pump judges it: another door that carries MCP
/// messages (HTTP) routes by the same judgement the pump will make.
pub(crate) use classify::{Line as InputLine, classify as classify_line};

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
    for_processes: false,
};

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

/// A session id unique enough for the audit log: pid and start time.
fn session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("mcp-{}-{nanos:x}", std::process::id())
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
    Thread(
        stdio::thread_reader::ThreadReader,
        stdio::thread_reader::Stopper,
    ),
}

/// The running pump.
enum Pumping {
    Task(tokio::task::JoinHandle<std::io::Result<()>>),
    Thread(stdio::own_thread::OnThread<std::io::Result<()>>),
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
    let pump = pump_replies::Pump::new(
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
            Pumping::Thread(stdio::own_thread::on_thread("fsgate-mcp-input", run, stop)?)
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
    match stdio::thread_reader::ThreadReader::stdin() {
        Ok((r, stop)) => {
            let input = Input::<stdio::thread_reader::ThreadReader>::Thread(r, stop);
            serve_from(gw, Identity::mcp(peer), input, Sink::stdout()).await
        }
        Err(e) => {
            tracing::debug!("stdin read by the runtime: {e}");
            serve(gw, peer, stdio::stdin(), Sink::stdout()).await
        }
    }
}
