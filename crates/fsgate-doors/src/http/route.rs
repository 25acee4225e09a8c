//! One HTTP request to the MCP endpoint: checked (path, Host, Origin, token), then a
//! POST hands its one JSON-RPC message to a session's door and answers with the door's
//! answer (JSON, or server-sent events when the server has something to say first),
//! a GET opens a session's stream, a DELETE ends a session. Whatever is refused here
//! is recorded here; whatever reaches a door is recorded by the door.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::auth::{no_token, presented};
use super::body::Out;
use super::body::{Reply, held};
use super::connection::{ConnInfo, identity};
use super::refusal::Refusal;
use super::router::{id_span, request_id_span, splice};
use super::server::{HANDSHAKE_VERSIONS, MODERN_VERSIONS, PATH, Server};
use super::session::{McpSession, Principal};
use crate::mcp::{InputLine, classify_line};
use fsgate_base::error::code;
use fsgate_gateway::How;
use fsgate_gateway::Request as GwRequest;
use fsgate_gateway::ops::{PathStyle, RequestCtx};

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header.
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The 2026-07-28 wire's method header.
const METHOD_HEADER: &str = "mcp-method";
/// The 2026-07-28 wire's name header (a tool's or prompt's name, a resource's URI).
const NAME_HEADER: &str = "mcp-name";

type Resp = Response<Reply>;

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

/// A record's name, with no request id.
fn what(name: &str) -> (String, Value) {
    (name.to_owned(), Value::Null)
}

/// What the client takes as an answer.
#[derive(Debug, Clone, Copy)]
struct Accepts {
    json: bool,
    events: bool,
}

impl Accepts {
    fn of(headers: &HeaderMap) -> Accepts {
        let Some(v) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
            return Accepts {
                json: true,
                events: false,
            };
        };
        let v = v.to_ascii_lowercase();
        let any = v.contains("*/*");
        Accepts {
            json: any || v.contains("application/json") || v.contains("application/*"),
            events: any || v.contains("text/event-stream") || v.contains("text/*"),
        }
    }
}

/// The protocol era a POST names in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    /// No header, or a handshake-era version.
    Handshake,
    /// 2026-07-28: stateless.
    Modern,
}

fn era(headers: &HeaderMap) -> Result<Era, Refusal> {
    let Some(v) = headers.get(VERSION_HEADER) else {
        return Ok(Era::Handshake);
    };
    let v = v.to_str().unwrap_or_default().trim();
    if MODERN_VERSIONS.contains(&v) {
        return Ok(Era::Modern);
    }
    if HANDSHAKE_VERSIONS.contains(&v) {
        return Ok(Era::Handshake);
    }
    let supported: Vec<&str> = HANDSHAKE_VERSIONS
        .iter()
        .chain(&MODERN_VERSIONS)
        .copied()
        .collect();
    let mut r = Refusal::http(
        StatusCode::BAD_REQUEST,
        "http-protocol-version",
        format!(
            "unsupported protocol version {:?}",
            fsgate_base::text::Esc(v).to_string()
        ),
    );
    r.code = code::UNSUPPORTED_PROTOCOL_VERSION;
    r.data = Some(json!({"supported": supported, "requested": v}));
    Err(r)
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

/// The body: JSON, within the size limit, in time; as one line (a raw newline in JSON
/// text is whitespace between tokens, so it becomes a space).
async fn read_message(
    server: &Server,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Vec<u8>, (Refusal, &'static str)> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json {
        let r = Refusal::http(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http-content-type",
            "send Content-Type: application/json",
        );
        return Err((r, "http-request"));
    }
    let max = server.limits.max_message;
    let too_big = |n: String| {
        let r = Refusal::http(
            StatusCode::PAYLOAD_TOO_LARGE,
            "limits.max_message_bytes",
            format!(
                "message of {n} bytes exceeds the limit of {max} bytes (rule limits.max_message_bytes); it was discarded"
            ),
        );
        (r, "oversized-message")
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > max as u64) {
        return Err(too_big(n.to_string()));
    }
    let limited = http_body_util::Limited::new(body, max);
    let collected = tokio::time::timeout(server.limits.request_timeout, limited.collect()).await;
    let bytes = match collected {
        Err(_) => {
            let r = Refusal::http(
                StatusCode::REQUEST_TIMEOUT,
                "http-timeout",
                "the body did not arrive within [http] request_timeout_ms",
            );
            return Err((r, "http-request"));
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(too_big(format!("more than {max}")));
        }
        Ok(Err(e)) => {
            let r = Refusal::http(
                StatusCode::BAD_REQUEST,
                "http-body",
                format!("cannot read the body: {e}"),
            );
            return Err((r, "http-request"));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    Ok(one_line(bytes.to_vec()))
}

/// A body as one line: a raw newline in JSON text is whitespace between tokens, so it
/// becomes a space.
pub(super) fn one_line(mut body: Vec<u8>) -> Vec<u8> {
    for b in &mut body {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
    body
}

/// The line a door gets for a request `line` the client sent under its own id: the
/// same, under the exchange's id `ours`.
pub(super) fn under_our_id(line: Vec<u8>, ours: u64) -> Vec<u8> {
    match id_span(&line) {
        Some(span) => splice(&line, span, ours.to_string().as_bytes()),
        None => line,
    }
}

/// The line a door gets for a client's cancellation `line` of the request it knows as
/// `ours`.
pub(super) fn cancelling_ours(line: Vec<u8>, ours: u64) -> Vec<u8> {
    match request_id_span(&line) {
        Some(span) => splice(&line, span, ours.to_string().as_bytes()),
        None => line,
    }
}

/// A request: handed to its door under this side's id, answered with the door's answer.
async fn request(
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
fn answered(
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

/// What the 2026-07-28 wire's standard headers repeat of a request's body.
#[derive(serde::Deserialize)]
struct Routed {
    method: String,
    #[serde(default)]
    params: Option<RoutedParams>,
}

#[derive(serde::Deserialize)]
struct RoutedParams {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    uri: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<serde_json::Map<String, Value>>,
}

/// The 2026-07-28 wire's standard headers (SEP-2243) must repeat the body: `Mcp-Method`
/// its method (always sent), `Mcp-Name` the tool or prompt name or resource URI of the
/// methods that name one, `MCP-Protocol-Version` its `_meta` version. Missing or other:
/// 400 and -32020, before the version itself is judged.
fn routing_headers(headers: &HeaderMap, era: Era, line: &[u8]) -> Result<(), Refusal> {
    if era != Era::Modern {
        return Ok(());
    }
    let Ok(body) = serde_json::from_slice::<Routed>(line) else {
        return Ok(()); // The door answers what it cannot read.
    };
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
    if header(METHOD_HEADER) != Some(body.method.as_str()) {
        return Err(mismatch(
            "Mcp-Method header is missing or does not match the request body's method",
        ));
    }
    let params = body.params.as_ref();
    let named = match body.method.as_str() {
        "tools/call" | "prompts/get" => params.and_then(|p| p.name.as_ref()),
        "resources/read" => params.and_then(|p| p.uri.as_ref()),
        _ => None,
    };
    if let Some(Value::String(named)) = named
        && header(NAME_HEADER).map(decoded).as_deref() != Some(named.as_str())
    {
        return Err(mismatch(
            "Mcp-Name header is missing or does not match the request body",
        ));
    }
    let version = params
        .and_then(|p| p.meta.as_ref())
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"));
    if let Some(v) = version
        && v.as_str() != header(VERSION_HEADER)
    {
        return Err(mismatch(
            "MCP-Protocol-Version header does not match the request's _meta protocol version",
        ));
    }
    Ok(())
}

/// A header value as sent, or the text of its `=?base64?...?=` form.
fn decoded(v: &str) -> String {
    use base64::Engine;
    let Some(b64) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return v.to_owned();
    };
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default()
}

fn mismatch(why: &str) -> Refusal {
    let mut r = Refusal::http(StatusCode::BAD_REQUEST, "http-routing-header", why);
    r.code = code::HEADER_MISMATCH;
    r
}

/// The door a message goes to: its session's (by `Mcp-Session-Id`), a new session's
/// (an `initialize`), else the principal's stateless door. True: a new session.
fn door_for(
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
fn session(server: &Server, p: &Arc<Principal>, sid: &str) -> Result<Arc<McpSession>, Refusal> {
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
fn open_session(
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
fn stateless(server: &Arc<Server>, conn: &ConnInfo, p: &Arc<Principal>) -> Arc<McpSession> {
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
fn forget(server: &Server, door: &Arc<McpSession>) {
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

/// A notification or a client's response: handed to its door; 202.
async fn notify(
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

/// `GET`: the session's stream of server messages.
fn stream(server: &Server, p: &Arc<Principal>, headers: &HeaderMap) -> Result<Resp, Refusal> {
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
async fn delete(
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
            How::alone(),
        )
        .0
    })
    .await;
    Ok(status_only(StatusCode::NO_CONTENT))
}

/// The HTTP status of a stateless answer: its error's, as the 2026-07-28 wire maps them.
fn status_of(answer: &[u8]) -> StatusCode {
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

fn error_code(answer: &[u8]) -> Option<i64> {
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

fn is_error(answer: &[u8]) -> bool {
    error_code(answer).is_some()
}

/// The answer when the door ended before answering.
fn ended(id: &Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code::INTERNAL, "message": "the session ended before answering"}});
    json_response(StatusCode::OK, Reply::text(body.to_string()))
}

/// Records a refusal (as its own request: the door never saw it) and answers it.
async fn refuse(
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
    let recorded =
        tokio::task::spawn_blocking(move || gw.serve(&ctx, request, How::alone()).0).await;
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
fn ctx_for(
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

fn json_response(status: StatusCode, body: Reply) -> Resp {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn events(body: Reply) -> Resp {
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

fn status_only(status: StatusCode) -> Resp {
    let mut resp = Response::new(Reply::Empty);
    *resp.status_mut() = status;
    resp
}

fn set(resp: &mut Resp, name: &'static str, value: &str) {
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

    #[test]
    fn eras_come_from_the_version_header() {
        let mut h = HeaderMap::new();
        assert_eq!(era(&h), Ok(Era::Handshake));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        assert_eq!(era(&h), Ok(Era::Modern));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2025-06-18"));
        assert_eq!(era(&h), Ok(Era::Handshake));
        h.insert(VERSION_HEADER, HeaderValue::from_static("1999-01-01"));
        let r = era(&h).expect_err("unknown version");
        assert_eq!(r.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn accept_headers() {
        let mut h = HeaderMap::new();
        let a = Accepts::of(&h);
        assert!(a.json && !a.events);
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let a = Accepts::of(&h);
        assert!(a.json && a.events);
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let a = Accepts::of(&h);
        assert!(!a.json && !a.events);
    }
}
