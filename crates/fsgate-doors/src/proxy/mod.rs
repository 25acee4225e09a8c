//! `fsgate acp`: host an ACP agent. Editor (our stdio) <-> agent (the child's stdio):
//! every message is relayed as the raw line it arrived as, except that fsgate answers
//! the agent's `fs/*` and `_fsgate/*` requests itself, from the workspace, under the
//! policy, and sets the `fs` capabilities of the editor's `initialize` to the policy's.
//! What comes from the agent is relayed only if [`crate::relay::classify_agent_line`] finds it
//! exactly one unambiguous message naming no file or terminal method; anything an
//! editor could read as one is answered by fsgate or refused (and recorded).
//!
//! The editor's messages are relayed to the agent unchanged: the editor is the user's
//! side, and no agent line that could ask it for a file reaches it, so no file answer
//! can come back from it.
//!
//! Ids need no rewriting: requests in each direction are answered by the other side
//! (or by fsgate, for the agent's file requests, which never reach the editor), and a
//! message with a `method` is a request while one without is a response, so equal ids
//! travelling in opposite directions never meet.
//!
//! The relay's state is `state::Relay`; what the editor writes is routed in
//! `editor.rs`, what the agent writes in `agent.rs`; `opened.rs` keeps the sessions
//! the agent opens, `stamp.rs` what fsgate writes into the messages it relays, and
//! `owed.rs` what each side still waits for when the editor leaves.

mod agent;
mod editor;
mod line;
mod opened;
mod owed;
mod pipes;
mod session;
mod stamp;
mod state;

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use crate::jsonrpc;
use crate::lines::{Line, read_line};
use crate::outbox::Outbox;
use crate::view_ask::ViewQuestions;
use agent::relay_agent;
use editor::Routed;
use fsgate_base::error::code;
use fsgate_gateway::Gateway;
use line::line_of;
use pipes::{agent_pipes, kill, write_raw};
use state::{Relay, RelayOptions};

/// How long the agent gets to finish its turn once the editor closed stdin, and then to
/// exit once its own stdin is closed, before it is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// How long the agent's stdout is still read once the agent exited.
const DRAIN: Duration = Duration::from_secs(1);

/// How the hosted agent ended.
#[derive(Debug, Clone, Copy)]
pub struct AgentEnd {
    /// Its exit status.
    pub status: ExitStatus,
    /// Whether fsgate killed it: the editor had closed its input and the agent had not
    /// exited [`GRACE`] later.
    pub killed_after_eof: bool,
}

/// Relays between the editor (`editor_in`/`editor_out`) and the agent (`agent_in` is
/// the child's stdin, `agent_out` its stdout) until the agent exits. Returns how.
///
/// The child was spawned before the gateway confined itself (so the agent is not bound
/// by the gateway's own Landlock ruleset); its pipes are adopted by the runtime here.
pub async fn run<EI, EO>(
    gw: Arc<Gateway>,
    peer: String,
    editor_in: EI,
    editor_out: EO,
    mut child: std::process::Child,
    (allow_terminal, hosted, session_meta, view_sessions): RelayOptions,
    view: Option<Arc<ViewQuestions>>,
) -> std::io::Result<AgentEnd>
where
    EI: AsyncRead + Unpin + Send + 'static,
    EO: AsyncWrite + Unpin + Send + 'static,
{
    let (agent_in, agent_out) = agent_pipes(&mut child)?;
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || child.wait());
    let max = usize::try_from(gw.policy().limits().max_message_bytes).unwrap_or(usize::MAX);
    // Each direction holds at most twice the message limit of unwritten bytes: a side
    // that stops reading stalls the other's relay instead of growing the gateway.
    let (to_editor, editor_rx) = Outbox::<Vec<u8>>::new(max.saturating_mul(2));
    let (to_agent, agent_rx) = Outbox::<Vec<u8>>::new(max.saturating_mul(2));
    let relay = Relay::new(
        (gw, peer),
        (allow_terminal, hosted, session_meta, view_sessions),
        (&to_agent, &to_editor),
        max,
        view,
    );
    let (close_agent_tx, close_agent_rx) = tokio::sync::oneshot::channel::<()>();
    // Closed once the agent and its relay are done: the hosted server's sessions may
    // hold the editor's outbox a while longer (they end on their own).
    let (close_editor_tx, close_editor_rx) = tokio::sync::oneshot::channel::<()>();
    let editor_writer = tokio::spawn(write_raw(editor_rx, editor_out, Some(close_editor_rx)));
    let agent_writer = tokio::spawn(write_raw(agent_rx, agent_in, Some(close_agent_rx)));

    // Editor -> agent.
    let outs = (to_agent.clone(), to_editor.clone());
    let mut editor_reader = tokio::spawn(relay_editor(
        Arc::clone(&relay),
        editor_in,
        outs,
        (max, close_agent_tx),
    ));

    // Agent -> editor (or fsgate).
    let outs = (to_agent.clone(), to_editor.clone());
    let agent_reader = tokio::spawn(relay_agent(Arc::clone(&relay), agent_out, outs, max));

    let (status, killed_after_eof) = wait_agent(waiter, &mut editor_reader, pid).await?;
    // The agent is gone: stop reading the editor, which may keep its end open (its
    // input has nowhere to go), so that the writers below see their channels close.
    editor_reader.abort();
    drain_agent(agent_reader).await;
    // Nobody is asked once the relay ends (a process left in the agent's view may ask
    // while the runtime is being shut down).
    relay.asker.close();
    if let Some(h) = &relay.hosted {
        h.close();
    }
    if let Some(a) = &relay.mcp_over_acp {
        a.close();
    }
    drop(relay);
    let _ = agent_writer.await;
    let _ = close_editor_tx.send(());
    let _ = editor_writer.await;
    Ok(AgentEnd {
        status,
        killed_after_eof,
    })
}

/// Waits for the agent to exit; if the editor left first, gives it a grace period,
/// then kills it. Its status, and whether it was killed.
async fn wait_agent(
    mut waiter: tokio::task::JoinHandle<std::io::Result<std::process::ExitStatus>>,
    editor_reader: &mut tokio::task::JoinHandle<()>,
    pid: u32,
) -> std::io::Result<(std::process::ExitStatus, bool)> {
    Ok(tokio::select! {
        s = &mut waiter => (s.map_err(std::io::Error::other)??, false),
        _ = wait_editor_then_grace(editor_reader) => {
            tracing::info!("editor closed stdin; agent did not exit within {GRACE:?}; killing it");
            kill(pid);
            (waiter.await.map_err(std::io::Error::other)??, true)
        }
    })
}

/// Editor -> agent: each line the editor writes, until it closes fsgate's stdin; then
/// the agent's stdin is closed once it has what it waits for (at most [`GRACE`] later).
async fn relay_editor<EI: AsyncRead + Unpin>(
    r: Arc<Relay>,
    editor_in: EI,
    (to_agent, to_editor): (Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    (max, close_agent): (usize, tokio::sync::oneshot::Sender<()>),
) {
    let mut reader = BufReader::new(editor_in);
    loop {
        match read_line(&mut reader, max).await {
            Ok(Line::Message(raw)) => {
                if raw.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match r.editor_message(raw) {
                    Routed::Agent(bytes) => {
                        if !to_agent.send_bytes(bytes).await {
                            break;
                        }
                    }
                    // A session request fsgate refuses itself (a directory it does not serve).
                    Routed::Editor(bytes) => {
                        let _ = to_editor.send_bytes(bytes).await;
                    }
                    Routed::Taken => {}
                }
            }
            Ok(Line::TooLong { len }) => {
                let msg = format!("message of {len} bytes exceeds the limit of {max} bytes");
                let err = jsonrpc::error_object(code::INVALID_REQUEST, &msg, None);
                let reply = line_of(&jsonrpc::error_response(&Value::Null, err));
                let _ = to_editor.send_bytes(reply).await;
            }
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    // The editor is gone: nobody can answer a question, and the agent's stdin is closed
    // so it can end gracefully, once it has what it waits for.
    r.asker.close();
    r.owed.wait_settled(GRACE).await;
    let _ = close_agent.send(());
    // Its sessions of the hosted server end with it: an open stream there (Gemini CLI's
    // MCP client keeps one) would keep an agent alive that otherwise ends on EOF.
    if let Some(h) = &r.hosted {
        h.close();
    }
}

/// Relays what the agent wrote before it exited; a process it left behind may hold its
/// stdout open (ended with the agent's tree afterwards), so at most [`DRAIN`].
async fn drain_agent(mut agent_reader: tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(DRAIN, &mut agent_reader)
        .await
        .is_err()
    {
        tracing::info!(
            "the agent exited; its stdout is still open after {DRAIN:?}: not read further"
        );
        agent_reader.abort();
    }
}

async fn wait_editor_then_grace(editor_reader: &mut tokio::task::JoinHandle<()>) {
    let _ = editor_reader.await;
    tokio::time::sleep(GRACE).await;
}
