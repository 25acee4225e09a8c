//! Harness for the MCP tests: spawns the real `fsgate serve --transport mcp` on a fresh
//! workspace (plus a state dir for the audit log and backups, and a directory outside
//! the workspace), writes JSON-RPC lines, and files responses by id with a timeout.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// Longest wait for any one response.
pub const TIMEOUT: Duration = Duration::from_secs(15);

/// The `_meta` a 2026-07-28 (stateless) request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "fsgate-tests", "version": "0"},
    })
}

/// Fresh directories: workspace, outside, state. Canonical paths (tempdirs may sit
/// behind symlinks).
pub struct Dirs {
    pub root: PathBuf,
    pub outside: PathBuf,
    pub state: PathBuf,
    _keep: [TempDir; 3],
}

fn canonical_tempdir(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    let canon = dir.path().canonicalize().expect("canonicalise tempdir");
    (dir, canon)
}

impl Dirs {
    pub fn new() -> Dirs {
        let (a, root) = canonical_tempdir("fsgate-mcp-ws-");
        let (b, outside) = canonical_tempdir("fsgate-mcp-outside-");
        let (c, state) = canonical_tempdir("fsgate-mcp-state-");
        Dirs {
            root,
            outside,
            state,
            _keep: [a, b, c],
        }
    }

    /// Writes a workspace file, creating parents.
    pub fn put(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content).expect("write fixture");
        p
    }

    /// Absolute path of a workspace-relative path.
    pub fn abs(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// The active audit log file.
    pub fn audit_log(&self) -> PathBuf {
        self.state.join("audit").join("audit.jsonl")
    }

    /// The audit log's records.
    pub fn audit_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.audit_log()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// `serve --transport mcp` arguments for these directories.
    pub fn serve_args(&self) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "serve".into(),
            "--transport".into(),
            "mcp".into(),
            "--workspace".into(),
            s(&self.root),
            "--audit-log".into(),
            s(&self.audit_log()),
            "--backup-dir".into(),
            s(&self.state.join("backups")),
        ]
    }
}

#[derive(Default)]
struct Inbox {
    by_id: HashMap<String, Value>,
    /// Lines that are not JSON: stdout must carry only protocol messages.
    garbage: Vec<String>,
    /// Requests from the server (`roots/list`...), oldest first, until answered.
    requests: Vec<Value>,
    closed: bool,
}

/// A running `fsgate serve --transport mcp`.
pub struct McpGate {
    pub dirs: Dirs,
    child: Child,
    stdin: Option<ChildStdin>,
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
    stderr: Arc<Mutex<String>>,
}

impl McpGate {
    /// Starts the server on fresh directories, with `policy` (TOML) if given.
    pub fn start(policy: Option<&str>) -> McpGate {
        let dirs = Dirs::new();
        let mut args = dirs.serve_args();
        if let Some(text) = policy {
            let file = dirs.state.join("policy.toml");
            std::fs::write(&file, text).expect("write policy");
            args.push("--policy".into());
            args.push(file.to_string_lossy().into_owned());
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsgate"));
        cmd.args(&args).current_dir(&dirs.state);
        McpGate::spawn(cmd, dirs)
    }

    /// Starts any stdio MCP server `cmd` (e.g. the reference server) on `dirs`.
    pub fn spawn(mut cmd: Command, dirs: Dirs) -> McpGate {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the MCP server");
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let inbox: Arc<(Mutex<Inbox>, Condvar)> = Arc::default();
        let inbox2 = Arc::clone(&inbox);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let (lock, cv) = &*inbox2;
                let mut ib = lock.lock().expect("inbox");
                match serde_json::from_str::<Value>(&line) {
                    // A request from the server: its id is the server's, not ours.
                    Ok(v) if v.get("method").is_some() && v.get("id").is_some() => {
                        ib.requests.push(v);
                    }
                    Ok(v) => {
                        let id = v
                            .get("id")
                            .map(Value::to_string)
                            .unwrap_or_else(|| "null".into());
                        ib.by_id.insert(id, v);
                    }
                    Err(_) => ib.garbage.push(line),
                }
                cv.notify_all();
            }
            let (lock, cv) = &*inbox2;
            lock.lock().expect("inbox").closed = true;
            cv.notify_all();
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr2 = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = String::new();
            let _ = stderr_pipe.read_to_string(&mut buf);
            stderr2.lock().expect("stderr").push_str(&buf);
        });
        let stdin = child.stdin.take();
        McpGate {
            dirs,
            child,
            stdin,
            inbox,
            stderr,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one raw line.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request with this id.
    pub fn request(&mut self, id: u64, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string());
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method}).to_string());
    }

    /// Waits for the response with this id.
    pub fn response(&self, id: u64) -> Value {
        self.try_response(id, TIMEOUT)
            .unwrap_or_else(|| panic!("no response to id {id}; stderr:\n{}", self.stderr()))
    }

    /// The response with this id, if it arrives within `wait`.
    pub fn try_response(&self, id: u64, wait: Duration) -> Option<Value> {
        self.try_response_keyed(id.to_string(), wait)
    }

    /// The response whose id is `id` (a JSON id of any type), if it arrives within `wait`.
    pub fn try_response_to(&self, id: &Value, wait: Duration) -> Option<Value> {
        self.try_response_keyed(id.to_string(), wait)
    }

    /// The (latest) response with a null id (a parse error), if one arrives within `wait`.
    pub fn try_null_response(&self, wait: Duration) -> Option<Value> {
        self.try_response_keyed("null".into(), wait)
    }

    fn try_response_keyed(&self, key: String, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        let (lock, cv) = &*self.inbox;
        let mut ib = lock.lock().expect("inbox");
        loop {
            if let Some(v) = ib.by_id.remove(&key) {
                return Some(v);
            }
            let now = Instant::now();
            if ib.closed || now >= deadline {
                return None;
            }
            ib = cv.wait_timeout(ib, deadline - now).expect("inbox").0;
        }
    }

    /// Request and wait: the `result`, panicking on a JSON-RPC error.
    pub fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.request(id, method, params);
        let r = self.response(id);
        match r.get("result") {
            Some(v) => v.clone(),
            None => panic!("{method}: expected a result, got {r}"),
        }
    }

    /// The 2025-era handshake.
    pub fn initialize(&mut self, version: &str) -> Value {
        let r = self.call(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        self.notify("notifications/initialized");
        r
    }

    /// The 2025-era handshake declaring these client `capabilities`.
    pub fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        let r = self.call(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}}),
        );
        self.notify("notifications/initialized");
        r
    }

    /// The oldest unanswered request from the server with this method, if one arrives
    /// within `wait`.
    pub fn server_request(&self, method: &str, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        let (lock, cv) = &*self.inbox;
        let mut ib = lock.lock().expect("inbox");
        loop {
            if let Some(i) = ib.requests.iter().position(|r| r["method"] == method) {
                return Some(ib.requests.remove(i));
            }
            let now = Instant::now();
            if ib.closed || now >= deadline {
                return None;
            }
            ib = cv.wait_timeout(ib, deadline - now).expect("inbox").0;
        }
    }

    /// Waits for the server's `roots/list` and answers it with these root URIs.
    pub fn answer_roots(&mut self, uris: &[String]) {
        let req = self
            .server_request("roots/list", TIMEOUT)
            .unwrap_or_else(|| panic!("no roots/list from the server; stderr:\n{}", self.stderr()));
        let roots: Vec<Value> = uris.iter().map(|u| json!({"uri": u})).collect();
        let answer = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"roots": roots}});
        self.send_line(&answer.to_string());
    }

    /// A `tools/call` result (session era: no per-request `_meta`).
    pub fn tool(&mut self, id: u64, name: &str, args: Value) -> Value {
        self.call(id, "tools/call", json!({"name": name, "arguments": args}))
    }

    /// Non-JSON lines seen on stdout.
    pub fn garbage(&self) -> Vec<String> {
        self.inbox.0.lock().expect("inbox").garbage.clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }

    /// Closes stdin.
    pub fn close_input(&mut self) {
        self.stdin = None;
    }

    /// The exit status, once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Closes stdin and waits for the process to exit.
    pub fn finish(&mut self) -> ExitStatus {
        self.stdin = None;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "fsgate did not exit after stdin closed; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for McpGate {
    fn drop(&mut self) {
        self.stdin = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The text blocks of a tool result, joined.
pub fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}
