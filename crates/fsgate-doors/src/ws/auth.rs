//! Who may connect: the bearer token, the `Origin` allow-list and the `Host` check,
//! all decided on the HTTP upgrade request before any WebSocket frame is read.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use fsgate_base::sha256::Sha256;
use subtle::ConstantTimeEq;
use tokio_tungstenite::tungstenite::http::{HeaderMap, StatusCode, header};

/// Shortest token accepted from a token file.
const MIN_TOKEN_CHARS: usize = 16;

/// Why the server cannot get a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file cannot be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The token file holds too short a token.
    #[error("the token file {path} holds fewer than {MIN_TOKEN_CHARS} characters")]
    TooShort {
        /// The file.
        path: String,
    },
    /// The operating system's random source failed.
    #[error("cannot generate a token: {0}")]
    Random(String),
}

/// The bearer token clients must present. `Debug` never shows it.
#[derive(Clone)]
pub struct Token {
    /// SHA-256 of the token: compared in constant time, and equal-length whatever the
    /// token's length, so the comparison leaks neither content nor length.
    digest: [u8; 32],
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A fresh random token: 32 bytes from the OS, as 64 hex digits (returned so the
    /// caller can show it once).
    pub fn generate() -> Result<(Token, String), TokenError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
        let text = hex::encode(bytes);
        Ok((Token::from_text(&text), text))
    }

    /// The token `settings` ask for: read from `token_file`, or generated and printed to
    /// stderr (`fsgate: ws token: <hex>`), where the operator starting fsgate sees it.
    ///
    /// # Ambient Authority
    /// Reads `token_file`; call before the process confines itself.
    pub fn for_settings(settings: &fsgate_policy::ws::WsSettings) -> Result<Token, TokenError> {
        match &settings.token_file {
            Some(path) => Token::from_file(path),
            None => {
                let (token, text) = Token::generate()?;
                eprintln!("fsgate: ws token: {text}");
                Ok(token)
            }
        }
    }

    /// The token in `path`, whitespace trimmed.
    ///
    /// # Ambient Authority
    /// Reads `path` from the ambient filesystem; start-up code only.
    pub(crate) fn from_file(path: &Path) -> Result<Token, TokenError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: shown.clone(),
            source,
        })?;
        let text = text.trim();
        if text.chars().count() < MIN_TOKEN_CHARS {
            return Err(TokenError::TooShort { path: shown });
        }
        warn_if_readable_by_others(path);
        Ok(Token::from_text(text))
    }

    /// A token with the given text.
    pub fn from_text(text: &str) -> Token {
        Token {
            digest: Sha256::digest(text.as_bytes()),
        }
    }

    /// Constant-time check of a presented token.
    pub fn matches(&self, presented: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(presented.as_bytes());
        bool::from(self.digest.ct_eq(&d))
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path)
        && m.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(file = %path.display(), "the token file is readable by other users; chmod 600 it");
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// What the upgrade request is checked against.
#[derive(Debug, Clone)]
pub(crate) struct Gatekeeper {
    /// The bearer token.
    pub token: Token,
    /// Allowed browser origins, lowercased, without a trailing `/`.
    pub origins: Vec<String>,
    /// True when the listener is bound to a loopback address: `Host` must then name
    /// the loopback too (a DNS-rebinding page sends its own host name).
    pub loopback_only: bool,
}

/// A refused upgrade request: the HTTP status and a one-line reason for the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// 400, 401 or 403.
    pub status: StatusCode,
    /// Shown to the client and logged; never contains the presented token.
    pub reason: String,
    /// The audit record's rule: which check refused (`ws-host`, `ws-origin`,
    /// `ws-token`, `ws-connections`).
    pub rule: &'static str,
}

impl Refusal {
    fn new(status: StatusCode, rule: &'static str, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            rule,
            reason: reason.into(),
        }
    }
}

impl Gatekeeper {
    /// A gatekeeper for `token` and the configured origins.
    pub(crate) fn new(token: Token, allowed_origins: &[String], loopback_only: bool) -> Gatekeeper {
        Gatekeeper {
            token,
            origins: allowed_origins
                .iter()
                .map(|o| normalise_origin(o))
                .collect(),
            loopback_only,
        }
    }

    /// Decides an upgrade request from its headers and query string. Host and Origin
    /// are checked first (403), then the token (401).
    pub(crate) fn check(&self, headers: &HeaderMap, query: Option<&str>) -> Result<(), Refusal> {
        if let Some((name, rule)) = repeated(headers, ["ws-host", "ws-origin", "ws-token"]) {
            let reason = format!("repeated {name} header");
            return Err(Refusal::new(StatusCode::BAD_REQUEST, rule, reason));
        }
        if self.loopback_only {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .ok_or_else(|| {
                    Refusal::new(StatusCode::BAD_REQUEST, "ws-host", "missing Host header")
                })?;
            if !is_loopback_host(host) {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    "ws-host",
                    "Host must name the loopback address this server listens on",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
            if !origin_allowed(&self.origins, origin, host, self.loopback_only) {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    "ws-origin",
                    "Origin not allowed (add it to [ws] allowed_origins)",
                ));
            }
        }
        let presented = bearer(headers).or_else(|| query_param(query, "token").into_iter().next());
        match presented {
            None => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "ws-token",
                "missing token: send Authorization: Bearer <token> (or ?token=<token>)",
            )),
            Some(t) if self.token.matches(&t) => Ok(()),
            Some(_) => Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "ws-token",
                "wrong token",
            )),
        }
    }
}

/// The first of `Host`, `Origin` and `Authorization` that `headers` repeat (each a
/// server may read the first of and a proxy the last of), with its rule in `rules`.
pub(crate) fn repeated(
    headers: &HeaderMap,
    rules: [&'static str; 3],
) -> Option<(&'static str, &'static str)> {
    let names = [
        (header::HOST, "Host"),
        (header::ORIGIN, "Origin"),
        (header::AUTHORIZATION, "Authorization"),
    ];
    (names.into_iter().zip(rules))
        .find(|((h, _), _)| headers.get_all(h).iter().nth(1).is_some())
        .map(|((_, name), rule)| (name, rule))
}

/// The token of an `Authorization: Bearer ...` header.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// Every value of `name` in a URL query string, percent-decoded.
pub(crate) fn query_param(query: Option<&str>, name: &str) -> Vec<String> {
    let Some(q) = query else {
        return Vec::new();
    };
    q.split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k) == name).then(|| decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

pub(crate) fn normalise_origin(o: &str) -> String {
    o.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// Whether a request's `Origin` may pass: one of the configured origins, or, on a
/// loopback listener, the server's own origin (`http://` + the loopback `Host` it was
/// sent to). No page is served from that origin, so a browser cannot be tricked into
/// sending it; a rebinding page carries its own (foreign) origin instead.
pub(crate) fn origin_allowed(
    allowed: &[String],
    origin: &str,
    host: Option<&str>,
    loopback_only: bool,
) -> bool {
    let origin = normalise_origin(origin);
    if allowed.contains(&origin) {
        return true;
    }
    match host {
        Some(host) if loopback_only && is_loopback_host(host) => {
            origin == normalise_origin(&format!("http://{}", host.trim()))
        }
        _ => false,
    }
}

/// `localhost`, `127.0.0.1`, `[::1]`... with an optional port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inner, tail)) if tail.is_empty() || tail.starts_with(':') => inner,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.trim_end_matches('.');
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_tungstenite::tungstenite::http::HeaderValue;

    fn keeper() -> Gatekeeper {
        Gatekeeper::new(
            Token::from_text("s3cret-token-0123456789"),
            &["http://localhost:5173/".to_string()],
            true,
        )
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).expect("header value"));
        }
        h
    }

    #[test]
    fn accepts_the_bearer_header_and_the_query_token() {
        let k = keeper();
        let h = headers(&[
            (header::HOST, "127.0.0.1:8080"),
            (header::AUTHORIZATION, "Bearer s3cret-token-0123456789"),
        ]);
        assert_eq!(k.check(&h, None), Ok(()));
        let h = headers(&[(header::HOST, "localhost:8080")]);
        assert_eq!(
            k.check(&h, Some("subscribe=%2Fsrc&token=s3cret-token-0123456789")),
            Ok(())
        );
    }

    #[test]
    fn refuses_missing_and_wrong_tokens_with_401() {
        let k = keeper();
        let h = headers(&[(header::HOST, "[::1]:9")]);
        assert_eq!(
            k.check(&h, None).map_err(|r| r.status),
            Err(StatusCode::UNAUTHORIZED)
        );
        let h = headers(&[
            (header::HOST, "[::1]:9"),
            (header::AUTHORIZATION, "Bearer nope"),
        ]);
        let r = k.check(&h, None).expect_err("wrong token");
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert!(!r.reason.contains("nope"));
        assert!(!k.token.matches("s3cret-token-012345678"));
    }

    #[test]
    fn refuses_foreign_origins_and_hosts_with_403() {
        let k = keeper();
        let auth = (header::AUTHORIZATION, "Bearer s3cret-token-0123456789");
        let h = headers(&[
            (header::HOST, "localhost"),
            (header::ORIGIN, "https://evil.example"),
            auth.clone(),
        ]);
        assert_eq!(
            k.check(&h, None).map_err(|r| r.status),
            Err(StatusCode::FORBIDDEN)
        );
        let h = headers(&[
            (header::HOST, "localhost"),
            (header::ORIGIN, "HTTP://LOCALHOST:5173"),
            auth.clone(),
        ]);
        assert_eq!(k.check(&h, None), Ok(()));
        let h = headers(&[(header::HOST, "evil.example:8080"), auth.clone()]);
        assert_eq!(
            k.check(&h, None).map_err(|r| r.status),
            Err(StatusCode::FORBIDDEN)
        );
        let h = headers(&[auth]);
        assert_eq!(
            k.check(&h, None).map_err(|r| r.status),
            Err(StatusCode::BAD_REQUEST)
        );
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:1",
            "127.0.0.1",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
            "localhost.",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "10.0.0.1:80",
            "[::2]",
            "localhost.evil.example",
            "127.0.0.1:x",
            "[::1]x",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn token_files_are_trimmed_and_must_not_be_short() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("token");
        std::fs::write(&good, "  0123456789abcdef-long-enough\n").expect("write");
        let t = Token::from_file(&good).expect("token file");
        assert!(t.matches("0123456789abcdef-long-enough"));
        let short = dir.path().join("short");
        std::fs::write(&short, "abc\n").expect("write");
        assert!(matches!(
            Token::from_file(&short),
            Err(TokenError::TooShort { .. })
        ));
        let missing = dir.path().join("missing");
        assert!(matches!(
            Token::from_file(&missing),
            Err(TokenError::Read { .. })
        ));
        let settings = fsgate_policy::ws::WsSettings {
            token_file: Some(good),
            ..Default::default()
        };
        assert!(
            Token::for_settings(&settings)
                .expect("from settings")
                .matches("0123456789abcdef-long-enough")
        );
    }

    #[test]
    fn generated_tokens_are_64_hex_digits_and_differ() {
        let (t1, s1) = Token::generate().expect("random");
        let (_, s2) = Token::generate().expect("random");
        assert_eq!(s1.len(), 64);
        assert!(s1.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(s1, s2);
        assert!(t1.matches(&s1));
        assert_eq!(format!("{t1:?}"), "Token(<redacted>)");
    }
}
