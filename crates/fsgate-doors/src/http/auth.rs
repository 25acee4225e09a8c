//! Who may use the HTTP door: the `Host` and `Origin` checks (against DNS rebinding),
//! then a bearer token, which names the principal the request acts for: the one token
//! of `fsgate serve --transport http`, or one ACP session's secret in the server
//! `fsgate acp` hosts for its agent.

use std::collections::HashMap;

use std::sync::{Arc, RwLock};

use fsgate_base::sha256::Sha256;
use http::{HeaderMap, StatusCode, header};

use super::refusal::Refusal;
use super::session::Principal;
use crate::ws::Token;
use crate::ws::auth::{bearer, is_loopback_host, normalise_origin, origin_allowed, query_param};

/// The tokens a server knows.
pub(crate) enum Keys {
    /// One token (`serve --transport http`).
    One(Token, Arc<Principal>),
    /// A secret per principal (the server `fsgate acp` hosts), by its SHA-256.
    Many(RwLock<HashMap<[u8; 32], Arc<Principal>>>),
}

impl Keys {
    /// The principal `presented` stands for.
    pub(crate) fn find(&self, presented: &str) -> Option<Arc<Principal>> {
        match self {
            Keys::One(token, p) => token.matches(presented).then(|| Arc::clone(p)),
            Keys::Many(map) => {
                let digest: [u8; 32] = Sha256::digest(presented.as_bytes());
                let map = map.read().unwrap_or_else(|e| e.into_inner());
                map.get(&digest).cloned()
            }
        }
    }

    /// Adds a principal under `secret` (Many only).
    pub(crate) fn add(&self, secret: &str, p: Arc<Principal>) {
        if let Keys::Many(map) = self {
            let digest: [u8; 32] = Sha256::digest(secret.as_bytes());
            let mut map = map.write().unwrap_or_else(|e| e.into_inner());
            map.insert(digest, p);
        }
    }

    /// Removes the principal of `secret` (Many only); it is returned.
    pub(crate) fn remove(&self, secret: &str) -> Option<Arc<Principal>> {
        let Keys::Many(map) = self else { return None };
        let digest: [u8; 32] = Sha256::digest(secret.as_bytes());
        let mut map = map.write().unwrap_or_else(|e| e.into_inner());
        map.remove(&digest)
    }
}

/// The checks before the token: which `Host` and `Origin` a request may name.
pub(crate) struct Site {
    /// Allowed browser origins, normalised.
    pub origins: Vec<String>,
    /// The listener is on the loopback: `Host` must name it too.
    pub loopback_only: bool,
}

impl Site {
    pub(crate) fn new(allowed: &[String], loopback_only: bool) -> Site {
        Site {
            origins: allowed.iter().map(|o| normalise_origin(o)).collect(),
            loopback_only,
        }
    }

    /// Host and Origin: 400 without a Host, 403 for a foreign one.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let rules = ["http-host", "http-origin", "http-token"];
        if let Some((name, rule)) = crate::ws::auth::repeated(headers, rules) {
            let reason = format!("repeated {name} header");
            return Err(Refusal::http(StatusCode::BAD_REQUEST, rule, reason));
        }
        if self.loopback_only {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .ok_or_else(|| {
                    Refusal::http(StatusCode::BAD_REQUEST, "http-host", "missing Host header")
                })?;
            if !is_loopback_host(host) {
                return Err(Refusal::http(
                    StatusCode::FORBIDDEN,
                    "http-host",
                    "Host must name the loopback address this server listens on",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
            if !origin_allowed(&self.origins, origin, host, self.loopback_only) {
                return Err(Refusal::http(
                    StatusCode::FORBIDDEN,
                    "http-origin",
                    "Origin not allowed (add it to [http] allowed_origins)",
                ));
            }
        }
        Ok(())
    }
}

/// The token a request presents: `Authorization: Bearer`, else `?token=`.
pub(crate) fn presented(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    bearer(headers).or_else(|| query_param(query, "token").into_iter().next())
}

/// The refusal of a request without a usable token.
pub(crate) fn no_token(presented: bool) -> Refusal {
    let reason = match presented {
        false => "missing token: send Authorization: Bearer <token> (or ?token=<token>)",
        true => "wrong token",
    };
    Refusal::http(StatusCode::UNAUTHORIZED, "http-token", reason)
}

/// A fresh secret: 32 random bytes as 64 hex digits.
pub(crate) fn secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot draw a secret: {e}"))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).expect("header value"));
        }
        h
    }

    #[test]
    fn host_and_origin_are_checked_before_anything() {
        let site = Site::new(&["http://localhost:5173".into()], true);
        assert!(
            site.check(&headers(&[(header::HOST, "127.0.0.1:9")]))
                .is_ok()
        );
        let r = site
            .check(&headers(&[(header::HOST, "evil.example:9")]))
            .expect_err("foreign host");
        assert_eq!((r.status, r.rule), (StatusCode::FORBIDDEN, "http-host"));
        let r = site.check(&HeaderMap::new()).expect_err("no host");
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        let r = site
            .check(&headers(&[
                (header::HOST, "localhost"),
                (header::ORIGIN, "https://evil.example"),
            ]))
            .expect_err("foreign origin");
        assert_eq!((r.status, r.rule), (StatusCode::FORBIDDEN, "http-origin"));
        assert!(
            site.check(&headers(&[
                (header::HOST, "localhost"),
                (header::ORIGIN, "HTTP://LOCALHOST:5173/"),
            ]))
            .is_ok()
        );
        // The server's own origin (a client that is not a browser page may send it).
        assert!(
            site.check(&headers(&[
                (header::HOST, "127.0.0.1:9"),
                (header::ORIGIN, "http://127.0.0.1:9"),
            ]))
            .is_ok()
        );
        let r = site
            .check(&headers(&[
                (header::HOST, "127.0.0.1:9"),
                (header::ORIGIN, "http://127.0.0.1:10"),
            ]))
            .expect_err("another loopback port is another origin");
        assert_eq!((r.status, r.rule), (StatusCode::FORBIDDEN, "http-origin"));
        // Bound elsewhere: any Host.
        let open = Site::new(&[], false);
        assert!(
            open.check(&headers(&[(header::HOST, "gw.example")]))
                .is_ok()
        );
    }

    #[test]
    fn secrets_find_their_principal_only() {
        let keys = Keys::Many(RwLock::new(HashMap::new()));
        let (a, b) = (secret().expect("secret"), secret().expect("secret"));
        assert_ne!(a, b);
        keys.add(
            &a,
            Arc::new(Principal::new(
                Some("s1".into()),
                &crate::http::HOSTED_DOOR,
                4,
            )),
        );
        assert_eq!(
            keys.find(&a).and_then(|p| p.session()).as_deref(),
            Some("s1")
        );
        assert!(keys.find(&b).is_none());
        assert!(keys.remove(&a).is_some());
        assert!(keys.find(&a).is_none());
        let one = Keys::One(
            Token::from_text("t0123456789abcdef"),
            Arc::new(Principal::new(None, &crate::http::DOOR, 4)),
        );
        assert!(one.find("t0123456789abcdef").is_some());
        assert!(one.find("t0123456789abcdeX").is_none());
    }

    #[test]
    fn the_token_comes_from_the_header_or_the_query() {
        let h = headers(&[(header::AUTHORIZATION, "Bearer abc")]);
        assert_eq!(presented(&h, None).as_deref(), Some("abc"));
        assert_eq!(
            presented(&HeaderMap::new(), Some("x=1&token=q%2Bt")).as_deref(),
            Some("q+t")
        );
        assert_eq!(presented(&HeaderMap::new(), None), None);
    }
}
