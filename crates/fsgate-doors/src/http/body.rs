//! Answers on their way to clients: the byte room they hold until written, and the
//! response bodies (one JSON answer, or a stream of server-sent events).

use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Bytes of answers taken from doors and not yet written to clients, across a server:
/// a door whose answers find no room waits (its writer blocks), as it would on a full
/// pipe, so clients that do not read cannot grow the gateway.
#[derive(Debug)]
pub(crate) struct Room {
    cap: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

/// A share of a [`Room`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Share {
    room: Arc<Room>,
    n: usize,
}

impl Room {
    pub(crate) fn new(cap: usize) -> Arc<Room> {
        Arc::new(Room {
            cap: cap.max(1),
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Takes room for `n` bytes, waiting while it is taken (a share larger than the whole
    /// room waits until the room is empty). Blocking: call from a blocking thread.
    pub(crate) fn take(self: &Arc<Self>, n: usize) -> Share {
        let n = n.min(self.cap);
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *used > 0 && *used + n > self.cap {
            used = self.freed.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += n;
        Share {
            room: Arc::clone(self),
            n,
        }
    }

    /// Bytes taken now.
    #[cfg(test)]
    fn used(&self) -> usize {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut used = self.room.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(self.n);
        self.room.freed.notify_all();
    }
}

/// Bytes that hold their share of the room for as long as any copy of them lives (the
/// HTTP connection drops them once written).
struct Held(Vec<u8>, #[allow(dead_code)] Share);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

pub(crate) fn held(bytes: Vec<u8>, share: Share) -> Bytes {
    Bytes::from_owner(Held(bytes, share))
}

/// One server-sent event carrying one JSON-RPC message.
pub(crate) fn event(json: &[u8], share: Share) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    held(out, share)
}

/// How often an open stream with nothing to say says so (a comment line), so that
/// clients and proxies with a read timeout keep it.
pub(crate) const PING: std::time::Duration = std::time::Duration::from_secs(30);

/// The last bytes of a session's stream when the session ends: SSE's reconnection
/// time, zero.
pub(crate) const SESSION_ENDED: &[u8] = b"retry: 0\n\n";

/// A response body.
pub(crate) enum Reply {
    /// Nothing (202, 204, errors without a body).
    Empty,
    /// The whole body at once.
    Whole(Option<Bytes>),
    /// Server-sent events: `first`, then the messages `rx` brings, until the answer
    /// (if `ends`) or until the sender is gone.
    Events {
        first: Option<Out>,
        rx: mpsc::UnboundedReceiver<Out>,
        ends: bool,
        done: bool,
        /// A comment now and then while nothing else comes.
        ping: Option<Pin<Box<tokio::time::Interval>>>,
        /// Held while the stream runs (the request's slot, its place in the router).
        _keep: Option<Box<dyn Send + Sync>>,
    },
}

impl Reply {
    pub(crate) fn text(s: impl Into<String>) -> Reply {
        Reply::Whole(Some(Bytes::from(s.into())))
    }

    pub(crate) fn bytes(b: Bytes) -> Reply {
        Reply::Whole(Some(b))
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Reply::Empty => Poll::Ready(None),
            Reply::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Reply::Events { done: true, .. } => Poll::Ready(None),
            Reply::Events {
                first,
                rx,
                ends,
                done,
                ping,
                ..
            } => {
                let next = match first.take() {
                    Some(out) => Poll::Ready(Some(out)),
                    None => rx.poll_recv(cx),
                };
                match next {
                    Poll::Ready(None) => {
                        *done = true;
                        if *ends {
                            return Poll::Ready(None);
                        }
                        // A session's own stream ends with its session: the client's
                        // reconnection is refused at once, so it need not wait its
                        // backoff first (an agent waiting on that timer outlives its
                        // editor by seconds).
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(SESSION_ENDED)))))
                    }
                    Poll::Ready(Some(out)) => {
                        let (json, share, last) = match out {
                            Out::Message(m, s) => (m, s, false),
                            Out::Answer(a, s) => (a, s, *ends),
                        };
                        *done = last;
                        Poll::Ready(Some(Ok(Frame::data(event(&json, share)))))
                    }
                    Poll::Pending => match ping.as_mut().map(|p| p.as_mut().poll_tick(cx)) {
                        Some(Poll::Ready(_)) => {
                            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b": ping\n\n")))))
                        }
                        _ => Poll::Pending,
                    },
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Empty => true,
            Reply::Whole(b) => b.is_none(),
            Reply::Events { done, .. } => *done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Empty => SizeHint::with_exact(0),
            Reply::Whole(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Reply::Whole(None) => SizeHint::with_exact(0),
            Reply::Events { .. } => SizeHint::default(),
        }
    }
}

/// What reaches a waiting exchange.
pub(crate) enum Out {
    /// A message of the server's own (a question, a log message), one JSON text.
    Message(Vec<u8>, Share),
    /// The answer to the exchange's request, its id the client's again.
    Answer(Vec<u8>, Share),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_wait_for_room_and_live_as_long_as_their_bytes() {
        let room = Room::new(100);
        let a = held(vec![0; 60], room.take(60));
        assert_eq!(room.used(), 60);
        let copy = a.clone();
        drop(a);
        assert_eq!(room.used(), 60, "a copy still holds the room");
        let r2 = Arc::clone(&room);
        let waiter = std::thread::spawn(move || r2.take(60));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "no room yet");
        drop(copy);
        let s = waiter.join().expect("taken once freed");
        assert_eq!(room.used(), 60);
        drop(s);
        // Larger than the whole room: taken when it is empty, as the whole room.
        let big = room.take(1000);
        assert_eq!(room.used(), 100);
        drop(big);
        assert_eq!(room.used(), 0);
    }
}
