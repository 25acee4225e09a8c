//! Harness for the WebSocket tests: spawns the real `fsgate serve --transport ws` on a
//! fresh workspace, learns its address and token from stderr, and drives it with a
//! WebSocket client written in Rust ([`WsClient`], tungstenite): no other language and
//! no peer to install, so these tests never skip.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fsgate_doors::ws::WsSettings;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::{
    self, HandshakeError, Message, WebSocket,
    client::IntoClientRequest,
    http::{HeaderName, HeaderValue},
    protocol::WebSocketConfig,
};

/// Longest wait for the server to start.
const START_TIMEOUT: Duration = Duration::from_secs(20);

fn canonical_tempdir(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    let canon = dir.path().canonicalize().expect("canonicalise tempdir");
    (dir, canon)
}

/// A running `fsgate serve --transport ws`.
pub struct WsGate {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// `ws://127.0.0.1:PORT/`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The token printed at start.
    pub token: String,
    /// Canonical workspace root.
    pub root: PathBuf,
    /// State directory: audit log, backups, policy file.
    pub state: PathBuf,
    _dirs: [TempDir; 2],
}

impl WsGate {
    /// Starts on a workspace prepared by `setup`, with `policy` (TOML) if given.
    pub fn start(policy: Option<&str>, setup: impl FnOnce(&Path)) -> WsGate {
        WsGate::start_wrapped(&[], policy, setup)
    }

    /// [`WsGate::start`], fsgate started by `wrapper` (a command and its arguments that
    /// end with fsgate's command line, such as `unshare ... sh -c 'exec "$0" "$@"'`).
    pub fn start_wrapped(
        wrapper: &[&str],
        policy: Option<&str>,
        setup: impl FnOnce(&Path),
    ) -> WsGate {
        WsGate::start_several(wrapper, policy, &[], setup)
    }

    /// [`WsGate::start_wrapped`] serving `others` beside the root (several workspaces).
    pub fn start_several(
        wrapper: &[&str],
        policy: Option<&str>,
        others: &[&Path],
        setup: impl FnOnce(&Path),
    ) -> WsGate {
        let (ws_dir, root) = canonical_tempdir("fsgate-wsx-");
        let (state_dir, state) = canonical_tempdir("fsgate-wsx-state-");
        setup(&root);
        let fsgate = env!("CARGO_BIN_EXE_fsgate");
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(fsgate);
                c
            }
            None => Command::new(fsgate),
        };
        cmd.args([
            "serve",
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
            "--workspace",
        ])
        .arg(&root);
        for w in others {
            cmd.arg("--workspace").arg(w);
        }
        cmd.arg("--audit-log")
            .arg(state.join("audit").join("audit.jsonl"))
            .arg("--backup-dir")
            .arg(state.join("backups"));
        if let Some(text) = policy {
            let file = state.join("policy.toml");
            std::fs::write(&file, text).expect("write policy");
            cmd.arg("--policy").arg(&file);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn fsgate");
        let mut pipe = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        let started = Instant::now();
        let (url, token) = loop {
            let text = stderr.lock().map(|s| s.clone()).unwrap_or_default();
            let url = after(&text, "fsgate: ws listening on ");
            let token = after(&text, "fsgate: ws token: ");
            if let (Some(u), Some(t)) = (url, token) {
                break (u, t);
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("fsgate exited with {status} before listening; stderr:\n{text}");
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "fsgate did not start; stderr:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let addr = url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .to_string();
        WsGate {
            child,
            stderr,
            url,
            addr,
            token,
            root,
            state,
            _dirs: [ws_dir, state_dir],
        }
    }

    /// A client connected with the token.
    pub fn client(&self) -> WsClient {
        WsClient::open(&self.addr, &self.token)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the server to exit; true if it exited with 0.
    pub fn terminate(&mut self) -> bool {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("kill");
        self.child.wait().expect("wait").success()
    }

    /// Every record of the audit log, in order.
    pub fn audit_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state.join("audit").join("audit.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until the server's stderr contains `text`; the instant it was seen, or
    /// None at `deadline`.
    pub fn wait_stderr(&self, text: &str, deadline: Instant) -> Option<Instant> {
        while Instant::now() < deadline {
            if self.stderr().contains(text) {
                return Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// The audit log's request records.
    pub fn audit_requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state.join("audit").join("audit.jsonl"))
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "request")
            .collect()
    }

    /// Sends a raw HTTP request and returns the response head (status line + headers).
    pub fn raw_http(&self, request: &str) -> String {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.write_all(request.as_bytes()).expect("send");
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// A raw upgrade request with the given extra header lines.
    pub fn upgrade_request(&self, extra: &[String]) -> String {
        let mut r = String::from(
            "GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        );
        for line in extra {
            r.push_str(line);
            r.push_str("\r\n");
        }
        r.push_str("\r\n");
        r
    }
}

impl Drop for WsGate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rest of the line after `prefix`, if some line has it.
fn after(text: &str, prefix: &str) -> Option<String> {
    // Only whole lines: stderr arrives in chunks, and a line read half-way (`ws://`)
    // would pass for the whole address.
    let complete = text.rfind('\n').map_or("", |i| &text[..i]);
    complete
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map(|s| s.trim().to_string())
}

/// The built-in default policy's rules with binary reads as base64 and a small message
/// limit (so the oversize test sends 70 KB, not 16 MiB).
pub fn policy(binary: &str) -> String {
    format!(
        r#"version = 1
[limits]
binary = "{binary}"
max_message_bytes = 65536

[[rule]]
id = "workspace-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]

[[rule]]
id = "workspace-write"
effect = "allow"
ops = ["write", "delete"]
paths = ["**"]
"#
    )
}

/// A ws server run in-process with explicit `[ws]` settings (which the command line
/// cannot set until the policy loader has the section), on its own runtime thread.
pub struct InProcess {
    /// `ws://127.0.0.1:PORT/`.
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The token.
    pub token: String,
    /// Canonical workspace root.
    pub root: PathBuf,
    _dir: TempDir,
    _runtime: std::thread::JoinHandle<()>,
}

impl InProcess {
    /// Serves a fresh workspace prepared by `setup` under the built-in default policy.
    pub fn start(settings: WsSettings, setup: impl FnOnce(&Path)) -> InProcess {
        use fsgate_doors::ws;
        let (dir, root) = canonical_tempdir("fsgate-wsi-");
        setup(&root);
        let policy = fsgate_policy::Policy::builtin_default().expect("default policy");
        let workspace = fsgate_workspace::Workspace::open(&root).expect("workspace");
        let gw = std::sync::Arc::new(fsgate_gateway::Gateway::new(policy, workspace));
        let listener = ws::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let token = "in-process-test-token-0123456789".to_string();
        let t = ws::Token::from_text(&token);
        let runtime = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let _ = rt.block_on(ws::serve_with_token(gw, listener, settings, t));
        });
        // The listener is bound already; wait until the upgrade is answered (the
        // initial scan finishes before the first accept).
        let started = Instant::now();
        while TcpStream::connect(&addr).is_err() {
            assert!(
                started.elapsed() < START_TIMEOUT,
                "in-process server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        InProcess {
            url: format!("ws://{addr}/"),
            addr,
            token,
            root,
            _dir: dir,
            _runtime: runtime,
        }
    }

    /// A client connected with the token.
    pub fn client(&self) -> WsClient {
        WsClient::open(&self.addr, &self.token)
    }

    /// Opens a connection and sends `request`; returns the stream (kept open) and the
    /// response head.
    pub fn upgrade(&self, extra: &[String]) -> (TcpStream, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut r = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer {}\r\n",
            self.addr, self.token
        );
        for line in extra {
            r.push_str(line);
            r.push_str("\r\n");
        }
        r.push_str("\r\n");
        s.write_all(r.as_bytes()).expect("send");
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
                Ok(1) => buf.push(byte[0]),
                _ => break,
            }
        }
        (s, String::from_utf8_lossy(&buf).into_owned())
    }
}

/// Longest wait for one answer or event.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A WebSocket files-channel client driven from Rust (tungstenite, blocking): requests
/// matched by `requestId`, pushed events and unmatched messages collected on the side.
pub struct WsClient {
    ws: WebSocket<TcpStream>,
    /// Pushed `change` and `overflow` events, in order of arrival.
    pub events: Vec<Value>,
    /// Messages that are neither an awaited answer nor an event.
    pub others: Vec<Value>,
    replies: HashMap<String, Value>,
    next_id: u64,
    /// Set once the server closed the connection: its close frame, if any.
    pub closed: Option<Option<(u16, String)>>,
}

/// A refused upgrade: the HTTP status and body.
#[derive(Debug)]
pub struct Refused {
    /// HTTP status.
    pub status: u16,
    /// Response body.
    pub body: String,
}

impl WsClient {
    /// Connects to `addr` with the URL `ws://{host}/{path_query}` and extra headers.
    pub fn connect_with(
        addr: &str,
        host: &str,
        path_query: &str,
        headers: &[(&str, String)],
    ) -> Result<WsClient, Refused> {
        let tcp = TcpStream::connect(addr).expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let mut req = format!("ws://{host}/{path_query}")
            .into_client_request()
            .expect("request");
        for (k, v) in headers {
            req.headers_mut().insert(
                HeaderName::from_bytes(k.as_bytes()).expect("header name"),
                HeaderValue::from_str(v).expect("header value"),
            );
        }
        let config = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        match tungstenite::client::client_with_config(req, tcp, Some(config)) {
            Ok((ws, _)) => Ok(WsClient {
                ws,
                events: Vec::new(),
                others: Vec::new(),
                replies: HashMap::new(),
                next_id: 1,
                closed: None,
            }),
            Err(HandshakeError::Failure(tungstenite::Error::Http(resp))) => Err(Refused {
                status: resp.status().as_u16(),
                body: String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default())
                    .into_owned(),
            }),
            Err(e) => panic!("handshake: {e}"),
        }
    }

    /// Connects with the bearer token.
    pub fn open(addr: &str, token: &str) -> WsClient {
        Self::open_at(addr, token, "")
    }

    /// Connects with the bearer token to `/{path_query}`.
    pub fn open_at(addr: &str, token: &str, path_query: &str) -> WsClient {
        let auth = [("Authorization", format!("Bearer {token}"))];
        Self::connect_with(addr, addr, path_query, &auth)
            .unwrap_or_else(|r| panic!("refused: {} {}", r.status, r.body))
    }

    /// Sends a raw text message.
    pub fn send_text(&mut self, text: &str) {
        self.ws
            .send(Message::text(text.to_string()))
            .expect("send text");
    }

    /// Sends a binary message.
    pub fn send_binary(&mut self, bytes: &[u8]) {
        self.ws
            .send(Message::binary(bytes.to_vec()))
            .expect("send binary");
    }

    /// Sends a request of type `kind` with `fields` (a JSON object) and a fresh
    /// `requestId` unless `fields` has one; returns the id, not waiting for the answer.
    pub fn send(&mut self, kind: &str, fields: Value) -> Value {
        let mut msg = match fields {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let id = msg.get("requestId").cloned().unwrap_or_else(|| {
            self.next_id += 1;
            json!(format!("r{}", self.next_id))
        });
        msg.insert("channel".into(), json!("files"));
        msg.insert("type".into(), json!(kind));
        msg.insert("requestId".into(), id.clone());
        self.send_text(&Value::Object(msg).to_string());
        id
    }

    /// Waits for the answer to `id` (reading and sorting everything before it).
    pub fn answer(&mut self, id: &Value) -> Value {
        let key = id.to_string();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(v) = self.replies.remove(&key) {
                return v;
            }
            assert!(
                self.pump(deadline),
                "no answer to {id} within {TIMEOUT:?}; others {:?}",
                self.others
            );
        }
    }

    /// Sends a request and returns its whole answer, checking its envelope.
    pub fn request(&mut self, kind: &str, fields: Value) -> Value {
        let id = self.send(kind, fields);
        let resp = self.answer(&id);
        assert_eq!(resp["channel"], "files", "{resp}");
        assert_eq!(resp["type"], kind, "{resp}");
        assert_eq!(resp["requestId"], id, "{resp}");
        assert!(
            resp.get("data").is_some() != resp.get("error").is_some(),
            "{resp}"
        );
        resp
    }

    /// A request that must succeed: its `data`.
    pub fn ok(&mut self, kind: &str, fields: Value) -> Value {
        let resp = self.request(kind, fields.clone());
        assert!(resp.get("data").is_some(), "{kind} {fields}: {resp}");
        resp["data"].clone()
    }

    /// A request that must fail with `code`: its `errorInfo` (`error` is the string).
    pub fn fail(&mut self, kind: &str, code: i64, fields: Value) -> Value {
        let resp = self.request(kind, fields.clone());
        assert_eq!(resp["errorInfo"]["code"], code, "{kind} {fields}: {resp}");
        assert!(
            resp["errorInfo"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{resp}"
        );
        assert!(
            resp["error"].as_str().is_some_and(|m| !m.is_empty()),
            "{resp}"
        );
        resp["errorInfo"].clone()
    }

    /// The next message that is neither an answer awaited by id nor an event.
    pub fn next_other(&mut self) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if !self.others.is_empty() {
                return self.others.remove(0);
            }
            assert!(self.pump(deadline), "no message within {TIMEOUT:?}");
        }
    }

    /// The next `permission` question the server put (taken out of the answers).
    pub fn next_question(&mut self) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let found = self
                .replies
                .iter()
                .find(|(_, v)| v["type"] == "permission" && v.get("data").is_some())
                .map(|(k, _)| k.clone());
            if let Some(v) = found.and_then(|k| self.replies.remove(&k)) {
                return v;
            }
            assert!(
                self.pump(deadline),
                "no permission question within {TIMEOUT:?}"
            );
        }
    }

    /// Whether a `permission` question came and was not taken yet.
    pub fn has_question(&self) -> bool {
        self.replies.values().any(|v| v["type"] == "permission")
    }

    /// The first collected event matching `pred`, waiting for it if need be.
    pub fn wait_event(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_event_for(what, TIMEOUT, pred)
    }

    /// [`WsClient::wait_event`] with its own time limit.
    pub fn wait_event_for(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            if let Some(e) = self.events.iter().find(|e| pred(e)) {
                return e.clone();
            }
            assert!(
                self.pump(deadline),
                "no event {what} within {within:?}; got {} events, the last {:?}",
                self.events.len(),
                self.events.last()
            );
        }
    }

    /// Waits for a `change` event.
    pub fn wait_change(&mut self, event: &str, path: &str, file_type: Option<&str>) -> Value {
        self.wait_event(&format!("{event} {path}"), |e| {
            is_change(e, event, path, file_type)
        })
    }

    /// Reads whatever arrives for `d`.
    pub fn settle(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while self.pump(deadline) {}
    }

    /// The paths of the `change` events received.
    pub fn change_paths(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["type"] == "change")
            .filter_map(|e| e["path"].as_str().map(str::to_string))
            .collect()
    }

    /// Reads one message before `deadline`; false if none came (or the connection is
    /// closed).
    fn pump(&mut self, deadline: Instant) -> bool {
        match self.next_text(deadline) {
            Some(t) => {
                self.sort(serde_json::from_str(&t).expect("JSON message"));
                true
            }
            None => false,
        }
    }

    /// Waits, reading nothing, until the server's first bytes are in the socket: the
    /// instant they were seen, or None after `wait`.
    pub fn first_bytes(&mut self, wait: Duration) -> Option<Instant> {
        let tcp = self.ws.get_mut();
        tcp.set_read_timeout(Some(wait)).expect("read timeout");
        match tcp.peek(&mut [0u8; 1]) {
            Ok(n) if n > 0 => Some(Instant::now()),
            _ => None,
        }
    }

    /// The next text message, unparsed and uncollected, if one comes before
    /// `deadline` (for large answers that are only counted).
    pub fn next_text(&mut self, deadline: Instant) -> Option<String> {
        if self.closed.is_some() {
            return None;
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        let left = left.max(Duration::from_millis(1));
        self.ws
            .get_mut()
            .set_read_timeout(Some(left))
            .expect("read timeout");
        match self.ws.read() {
            Ok(Message::Text(t)) => Some(t.as_str().to_string()),
            Ok(Message::Close(frame)) => {
                self.closed = Some(frame.map(|f| (u16::from(f.code), f.reason.to_string())));
                None
            }
            Ok(Message::Ping(_) | Message::Pong(_)) => self.next_text(deadline),
            Ok(other) => panic!("unexpected frame {other:?}"),
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(_) => {
                self.closed.get_or_insert(None);
                None
            }
        }
    }

    fn sort(&mut self, msg: Value) {
        assert_eq!(msg["channel"], "files", "{msg}");
        if matches!(
            msg["type"].as_str(),
            Some("change" | "overflow" | "unwatched")
        ) {
            assert!(msg.get("requestId").is_none(), "{msg}");
            self.events.push(msg);
        } else if let Some(id) = msg.get("requestId") {
            self.replies.insert(id.to_string(), msg);
        } else {
            self.others.push(msg);
        }
    }

    /// Closes the connection politely.
    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.closed.is_none() && Instant::now() < deadline {
            self.pump(deadline);
        }
    }

    /// The underlying socket (to stop reading, or to shut it down).
    pub fn socket(&self) -> &TcpStream {
        self.ws.get_ref()
    }

    /// Answers not yet claimed by [`WsClient::answer`].
    pub fn unclaimed(&self) -> usize {
        self.replies.len()
    }

    /// Reads until `n` answers are unclaimed, or panics after `within`.
    pub fn collect_answers(&mut self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.replies.len() < n {
            assert!(
                self.pump(deadline),
                "{} of {n} answers within {within:?}",
                self.replies.len()
            );
        }
    }

    /// Takes every unclaimed answer.
    pub fn take_answers(&mut self) -> Vec<Value> {
        self.replies.drain().map(|(_, v)| v).collect()
    }
}

/// Whether `e` is a `change` event of `event` on `path` (and `file_type` if given).
pub fn is_change(e: &Value, event: &str, path: &str, file_type: Option<&str>) -> bool {
    e["type"] == "change"
        && e["event"] == event
        && e["path"] == path
        && file_type.is_none_or(|t| e["fileType"] == t)
}

/// Peak resident memory (VmHWM) of process `pid`, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}
