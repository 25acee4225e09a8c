//! The HTTP answers the endpoint builds: a refusal recorded and answered, a stateless
//! answer's status, JSON, events, and the context of what the endpoint records itself.

use std::sync::Arc;

use http::{HeaderValue, Response, StatusCode, header};

use serde_json::{Value, json};

use super::body::Reply;
use super::connection::ConnInfo;
use super::refusal::Refusal;

use super::server::Server;
use super::session::Principal;

use fsgate_base::error::code;
use fsgate_gateway::Request as GwRequest;
use fsgate_gateway::ops::{PathStyle, RequestCtx};

pub(super) type Resp = Response<Reply>;

/// A record's name, with no request id.
pub(super) fn what(name: &str) -> (String, Value) {
    (name.to_owned(), Value::Null)
}

/// The HTTP status of a stateless answer: its error's, as the 2026-07-28 wire maps them.
pub(super) fn status_of(answer: &[u8]) -> StatusCode {
    match error_code(answer) {
        Some(code::PARSE_ERROR | code::INVALID_REQUEST | code::INVALID_PARAMS) => {
            StatusCode::BAD_REQUEST
        }
        Some(code::HEADER_MISMATCH | code::UNSUPPORTED_PROTOCOL_VERSION) => StatusCode::BAD_REQUEST,
        Some(-32021) => StatusCode::BAD_REQUEST,
        Some(code::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

pub(super) fn error_code(answer: &[u8]) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct E {
        code: i64,
    }
    #[derive(serde::Deserialize)]
    struct A {
        #[serde(default)]
        error: Option<E>,
    }
    serde_json::from_slice::<A>(answer)
        .ok()?
        .error
        .map(|e| e.code)
}

pub(super) fn is_error(answer: &[u8]) -> bool {
    error_code(answer).is_some()
}

/// The answer when the door ended before answering.
pub(super) fn ended(id: &Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code::INTERNAL, "message": "the session ended before answering"}});
    json_response(StatusCode::OK, Reply::text(body.to_string()))
}

/// Records a refusal (as its own request: the door never saw it) and answers it.
pub(super) async fn refuse(
    server: &Server,
    conn: &ConnInfo,
    p: Option<&Arc<Principal>>,
    (name, id): (String, Value),
    r: Refusal,
) -> Resp {
    tracing::debug!(peer = %conn.peer, status = r.status.as_u16(), rule = r.rule, "http: refused: {}", r.reason);
    let ctx = ctx_for(server, conn, p, None);
    let gw = Arc::clone(&server.gw);
    let outcome = (r.code, format!("HTTP {}: {}", r.status.as_u16(), r.reason));
    let request = match r.rule {
        "" => GwRequest::message(name, Err(outcome)),
        rule => GwRequest::refusal(name, rule, outcome),
    };
    let recorded = tokio::task::spawn_blocking(move || {
        gw.serve(&ctx, request, fsgate_gateway::How::alone()).0
    })
    .await;
    let mut error = json!({"code": r.code, "message": r.reason});
    if let Some(d) = r.data {
        error["data"] = d;
    }
    if let Ok(Err(e)) = recorded {
        error = e.to_rpc_error();
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
    let mut resp = json_response(r.status, Reply::text(body));
    if r.status == StatusCode::UNAUTHORIZED {
        set(&mut resp, header::WWW_AUTHENTICATE.as_str(), "Bearer");
    }
    if r.status == StatusCode::METHOD_NOT_ALLOWED {
        set(&mut resp, header::ALLOW.as_str(), "GET, POST, DELETE");
    }
    resp
}

/// The request context of what this server records itself.
pub(super) fn ctx_for(
    server: &Server,
    conn: &ConnInfo,
    p: Option<&Arc<Principal>>,
    session: Option<String>,
) -> RequestCtx {
    let session = session
        .or_else(|| p.and_then(|p| p.session()))
        .unwrap_or_else(|| conn.label.clone());
    RequestCtx {
        style: PathStyle::AbsoluteOrRelative,
        session,
        door: p.map_or(server.door, |p| p.door),
        peer: conn.peer.to_string(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    }
}

pub(super) fn json_response(status: StatusCode, body: Reply) -> Resp {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn events(body: Reply) -> Resp {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    resp
}

pub(super) fn status_only(status: StatusCode) -> Resp {
    let mut resp = Response::new(Reply::Empty);
    *resp.status_mut() = status;
    resp
}

pub(super) fn set(resp: &mut Resp, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateless_errors_take_the_wire_s_statuses() {
        let e = |c: i64| {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{{\"code\":{c},\"message\":\"m\"}}}}")
        };
        assert_eq!(status_of(e(-32601).as_bytes()), StatusCode::NOT_FOUND);
        assert_eq!(status_of(e(-32602).as_bytes()), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(e(-32003).as_bytes()), StatusCode::OK);
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }
}
