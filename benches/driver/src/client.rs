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
    let Ok(ids) = serde_json::from_str::<Ids>(&text) else {
        return;
    };
    let id = if key == "id" { ids.id } else { ids.request_id };
    let Some(id) = id.as_ref().and_then(Value::as_u64) else {
        return;
    };
    let waiter = waiters.lock().ok().and_then(|mut m| m.remove(&id));
    if let Some(w) = waiter {
        let _ = w.send(text);
    }
}
