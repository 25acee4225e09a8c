//! What an upgrade request earns: checked (Host, Origin, token), an authenticated
//! slot, the subscription and whether the client answers questions; or the refusal,
//! answered and recorded.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request};
use tokio_tungstenite::tungstenite::http::{self, StatusCode, header};

use super::auth::{self, Gatekeeper};

use fsgate_gateway::Request as GwRequest;
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_gateway::{DoorSpec, Gateway};

/// What the upgrade request earned: an authenticated slot and the subscription asked
/// for, or the refusal.
#[derive(Default)]
pub(super) struct Admission {
    pub(super) slot: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(super) subscribe: Option<String>,
    /// `?permissions=off`: the client will not answer `permission` questions.
    pub(super) unaskable: bool,
    pub(super) refusal: Option<auth::Refusal>,
}

/// Whether the upgrade URL says the client answers no `permission` questions
/// (`?permissions=off`): its requests that meet an ask rule are refused at once.
pub(super) fn declines_questions(query: Option<&str>) -> bool {
    auth::query_param(query, "permissions")
        .last()
        .is_some_and(|v| matches!(v.as_str(), "off" | "no" | "false" | "0"))
}

/// Checks an upgrade request (Host, Origin, token), then takes an authenticated slot:
/// only a request that passed the checks can take one.
pub(super) fn admit(
    keeper: &Gatekeeper,
    connections: &Arc<Semaphore>,
    req: &Request,
) -> Result<(tokio::sync::OwnedSemaphorePermit, Option<String>), auth::Refusal> {
    if req.uri().authority().is_some() {
        // `GET http://other/...`: its host is the URI's, which no check below reads.
        return Err(auth::Refusal {
            status: StatusCode::BAD_REQUEST,
            reason: "an absolute request target: send the path, and the host in Host".into(),
            rule: "ws-host",
        });
    }
    let query = req.uri().query();
    keeper.check(req.headers(), query)?;
    let permit = Arc::clone(connections)
        .try_acquire_owned()
        .map_err(|_| auth::Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            reason: "too many connections".into(),
            rule: "ws-connections",
        })?;
    let subscribe = auth::query_param(query, "subscribe")
        .into_iter()
        .next_back();
    Ok((permit, subscribe))
}

/// The `ws-upgrade` audit record of a refused upgrade request.
pub(super) async fn record_refusal(
    gw: &Arc<Gateway>,
    pool: &tokio::runtime::Handle,
    (session, peer, door): (&str, SocketAddr, &'static DoorSpec),
    r: &auth::Refusal,
) {
    let code = if r.status == StatusCode::SERVICE_UNAVAILABLE {
        fsgate_base::error::code::LIMIT
    } else {
        fsgate_base::error::code::REFUSED
    };
    let ctx = RequestCtx {
        style: PathStyle::Rooted,
        session: session.to_string(),
        door,
        peer: peer.to_string(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let gw = Arc::clone(gw);
    let msg = format!("HTTP {}: {}", r.status.as_u16(), r.reason);
    let rule = r.rule;
    let _ = pool
        .spawn_blocking(move || {
            gw.serve(
                &ctx,
                GwRequest::refusal("ws-upgrade", rule, (code, msg)),
                fsgate_gateway::How::alone(),
            )
            .0
        })
        .await;
}

/// The HTTP response refusing an upgrade (and a log line saying why).
pub(super) fn refuse(status: StatusCode, reason: &str, peer: SocketAddr) -> ErrorResponse {
    tracing::warn!(%peer, status = status.as_u16(), "ws connection refused: {reason}");
    let mut resp = http::Response::new(Some(format!("{reason}\n")));
    *resp.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    resp
}
