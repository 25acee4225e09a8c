//! Harness for the WebSocket tests: spawns the real `fsgate serve --transport ws` on a
//! fresh workspace, learns its address and token from stderr, and runs the Python
//! `websockets` peer scripts in tests/peers/ws/ against it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// Longest wait for the server to start.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest a peer script may run.
const PEER_TIMEOUT: Duration = Duration::from_secs(120);

/// The venv python that has `websockets` (installed by scripts/install-peers.sh).
pub fn python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/tools/bin/python");
    let ok = p.exists()
        && Command::new(&p)
            .args(["-c", "import websockets"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    ok.then_some(p)
}

/// The python to use, or `None` after printing why the test is skipped.
pub fn python_or_skip(test: &str) -> Option<PathBuf> {
    let p = python();
    if p.is_none() {
        println!(
            "SKIPPED: {test}: .peers/tools/bin/python with `websockets` is missing (run ./scripts/install-peers.sh)"
        );
    }
    p
}

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
        let (ws_dir, root) = canonical_tempdir("fsgate-wsx-");
        let (state_dir, state) = canonical_tempdir("fsgate-wsx-state-");
        setup(&root);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsgate"));
        cmd.args([
            "serve",
            "--transport",
            "ws",
            "--listen",
            "127.0.0.1:0",
            "--workspace",
        ])
        .arg(&root)
        .arg("--audit-log")
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

    /// Runs `tests/peers/ws/<script>` with `args`; returns its output.
    pub fn run_peer(&self, python: &Path, script: &str, args: &[&str]) -> Output {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ws");
        let mut child = Command::new(python)
            .arg(dir.join(script))
            .args(args)
            .current_dir(&dir)
            .env("FSGATE_WS_URL", &self.url)
            .env("FSGATE_WS_TOKEN", &self.token)
            .env("FSGATE_WORKSPACE", &self.root)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn python");
        let started = Instant::now();
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if started.elapsed() > PEER_TIMEOUT {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().expect("peer output")
    }

    /// Runs a peer script that must succeed; returns the summary of its `OK {...}` line.
    pub fn peer_ok(&self, python: &Path, script: &str, args: &[&str]) -> Value {
        let out = self.run_peer(python, script, args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{script} {args:?} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- fsgate stderr\n{}",
            out.status,
            self.stderr()
        );
        let line = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("OK "))
            .unwrap_or_else(|| panic!("{script}: no OK line in:\n{stdout}"));
        serde_json::from_str(line).expect("summary JSON")
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
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
    pub fn start(
        settings: fsgate::transport::ws::WsSettings,
        setup: impl FnOnce(&Path),
    ) -> InProcess {
        use fsgate::transport::ws;
        let (dir, root) = canonical_tempdir("fsgate-wsi-");
        setup(&root);
        let policy = fsgate::policy::Policy::builtin_default().expect("default policy");
        let workspace = fsgate::workspace::Workspace::open(&root).expect("workspace");
        let gw = std::sync::Arc::new(fsgate::gateway::Gateway::new(policy, workspace));
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

    /// Runs a peer script that must succeed; returns its summary.
    pub fn peer_ok(&self, python: &Path, script: &str, args: &[&str]) -> Value {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ws");
        let out = Command::new(python)
            .arg(dir.join(script))
            .args(args)
            .current_dir(&dir)
            .env("FSGATE_WS_URL", &self.url)
            .env("FSGATE_WS_TOKEN", &self.token)
            .env("FSGATE_WORKSPACE", &self.root)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("run python");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{script} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("OK "))
            .expect("OK line");
        serde_json::from_str(line).expect("summary JSON")
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
