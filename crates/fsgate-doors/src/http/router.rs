//! Where a door's output goes: each line the MCP door writes is an answer to one
//! request (found by its id, which this side chose, and given back the client's id),
//! or a message of the server's own (a question, a log message), which goes to the
//! session's stream, to a request still waiting whose client reads a stream, or waits
//! in a small backlog.
//!
//! Request ids are this side's: each request handed to the door gets a fresh integer id
//! in place of the client's, so that requests of separate HTTP exchanges (of separate
//! clients, on the stateless wire) can never collide, and the answer finds its exchange.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Write};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::body::{Out, Room, Share};

/// Server messages kept for a session whose client reads no stream now.
const BACKLOG_MESSAGES: usize = 64;

/// An exchange waiting for its answer.
struct Waiter {
    /// The client's id, as the JSON text it sent.
    client_id: String,
    tx: mpsc::UnboundedSender<Out>,
    /// The client reads a stream on this exchange: server messages may go there.
    streams: bool,
}

#[derive(Default)]
struct State {
    next: u64,
    /// By this side's id, oldest first.
    waiting: BTreeMap<u64, Waiter>,
    /// This side's id of each waiting request, by the client's id (for cancellations).
    by_client: HashMap<String, u64>,
    /// The session's stream (GET), if its client reads one.
    stream: Option<mpsc::UnboundedSender<Out>>,
    /// Server messages no stream took yet.
    backlog: VecDeque<(Vec<u8>, Share)>,
    /// The door's unfinished line.
    partial: Vec<u8>,
}

/// One door's output, routed.
pub(crate) struct Router {
    state: Mutex<State>,
    /// Bytes of answers not yet written to their clients, across the server.
    room: Arc<Room>,
}

/// A request entered in the router: its id for the door; it leaves when dropped.
pub(crate) struct Ticket {
    pub id: u64,
    router: Arc<Router>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.router.lock();
        if let Some(w) = st.waiting.remove(&self.id) {
            st.by_client.remove(&w.client_id);
        }
    }
}

impl Router {
    pub(crate) fn new(room: Arc<Room>) -> Arc<Router> {
        Arc::new(Router {
            state: Mutex::new(State::default()),
            room,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters a request whose client id is `client_id` (JSON text); its answer (and
    /// server messages, if the client `streams`) come on the receiver.
    pub(crate) fn enter(
        self: &Arc<Self>,
        client_id: &str,
        streams: bool,
    ) -> (Ticket, mpsc::UnboundedReceiver<Out>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut st = self.lock();
        st.next += 1;
        let id = st.next;
        st.by_client.insert(client_id.to_owned(), id);
        st.waiting.insert(
            id,
            Waiter {
                client_id: client_id.to_owned(),
                tx,
                streams,
            },
        );
        let ticket = Ticket {
            id,
            router: Arc::clone(self),
        };
        (ticket, rx)
    }

    /// This side's id of the waiting request the client calls `client_id`.
    pub(crate) fn ours(&self, client_id: &str) -> Option<u64> {
        self.lock().by_client.get(client_id).copied()
    }

    /// Opens the session's stream: what waited in the backlog first. None if one is
    /// open already.
    pub(crate) fn open_stream(&self) -> Option<mpsc::UnboundedReceiver<Out>> {
        let mut st = self.lock();
        if st.stream.as_ref().is_some_and(|s| !s.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for (m, share) in st.backlog.drain(..) {
            let _ = tx.send(Out::Message(m, share));
        }
        st.stream = Some(tx);
        Some(rx)
    }

    /// Whether a client stream is open.
    pub(crate) fn streaming(&self) -> bool {
        self.lock().stream.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Requests waiting for their answers.
    pub(crate) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Ends the session's stream (the session ended).
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.stream = None;
        st.waiting.clear();
        st.by_client.clear();
    }

    /// One whole line the door wrote.
    fn route(&self, line: Vec<u8>) {
        let Ok(env) = serde_json::from_slice::<Envelope>(&line) else {
            tracing::debug!("http: the door wrote a line that is no JSON-RPC message");
            return;
        };
        let share = self.room.take(line.len());
        if env.method.is_some() {
            return self.server_message(line, share);
        }
        let ours = env.id.as_ref().and_then(|v| v.get().parse::<u64>().ok());
        let mut st = self.lock();
        // An answer without an id (the SDK found a request malformed): the oldest
        // request waiting is the one the door read first.
        let key = match ours {
            Some(id) => Some(id),
            None => st.waiting.keys().next().copied(),
        };
        let Some(w) = key.and_then(|k| st.waiting.remove(&k)) else {
            tracing::debug!("http: an answer nobody waits for any more; dropped");
            return;
        };
        st.by_client.remove(&w.client_id);
        drop(st);
        let answer = match id_span(&line) {
            Some(span) => splice(&line, span, w.client_id.as_bytes()),
            None => line,
        };
        let _ = w.tx.send(Out::Answer(answer, share));
    }

    /// A message of the server's own: to the stream, else the newest exchange whose
    /// client reads a stream, else the backlog (the oldest dropped when it is full).
    fn server_message(&self, msg: Vec<u8>, share: Share) {
        let mut st = self.lock();
        let mut out = Out::Message(msg, share);
        if let Some(s) = &st.stream {
            match s.send(out) {
                Ok(()) => return,
                Err(e) => out = e.0,
            }
        }
        for w in st.waiting.values().rev().filter(|w| w.streams) {
            match w.tx.send(out) {
                Ok(()) => return,
                Err(e) => out = e.0,
            }
        }
        if let Out::Message(m, share) = out {
            if st.backlog.len() >= BACKLOG_MESSAGES {
                st.backlog.pop_front();
                tracing::warn!(
                    "http: a session's client reads no stream; an old server message was dropped"
                );
            }
            st.backlog.push_back((m, share));
        }
    }
}

/// The members of an outgoing line the router looks at.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<IgnoredAny>,
}

/// Where the top-level `id` of the JSON object `text` lies, if it has a non-null one.
/// ASCII whitespace around the object is skipped as the MCP door's pump skips it
/// (a form feed too, which JSON itself does not allow): a message the pump takes as a
/// request always has its id found.
pub(crate) fn id_span(text: &[u8]) -> Option<Range<usize>> {
    #[derive(Deserialize)]
    struct Id<'a> {
        #[serde(default, borrow)]
        id: Option<&'a RawValue>,
    }
    let id = serde_json::from_slice::<Id>(text.trim_ascii()).ok()?.id?;
    span_of(text, id.get())
}

/// Where `params.requestId` of a `notifications/cancelled` lies (whitespace as for
/// [`id_span`]).
pub(crate) fn request_id_span(text: &[u8]) -> Option<Range<usize>> {
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Cancel<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    let c = serde_json::from_slice::<Cancel>(text.trim_ascii()).ok()?;
    span_of(text, c.params.request_id.get())
}

/// The range of `part` within `whole`, which it was borrowed from.
fn span_of(whole: &[u8], part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len() && &whole[start..end] == part.as_bytes()).then_some(start..end)
}

/// `text` with `span` replaced by `with`.
pub(crate) fn splice(text: &[u8], span: Range<usize>, with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() - span.len() + with.len());
    out.extend_from_slice(&text[..span.start]);
    out.extend_from_slice(with);
    out.extend_from_slice(&text[span.end..]);
    out
}

/// The door's output: whole lines, routed as they complete.
pub(crate) struct RouteWriter(pub Arc<Router>);

impl Write for RouteWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            let line = {
                let mut st = self.0.lock();
                let mut line = std::mem::take(&mut st.partial);
                line.extend_from_slice(&rest[..nl]);
                line
            };
            if !line.iter().all(u8::is_ascii_whitespace) {
                self.0.route(line);
            }
            rest = &rest[nl + 1..];
        }
        if !rest.is_empty() {
            self.0.lock().partial.extend_from_slice(rest);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_and_replaced_byte_exactly() {
        let line = br#"{"jsonrpc":"2.0","id":17,"result":{"id":3,"x":"\"id\":9"}}"#;
        let span = id_span(line).expect("id");
        assert_eq!(&line[span.clone()], b"17");
        let out = splice(line, span, br#""client-a""#);
        assert_eq!(
            out,
            br#"{"jsonrpc":"2.0","id":"client-a","result":{"id":3,"x":"\"id\":9"}}"#
        );
        assert_eq!(id_span(br#"{"jsonrpc":"2.0","id":null,"error":{}}"#), None);
        assert_eq!(id_span(br#"{"method":"x"}"#), None);
        let cancel = br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId": "r1","reason":"x"}}"#;
        let span = request_id_span(cancel).expect("request id");
        assert_eq!(&cancel[span], br#""r1""#);
    }

    #[test]
    fn ids_are_found_past_the_whitespace_the_pump_skips() {
        // Found by fuzzing (http_message): the pump took this as request 1, the id was
        // not found, and the door got it under the client's id instead of the exchange's.
        let line = b"\x0c {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\x0c";
        let span = id_span(line).expect("id");
        assert_eq!(&line[span.clone()], b"1");
        let out = splice(line, span, b"42");
        assert_eq!(
            &out[..],
            b"\x0c {\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/list\"}\x0c"
        );
        let cancel = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\x0c";
        let span = request_id_span(cancel).expect("request id");
        assert_eq!(&cancel[span], b"7");
    }

    #[tokio::test]
    async fn answers_find_their_exchange_and_server_messages_the_stream() {
        let router = Router::new(Room::new(1 << 20));
        let (a, mut a_rx) = router.enter("\"a\"", false);
        let (b, mut b_rx) = router.enter("7", true);
        let mut w = RouteWriter(Arc::clone(&router));
        let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n", b.id);
        // Written in two pieces, as a large answer is.
        let (one, two) = answer.as_bytes().split_at(10);
        w.write_all(one).expect("write");
        w.write_all(two).expect("write");
        match b_rx.try_recv() {
            Ok(Out::Answer(bytes, _)) => {
                assert_eq!(bytes, br#"{"jsonrpc":"2.0","id":7,"result":{}}"#)
            }
            _ => panic!("no answer for b"),
        }
        // A question goes to the exchange whose client reads a stream (none here now),
        // else to the backlog, which the session's stream gets first.
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"elicitation/create\"}\n")
            .expect("write");
        assert!(a_rx.try_recv().is_err());
        let mut stream = router.open_stream().expect("stream");
        assert!(matches!(stream.try_recv(), Ok(Out::Message(..))));
        assert!(router.open_stream().is_none(), "one stream at a time");
        drop(a);
        drop(b);
        assert_eq!(router.waiting(), 0);
    }
}
