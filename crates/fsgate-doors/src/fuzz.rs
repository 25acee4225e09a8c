//! Entry points for the fuzz targets (feature `fuzzing` only, never in `fsgate`): the
//! proxy's handling of the editor's answer to fsgate's `session/request_permission`,
//! which is private to the crate. The MCP door's are in `mcp::fuzz`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::acp_ask::{self, EditorAsker};
use crate::outbox::Outbox;
use fsgate_gateway::ask::{Answer, Asker, Question};

/// What one question to the editor came to.
#[derive(Debug)]
pub struct PermissionRound {
    /// The `session/request_permission` request fsgate wrote.
    pub request: Value,
    /// Whether the proxy took the editor's line as the answer to a question of fsgate's.
    pub taken: bool,
    /// The answer the asking request got.
    pub answer: Answer,
}

fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .ok()
    })
    .as_ref()
}

/// Puts `q` to the editor through the proxy's asker, then routes `reply` (one line from
/// the editor, each `@ID` in it replaced by the question's id) as the proxy routes the
/// editor's lines; then the editor closes, so a question the line did not settle ends
/// unanswered. None if the runtime or the request could not be had.
pub fn permission_round(q: &Question, reply: &[u8]) -> Option<PermissionRound> {
    let rt = runtime()?;
    let (out, mut rx) = Outbox::<Vec<u8>>::new(1 << 20);
    let asker = Arc::new(EditorAsker::new(out, rt.handle().clone()));
    let (a2, q2) = (Arc::clone(&asker), q.clone());
    // As a request asks: from a blocking-pool thread of the runtime.
    let asking = rt.spawn_blocking(move || a2.ask(&q2, Duration::from_secs(60)));
    let sent = rt.block_on(rx.recv()).map(|m| m.msg);
    let request = sent.and_then(|s| serde_json::from_slice::<Value>(&s).ok());
    let id = request
        .as_ref()
        .and_then(|r| r["id"].as_str())
        .unwrap_or("");
    let line = replace_all(reply, b"@ID", id.as_bytes());
    let mut taken = false;
    if let Ok(v) = serde_json::from_slice::<Value>(&line)
        && let Some(id) = acp_ask::answer_id(&v)
    {
        asker.take_response(id, &v);
        taken = true;
    }
    asker.close();
    let answer = rt.block_on(asking).ok()?;
    Some(PermissionRound {
        request: request?,
        taken,
        answer,
    })
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(i) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(to);
        rest = &rest[i + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}
