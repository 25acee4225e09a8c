//! A POSTed message handed to its door: a request answered with the door's answer
//! (JSON, or server-sent events when the server has something to say first), a
//! notification or a client's response handed on.

use std::sync::Arc;

use http::{HeaderMap, StatusCode};

use serde_json::Value;

use super::body::Out;
use super::body::{Reply, held};
use super::connection::ConnInfo;
use super::refusal::Refusal;

use super::server::Server;
use super::session::{McpSession, Principal};

use super::doors::{door_for, forget};
use super::headers::{Accepts, Era, SESSION_HEADER, era, routing_headers};
use super::message::{cancelling_ours, under_our_id};
use super::reply::{
    Resp, ended, events, is_error, json_response, refuse, set, status_of, status_only, what,
};

/// A request: handed to its door under this side's id, answered with the door's answer.
pub(super) async fn request(
    server: &Arc<Server>,
    conn: &Arc<ConnInfo>,
    p: &Arc<Principal>,
    (headers, accepts): (&HeaderMap, Accepts),
    (line, key, method): (Vec<u8>, String, String),
) -> Resp {
    let id: Value = serde_json::from_str(&key).unwrap_or(Value::Null);
    let what = (method.clone(), id.clone());
    let checked = era(headers).and_then(|e| routing_headers(headers, e, &line).map(|()| e));
    let era = match checked {
        Ok(e) => e,
        Err(r) => return refuse(server, conn, Some(p), what, r).await,
    };
    if !accepts.json && !accepts.events {
        let r = Refusal::http(
            StatusCode::NOT_ACCEPTABLE,
            "http-accept",
            "accept application/json or text/event-stream",
        );
        return refuse(server, conn, Some(p), what, r).await;
    }
    let (door, new) = match door_for(server, conn, p, headers, method == "initialize") {
        Ok(d) => d,
        Err(r) => return refuse(server, conn, Some(p), what, r).await,
    };
    let modern = era == Era::Modern || door.id.is_none();
    let Ok(permit) = Arc::clone(&door.slots).acquire_owned().await else {
        return ended(&id);
    };
    let (ticket, mut rx) = door.router.enter(&key, accepts.events);
    let line = under_our_id(line, ticket.id);
    if door.send(&line).await.is_err() {
        return ended(&id);
    }
    let first = rx.recv().await;
    let resp = match first {
        None => return ended(&id),
        Some(Out::Answer(answer, share)) => {
            drop(permit);
            let resp = answered(server, &door, (answer, share), (modern, new));
            drop(ticket);
            return resp;
        }
        Some(first @ Out::Message(..)) => {
            let keep: Box<dyn Send + Sync> = Box::new((ticket, permit));
            events(Reply::Events {
                first: Some(first),
                rx,
                ends: true,
                done: false,
                ping: None,
                _keep: Some(keep),
            })
        }
    };
    let mut resp = resp;
    if new {
        set(
            &mut resp,
            SESSION_HEADER,
            door.id.as_deref().unwrap_or_default(),
        );
    }
    resp
}

/// A request answered at once, as JSON: its status (the error's under the modern
/// wire), and a new session's id unless its `initialize` failed (then the session is
/// forgotten).
pub(super) fn answered(
    server: &Server,
    door: &Arc<McpSession>,
    (answer, share): (Vec<u8>, super::body::Share),
    (modern, new): (bool, bool),
) -> Resp {
    let status = if modern {
        status_of(&answer)
    } else {
        StatusCode::OK
    };
    let failed = new && is_error(&answer);
    let mut resp = json_response(status, Reply::bytes(held(answer, share)));
    if new && !failed {
        set(
            &mut resp,
            SESSION_HEADER,
            door.id.as_deref().unwrap_or_default(),
        );
    }
    if failed {
        forget(server, door);
    }
    resp
}

/// A notification or a client's response: handed to its door; 202.
pub(super) async fn notify(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
    headers: &HeaderMap,
    line: Vec<u8>,
    cancels: Option<String>,
) -> Result<Resp, (Refusal, (String, Value))> {
    let (door, _) =
        door_for(server, conn, p, headers, false).map_err(|r| (r, what("http-request")))?;
    let line = match cancels.and_then(|k| door.router.ours(&k)) {
        Some(ours) => cancelling_ours(line, ours),
        None => line,
    };
    if door.send(&line).await.is_err() {
        let r = Refusal::http(StatusCode::NOT_FOUND, "http-session", "the session ended");
        return Err((r, what("http-request")));
    }
    Ok(status_only(StatusCode::ACCEPTED))
}
