//! A POSTed message: its body read (JSON, within the size limit, in time) and made one
//! line, and the line a door gets for it under the exchange's own id.

use http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::refusal::Refusal;
use super::router::{id_span, request_id_span, splice};
use super::server::Server;

/// The body: JSON, within the size limit, in time; as one line (a raw newline in JSON
/// text is whitespace between tokens, so it becomes a space).
pub(super) async fn read_message(
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
