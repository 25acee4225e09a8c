//! Agent -> editor (or fsgate): each line the agent writes classified, its file and
//! terminal requests served or refused, MCP-over-ACP taken, the rest relayed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::io::BufReader;

use super::line::{line_of, with_newline};
use super::state::Relay;
use crate::acp;
use crate::hosted_acp::Taken;
use crate::jsonrpc::{self, Incoming};
use crate::lines::{Line, read_line};
use crate::outbox::Outbox;
use crate::relay::{self, Relay as Verdict};
use fsgate_base::error::code;
use fsgate_gateway::Request;

/// Agent -> editor (or fsgate): each line the agent writes, until it closes its stdout;
/// then waits for the file requests being served.
pub(super) async fn relay_agent(
    r: Arc<Relay>,
    agent_out: tokio::process::ChildStdout,
    outs: (Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    max: usize,
) {
    let mut reader = BufReader::new(agent_out);
    let mut handlers = tokio::task::JoinSet::new();
    // At most this many of the agent's file requests are served at once; reading the
    // agent pauses while all slots are taken.
    let slots = Arc::new(tokio::sync::Semaphore::new(acp::MAX_IN_FLIGHT));
    loop {
        let raw = match read_line(&mut reader, max).await {
            Ok(Line::Message(raw)) => raw,
            Ok(Line::TooLong { len }) => {
                tracing::warn!("agent sent a message of {len} bytes, over the limit; dropped");
                continue;
            }
            Ok(Line::Eof) | Err(_) => break,
        };
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !agent_line(&r, raw, &outs, (&slots, &mut handlers)).await {
            break;
        }
    }
    while handlers.join_next().await.is_some() {}
}

/// One line of the agent's: served, relayed or refused. False: stop reading.
pub(super) async fn agent_line(
    r: &Arc<Relay>,
    raw: Vec<u8>,
    (to_agent, to_editor): &(Outbox<Vec<u8>>, Outbox<Vec<u8>>),
    (slots, handlers): (&Arc<tokio::sync::Semaphore>, &mut tokio::task::JoinSet<()>),
) -> bool {
    match relay::classify_agent_line(&raw) {
        Verdict::Serve { id, method, params } => {
            let Ok(permit) = Arc::clone(slots).acquire_owned().await else {
                return false;
            };
            r.owed.owe();
            let to_agent = to_agent.clone();
            handlers.spawn(serve_file(
                Arc::clone(r),
                to_agent,
                permit,
                id,
                method,
                params,
            ));
        }
        Verdict::Terminal { id, method, params } => {
            r.owed.owe();
            let (allowed, reply) = terminal(r, id, method, params).await;
            if let Some(reply) = reply {
                let _ = to_agent.send_bytes(line_of(&reply)).await;
            }
            r.owed.replied();
            if allowed {
                let _ = to_editor.send_bytes(with_newline(raw)).await;
            }
        }
        Verdict::Forward(Incoming::Response { id, message }) => {
            if let Some(a) = &r.mcp_over_acp
                && a.response(&id, &message).await
            {
                return true;
            }
            r.owed.answered(&id);
            r.note_response(&id, &message);
            let bytes = r.stamp_initialize(&id, message, raw);
            let _ = to_editor.send_bytes(bytes).await;
        }
        Verdict::Forward(msg) => match take_mcp_message(r, &msg).await {
            Some(reply) => {
                if let Some(reply) = reply {
                    let _ = to_agent.send_bytes(line_of(&reply)).await;
                }
            }
            None => {
                let _ = to_editor.send_bytes(with_newline(raw)).await;
            }
        },
        Verdict::Refuse(refusal) => {
            // Lenient editors would serve what this line may be read as.
            tracing::warn!(name = ?refusal.name, "agent sent a line that is not exactly one unambiguous message; not relayed");
            r.owed.owe();
            let r2 = Arc::clone(r);
            let replies = tokio::task::spawn_blocking(move || r2.refuse_line(&refusal))
                .await
                .unwrap_or_default();
            for reply in replies {
                let _ = to_agent.send_bytes(line_of(&reply)).await;
            }
            r.owed.replied();
        }
    }
    true
}

/// An `mcp/*` message of the agent's for the hosted server (MCP-over-ACP): Some(the
/// reply to send it, if any) when fsgate took it, None to relay it.
pub(super) async fn take_mcp_message(r: &Arc<Relay>, msg: &Incoming) -> Option<Option<Value>> {
    let a = r.mcp_over_acp.as_ref()?;
    let (id, method, params) = match msg {
        Incoming::Request { id, method, params } => (Some(id), method, params),
        Incoming::Notification { method, params } => (None, method, params),
        _ => return None,
    };
    if !method.starts_with("mcp/") {
        return None;
    }
    match a.request(id, method, params).await {
        Taken::Relay => None,
        Taken::Reply(reply) => Some(reply),
    }
}

/// Answers one of the agent's file requests (fsgate serves it; the editor never sees it).
pub(super) async fn serve_file(
    r: Arc<Relay>,
    to_agent: Outbox<Vec<u8>>,
    permit: tokio::sync::OwnedSemaphorePermit,
    id: Value,
    method: String,
    params: Value,
) {
    // Kept for the error reply: a null id would leave the agent's request pending forever.
    let id2 = id.clone();
    let r2 = Arc::clone(&r);
    let (resp, lease) = tokio::task::spawn_blocking(move || match r.session_refusal(&params) {
        Some(err) => (r.refuse(&id, &method, &params, err), Vec::new()),
        None if method.starts_with("fs/") && r.acp_version.load(Ordering::Acquire) >= 2 => {
            let msg = format!(
                "{method} is not part of ACP protocol version 2: use the MCP server `{}` listed in the session",
                crate::hosted::SERVER_NAME
            );
            let err = jsonrpc::error_object(code::METHOD_NOT_FOUND, &msg, None);
            (r.refuse(&id, &method, &params, err), Vec::new())
        }
        None => {
            let ctx = r.file_ctx(&params);
            acp::answer_in(&r.gw, &ctx, acp::AcpRequest { id, method, params })
        }
    })
    .await
    .unwrap_or_else(|_| {
        let err =
            jsonrpc::error_object(code::INTERNAL, "internal error: request task failed", None);
        (jsonrpc::error_response(&id2, err), Vec::new())
    });
    let _ = to_agent.send_bytes(line_of(&resp)).await;
    r2.owed.replied();
    drop(lease);
    drop(permit);
}

/// A `terminal/*` request or notification: audited either way; relayed only if the
/// policy allows terminals. Returns whether to relay it, and the reply to the agent.
pub(super) async fn terminal(
    r: &Arc<Relay>,
    id: Option<Value>,
    method: String,
    params: Value,
) -> (bool, Option<Value>) {
    let r2 = Arc::clone(r);
    tokio::task::spawn_blocking(move || {
        if r2.allow_terminal {
            let served = r2
                .gw
                .serve(
                    &r2.ctx(&params),
                    Request::message(method.as_str(), Ok(())),
                    fsgate_gateway::How::alone(),
                )
                .0;
            match (served, id) {
                (Ok(_), _) => (true, None),
                (Err(e), Some(id)) => (false, Some(jsonrpc::error_response(&id, e.to_rpc_error()))),
                (Err(_), None) => (false, None),
            }
        } else {
            let reason = "terminal access is not allowed by the policy ([acp] allow_terminal)";
            let err = jsonrpc::error_object(
                code::REFUSED,
                &format!("refused: {reason} (rule acp.allow_terminal)"),
                Some(json!({"reason": reason, "rule": "acp.allow_terminal", "path": Value::Null})),
            );
            let reply = r2.refuse(&id.clone().unwrap_or(Value::Null), &method, &params, err);
            (false, id.map(|_| reply))
        }
    })
    .await
    .unwrap_or((false, None))
}
