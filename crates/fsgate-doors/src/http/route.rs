//! One HTTP request to the MCP endpoint: checked (path, Host, Origin, token), then a
//! POST hands its one JSON-RPC message to a session's door and answers with the door's
//! answer (JSON, or server-sent events when the server has something to say first),
//! a GET opens a session's stream, a DELETE ends a session. Whatever is refused here
//! is recorded here; whatever reaches a door is recorded by the door.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, StatusCode};

use hyper::body::Incoming;

use super::auth::{no_token, presented};

use super::connection::ConnInfo;
use super::refusal::Refusal;

use super::server::{PATH, Server};
use super::session::Principal;
use crate::mcp::{InputLine, classify_line};

use super::doors::{delete, stream};
use super::exchange::{notify, request};
use super::headers::Accepts;
use super::message::read_message;
use super::reply::{Resp, refuse, what};

/// Answers one request.
pub(crate) async fn handle(
    server: Arc<Server>,
    conn: Arc<ConnInfo>,
    req: Request<Incoming>,
) -> Result<Resp, Infallible> {
    let resp = match admit(&server, &conn, &req) {
        Err(r) => refuse(&server, &conn, None, what("http-request"), r).await,
        Ok(p) => dispatch(server, conn, p, req).await,
    };
    Ok(resp)
}

/// Path, Host, Origin, token, and a counted connection: the principal, or the refusal.
fn admit(
    server: &Server,
    conn: &ConnInfo,
    req: &Request<Incoming>,
) -> Result<Arc<Principal>, Refusal> {
    let path = req.uri().path();
    if path != PATH && !(server.bridge && path == super::bridge::PATH) {
        return Err(Refusal::http(
            StatusCode::NOT_FOUND,
            "http-path",
            format!("no such path: MCP is served at {PATH}"),
        ));
    }
    if req.uri().authority().is_some() {
        // `GET http://other/...`: its host is the URI's, which no check below reads.
        let reason = "an absolute request target: send the path, and the host in Host";
        return Err(Refusal::http(StatusCode::BAD_REQUEST, "http-host", reason));
    }
    server.site.check(req.headers())?;
    let token = presented(req.headers(), req.uri().query());
    let principal = token.as_deref().and_then(|t| server.keys.find(t));
    let principal = principal.ok_or_else(|| no_token(token.is_some()))?;
    conn.authenticated()?;
    Ok(principal)
}

async fn dispatch(
    server: Arc<Server>,
    conn: Arc<ConnInfo>,
    p: Arc<Principal>,
    req: Request<Incoming>,
) -> Resp {
    let bridge = req.uri().path() == super::bridge::PATH;
    let outcome = match (req.method().clone(), bridge) {
        (Method::GET, true) => super::bridge::upgrade(&server, &conn, &p, req),
        (Method::POST, false) => return post(server, conn, p, req).await,
        (Method::GET, false) => stream(&server, &p, req.headers()),
        (Method::DELETE, false) => delete(&server, &conn, &p, req.headers()).await,
        _ => Err(Refusal::http(
            StatusCode::METHOD_NOT_ALLOWED,
            "http-method",
            "use POST (a message), GET (a session's stream) or DELETE (end a session)",
        )),
    };
    match outcome {
        Ok(resp) => resp,
        Err(r) => refuse(&server, &conn, Some(&p), what("http-request"), r).await,
    }
}

async fn post(
    server: Arc<Server>,
    conn: Arc<ConnInfo>,
    p: Arc<Principal>,
    req: Request<Incoming>,
) -> Resp {
    let (parts, body) = req.into_parts();
    let line = match read_message(&server, &parts.headers, body).await {
        Ok(line) => line,
        Err((r, name)) => return refuse(&server, &conn, Some(&p), what(name), r).await,
    };
    let accepts = Accepts::of(&parts.headers);
    let outcome = match classify_line(&line) {
        InputLine::Skip => Err((
            Refusal::http(
                StatusCode::BAD_REQUEST,
                "http-body",
                "an empty body: POST one JSON-RPC message",
            ),
            what("invalid-message"),
        )),
        InputLine::Refuse(name, id, (c, message)) => {
            // As the door's input pump would: recorded under its name, no rule.
            let refusal = Refusal {
                status: StatusCode::BAD_REQUEST,
                code: c,
                rule: "",
                reason: message,
                data: None,
            };
            Err((refusal, (name, id)))
        }
        InputLine::Request { key, method, .. } => {
            return request(
                &server,
                &conn,
                &p,
                (&parts.headers, accepts),
                (line, key, method),
            )
            .await;
        }
        InputLine::Pass(_) => notify(&server, &conn, &p, &parts.headers, line, None).await,
        InputLine::Cancel(key) => notify(&server, &conn, &p, &parts.headers, line, key).await,
    };
    match outcome {
        Ok(resp) => resp,
        Err((r, what)) => refuse(&server, &conn, Some(&p), what, r).await,
    }
}
