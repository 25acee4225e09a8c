//! The session a request names: its door found (or opened, or the principal's stateless
//! one), its stream of server messages (`GET`), its end (`DELETE`); a session whose
//! `initialize` failed forgotten.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::{HeaderMap, StatusCode, header};

use super::body::Reply;
use super::connection::{ConnInfo, identity};
use super::refusal::Refusal;

use super::server::Server;
use super::session::{McpSession, Principal};

use fsgate_gateway::Request as GwRequest;

use super::headers::{Accepts, SESSION_HEADER};
use super::reply::{Resp, ctx_for, events, status_only};

/// The door a message goes to: its session's (by `Mcp-Session-Id`), a new session's
/// (an `initialize`), else the principal's stateless door. True: a new session.
pub(super) fn door_for(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
    headers: &HeaderMap,
    initialize: bool,
) -> Result<(Arc<McpSession>, bool), Refusal> {
    if let Some(sid) = headers.get(SESSION_HEADER) {
        let sid = sid.to_str().unwrap_or_default();
        return session(server, p, sid).map(|s| (s, false));
    }
    if initialize {
        return open_session(server, conn, p).map(|s| (s, true));
    }
    Ok((stateless(server, conn, p), false))
}

/// The session `sid` of `p`, or the 404 that tells its client to start anew.
pub(super) fn session(
    server: &Server,
    p: &Arc<Principal>,
    sid: &str,
) -> Result<Arc<McpSession>, Refusal> {
    let sessions = server.sessions.lock().unwrap_or_else(|e| e.into_inner());
    match sessions.get(sid) {
        Some(s) if Arc::ptr_eq(&s.principal, p) && !s.has_ended() => {
            s.touch();
            Ok(Arc::clone(s))
        }
        _ => Err(Refusal::http(
            StatusCode::NOT_FOUND,
            "http-session",
            "unknown session (it ended, or never was): start a new one with initialize",
        )),
    }
}

/// A new 2025-era session for `p`, within the server's and the principal's bounds.
pub(super) fn open_session(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
) -> Result<Arc<McpSession>, Refusal> {
    let full = || {
        Refusal::http(
            StatusCode::SERVICE_UNAVAILABLE,
            "http-sessions",
            "too many sessions",
        )
    };
    let mut sessions = server.sessions.lock().unwrap_or_else(|e| e.into_inner());
    if sessions.len() >= server.limits.max_sessions {
        return Err(full());
    }
    if p.sessions.fetch_add(1, Ordering::AcqRel) >= p.max_sessions {
        p.sessions.fetch_sub(1, Ordering::AcqRel);
        return Err(full());
    }
    let sid = super::auth::secret()
        .map_err(|e| Refusal::http(StatusCode::INTERNAL_SERVER_ERROR, "http-session", e))?;
    let who = identity(server, conn, p);
    let s = McpSession::start(
        Arc::clone(&server.gw),
        who,
        (Some(sid.clone()), Arc::clone(p)),
        Arc::clone(&server.room),
        server.limits.max_in_flight,
    );
    sessions.insert(sid, Arc::clone(&s));
    Ok(s)
}

/// The principal's stateless door, started on first use.
pub(super) fn stateless(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
) -> Arc<McpSession> {
    let mut door = p.stateless.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = door.as_ref().filter(|d| !d.has_ended()) {
        d.touch();
        return Arc::clone(d);
    }
    let d = McpSession::start(
        Arc::clone(&server.gw),
        identity(server, conn, p),
        (None, Arc::clone(p)),
        Arc::clone(&server.room),
        server.limits.max_in_flight,
    );
    *door = Some(Arc::clone(&d));
    d
}

/// A session whose `initialize` failed is not kept.
pub(super) fn forget(server: &Server, door: &Arc<McpSession>) {
    if let Some(id) = &door.id {
        let removed = server
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if removed.is_some() {
            door.principal.sessions.fetch_sub(1, Ordering::AcqRel);
        }
    }
    door.end();
}

/// `GET`: the session's stream of server messages.
pub(super) fn stream(
    server: &Server,
    p: &Arc<Principal>,
    headers: &HeaderMap,
) -> Result<Resp, Refusal> {
    let Some(sid) = headers.get(SESSION_HEADER) else {
        return Err(Refusal::http(
            StatusCode::METHOD_NOT_ALLOWED,
            "http-method",
            "a stream belongs to a session: send Mcp-Session-Id (the stateless wire has none)",
        ));
    };
    if !Accepts::of(headers).events || headers.get(header::ACCEPT).is_none() {
        return Err(Refusal::http(
            StatusCode::NOT_ACCEPTABLE,
            "http-accept",
            "accept text/event-stream",
        ));
    }
    let s = session(server, p, sid.to_str().unwrap_or_default())?;
    let Some(rx) = s.router.open_stream() else {
        return Err(Refusal::http(
            StatusCode::CONFLICT,
            "http-stream",
            "this session's stream is open already",
        ));
    };
    Ok(events(Reply::Events {
        first: None,
        rx,
        ends: false,
        done: false,
        ping: Some(Box::pin(tokio::time::interval_at(
            tokio::time::Instant::now() + super::body::PING,
            super::body::PING,
        ))),
        _keep: None,
    }))
}

/// `DELETE`: ends the session.
pub(super) async fn delete(
    server: &Arc<Server>,
    conn: &ConnInfo,
    p: &Arc<Principal>,
    headers: &HeaderMap,
) -> Result<Resp, Refusal> {
    let Some(sid) = headers.get(SESSION_HEADER) else {
        return Err(Refusal::http(
            StatusCode::METHOD_NOT_ALLOWED,
            "http-method",
            "DELETE ends a session: send Mcp-Session-Id",
        ));
    };
    let s = session(server, p, sid.to_str().unwrap_or_default())?;
    forget(server, &s);
    let ctx = ctx_for(server, conn, Some(p), Some(s.name.clone()));
    let gw = Arc::clone(&server.gw);
    let _ = tokio::task::spawn_blocking(move || {
        gw.serve(
            &ctx,
            GwRequest::message("session/delete", Ok(())),
            fsgate_gateway::How::alone(),
        )
        .0
    })
    .await;
    Ok(status_only(StatusCode::NO_CONTENT))
}
