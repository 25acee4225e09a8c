//! Entry points for the fuzz targets (feature `fuzzing` only, never in `fsgate`): what
//! the HTTP door makes of a POSTed body before a session's door reads it, which is
//! private to the door.

use super::message::{cancelling_ours, one_line, under_our_id};
use crate::mcp::{InputLine, classify_line};

/// A POSTed body as the HTTP door reads and routes it.
#[derive(Debug)]
pub struct Posted {
    /// The body as one line.
    pub line: Vec<u8>,
    /// A request's `(key, method)`, as the door's pump would classify the line.
    pub request: Option<(String, String)>,
    /// A cancellation's key (the request it cancels, as the client named it).
    pub cancels: Option<String>,
    /// The line the session's door gets: a request under the exchange's id `ours`, a
    /// cancellation naming `ours`; None for what never reaches a door.
    pub to_door: Option<Vec<u8>>,
}

/// Reads `body` as a POST does, with `ours` the id a request would be handed on under
/// (and, for a cancellation, the id the router knows the cancelled request by).
pub fn post_body(body: &[u8], ours: u64) -> Posted {
    let line = one_line(body.to_vec());
    let (request, cancels, to_door) = match classify_line(&line) {
        InputLine::Request { key, method, .. } => (
            Some((key, method)),
            None,
            Some(under_our_id(line.clone(), ours)),
        ),
        InputLine::Cancel(Some(key)) => {
            (None, Some(key), Some(cancelling_ours(line.clone(), ours)))
        }
        InputLine::Cancel(None) | InputLine::Pass(_) => (None, None, Some(line.clone())),
        InputLine::Skip | InputLine::Refuse(..) => (None, None, None),
    };
    Posted {
        line,
        request,
        cancels,
        to_door,
    }
}
