//! One connection to a server, pipelined by id: a writer task, a reader task, and a table
//! of the calls waiting for their answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::Error;

/// No single answer may take longer than this: a hung server fails the workload.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// The reader's buffer.
const READ_BUFFER: usize = 1 << 20;
/// Messages waiting for the writer (requests in flight are bounded by the workload).
const OUTBOX: usize = 256;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<String>>>>;

/// A pipelined JSON-RPC (or WebSocket files-channel) connection.
pub struct Client {
    tx: mpsc::Sender<String>,
    waiters: Waiters,
    next_id: AtomicU64,
    /// `id` for JSON-RPC, `requestId` for the WebSocket files channel.
    id_key: &'static str,
}

impl Client {
    /// A JSON-RPC connection over a child's stdin and stdout (one message per line).
    pub fn stdio(stdin: ChildStdin, stdout: ChildStdout) -> Client {
        let (tx, mut rx) = mpsc::channel::<String>(OUTBOX);
        let waiters: Waiters = Arc::default();
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(mut line) = rx.recv().await {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let w = Arc::clone(&waiters);
        tokio::spawn(async move {
            // Large enough that a 21 MB answer (a 10 MiB read) is read in pipe-sized
            // pieces, not 8 KiB ones.
            let mut lines = BufReader::with_capacity(READ_BUFFER, stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                deliver(&w, "id", line);
            }
            w.lock().map(|mut m| m.clear()).ok();
        });
        Client {
            tx,
            waiters,
            next_id: AtomicU64::new(1),
            id_key: "id",
        }
    }

    /// A WebSocket files-channel connection to `url` with a bearer token.
    pub async fn websocket(url: &str, token: &str) -> Result<Client, Error> {
        let mut req = url
            .into_client_request()
            .map_err(|e| Error::Protocol(format!("ws request: {e}")))?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| Error::Protocol("ws token is not a header value".into()))?;
        req.headers_mut().insert("Authorization", bearer);
        let (ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .map_err(|e| Error::Protocol(format!("ws connect: {e}")))?;
        let (mut sink, mut stream) = ws.split();
        let (tx, mut rx) = mpsc::channel::<String>(OUTBOX);
        tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
            let _ = sink.close().await;
        });
        let waiters: Waiters = Arc::default();
        let w = Arc::clone(&waiters);
        tokio::spawn(async move {
            while let Some(Ok(msg)) = stream.next().await {
                if let Message::Text(t) = msg {
                    deliver(&w, "requestId", t.as_str().to_string());
                }
            }
            w.lock().map(|mut m| m.clear()).ok();
        });
        Ok(Client {
            tx,
            waiters,
            next_id: AtomicU64::new(1),
            id_key: "requestId",
        })
    }

    /// Sends `msg` (an object without id) with a fresh id and waits for its answer.
    pub async fn call(&self, msg: Value) -> Result<Value, Error> {
        let text = self.call_raw(msg).await?;
        serde_json::from_str(&text).map_err(|e| Error::Protocol(format!("answer: {e}")))
    }

    /// [`call`](Self::call), the answer as its JSON text (to parse only what is checked).
    pub async fn call_raw(&self, mut msg: Value) -> Result<String, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        msg[self.id_key] = id.into();
        let (otx, orx) = oneshot::channel();
        self.waiters
            .lock()
            .map_err(|_| Error::Protocol("waiter table poisoned".into()))?
            .insert(id, otx);
        let text = msg.to_string();
        self.tx
            .send(text)
            .await
            .map_err(|_| Error::Protocol("connection closed (write)".into()))?;
        match tokio::time::timeout(CALL_TIMEOUT, orx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(Error::Protocol(
                "connection closed before the answer".into(),
            )),
            Err(_) => Err(Error::Protocol(format!("no answer in {CALL_TIMEOUT:?}"))),
        }
    }

    /// Sends a message that gets no answer (a notification).
    pub async fn notify(&self, msg: Value) -> Result<(), Error> {
        self.tx
            .send(msg.to_string())
            .await
            .map_err(|_| Error::Protocol("connection closed (write)".into()))
    }
}

/// The id of a message: `id` for JSON-RPC, `requestId` for the WebSocket files channel
/// (the rest is skipped, not built).
#[derive(serde::Deserialize)]
struct Ids {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, rename = "requestId")]
    request_id: Option<Value>,
}

/// Hands an incoming message to the call waiting for its id; other messages (server
/// notifications, change events) are dropped.
fn deliver(waiters: &Waiters, key: &str, text: String) {
    let Some(id) = top_level_u64(&text, key).or_else(|| parsed_id(&text, key)) else {
        return;
    };
    let waiter = waiters.lock().ok().and_then(|mut m| m.remove(&id));
    if let Some(w) = waiter {
        let _ = w.send(text);
    }
}

/// The id by a full parse: what [`top_level_u64`] does not find.
fn parsed_id(text: &str, key: &str) -> Option<u64> {
    let ids = serde_json::from_str::<Ids>(text).ok()?;
    let id = if key == "id" { ids.id } else { ids.request_id };
    id.as_ref().and_then(Value::as_u64)
}

/// The value of `key` in the top-level object of `text` when it is an unsigned integer,
/// found by skipping strings with `memchr` and counting nesting. A large answer is
/// mostly one or two strings (a tree's text block is 4.8 MB): skipping them costs a
/// fraction of parsing them, which timed the driver's own work as the server's (about
/// 5 ms of a 10.7 MB answer). `None` when the key is not found plainly: the caller then
/// parses the message whole.
fn top_level_u64(text: &str, key: &str) -> Option<u64> {
    let b = text.as_bytes();
    let (mut i, mut depth, mut at_key) = (0, 0usize, false);
    while let Some(&c) = b.get(i) {
        i += 1;
        match c {
            b'"' => {
                let end = string_end(b, i)?;
                let name = &b[i..end];
                i = end + 1;
                if depth == 1 && at_key {
                    i = after_colon(b, i)?;
                    if name == key.as_bytes() {
                        return leading_u64(&b[i..]);
                    }
                    at_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                at_key = c == b'{' && depth == 1;
            }
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' => at_key = depth == 1,
            _ => {}
        }
    }
    None
}

/// Where the string whose text starts at `from` ends (its closing quote).
fn string_end(b: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr2(b'"', b'\\', b.get(from..)?)?;
        if b[at] == b'"' {
            return Some(at);
        }
        from = at + 2;
    }
}

/// Past the blanks, the `:` and the blanks after a key.
fn after_colon(b: &[u8], i: usize) -> Option<usize> {
    let rest = b.get(i..)?.trim_ascii_start().strip_prefix(b":")?;
    Some(b.len() - rest.trim_ascii_start().len())
}

/// The unsigned integer `b` starts with, ended by a blank, `,` or `}`.
fn leading_u64(b: &[u8]) -> Option<u64> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let ends_well = matches!(
        b.get(digits),
        Some(b',' | b'}' | b' ' | b'\n' | b'\r' | b'\t')
    );
    if digits == 0 || !ends_well {
        return None;
    }
    std::str::from_utf8(&b[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_id_is_found_past_strings_and_nesting() {
        let cases = [
            (r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, Some(7)),
            (
                r#"{"result":{"id":3,"t":"a \"id\":9 }"},"id" : 12 }"#,
                Some(12),
            ),
            (r#"{"result":[{"id":1}],"x":"\\","id":44}"#, Some(44)),
            (r#"{"method":"notifications/x","params":{"id":5}}"#, None),
            (r#"{"id":"abc"}"#, None),
            (r#"{"id":-1}"#, None),
            (r#"{"id":1.5}"#, None),
            (r#"[{"id":1}]"#, None),
            (r#"{"id":"#, None),
            (r#"{"t":"unterminated"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(top_level_u64(text, "id"), want, "{text}");
        }
        let ws = r#"{"type":"response","requestId":9,"ok":true}"#;
        assert_eq!(top_level_u64(ws, "requestId"), Some(9));
        assert_eq!(top_level_u64(ws, "id"), None);
    }

    #[test]
    fn the_scan_agrees_with_a_full_parse_where_it_answers() {
        let big = "x\\\"y".repeat(10_000);
        for text in [
            format!(r#"{{"jsonrpc":"2.0","id":31,"result":{{"text":"{big}"}}}}"#),
            format!(r#"{{"result":{{"text":"{big}","id":2}},"id":99}}"#),
        ] {
            let got = top_level_u64(&text, "id");
            assert!(got.is_some());
            assert_eq!(got, parsed_id(&text, "id"));
        }
    }
}
