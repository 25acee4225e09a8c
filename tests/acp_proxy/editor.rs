//! The editor's side of `fsgate acp`: spawns the real binary hosting a real ACP agent
//! (tests/peers/acp/) and speaks raw JSON-RPC lines to it, as Zed would.
//!
//! A reader thread keeps every line fsgate writes (so tests can assert over all of
//! them), files responses by id, and answers the agent's requests the way an editor
//! does: `session/request_permission` with the first option, anything else with
//! "method not found" (fs/* must never get here; tests check that). Every wait has a
//! timeout, and the process is killed on drop, so nothing can hang CI.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// How long any single wait may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(8);

/// The repository root (peers and agent scripts are found from it).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Which agent runs behind fsgate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// tests/peers/acp/agent.py on the Python SDK.
    Python,
    /// tests/peers/acp/agent.mjs on the TypeScript SDK.
    TypeScript,
    /// tests/peers/acp/raw_agent.py: raw JSON lines, no SDK.
    Raw,
    /// fast-agent (PyPI `fast-agent-mcp`) with its `passthrough` model.
    FastAgent,
}

impl Peer {
    /// The agent command line, or why it cannot run here.
    pub fn command(self) -> Result<Vec<OsString>, String> {
        let repo = repo();
        let python = repo.join(".peers/acp/bin/python");
        let script = |name: &str| repo.join("tests/peers/acp").join(name).into_os_string();
        match self {
            Peer::Python | Peer::Raw => {
                if !python.exists() {
                    return Err(format!(
                        "{} is missing: run ./scripts/install-peers.sh",
                        python.display()
                    ));
                }
                let name = if self == Peer::Python {
                    "agent.py"
                } else {
                    "raw_agent.py"
                };
                Ok(vec![python.into_os_string(), script(name)])
            }
            Peer::TypeScript => {
                let sdk = sdk_dir();
                if !sdk.join("package.json").exists() {
                    return Err(format!(
                        "{} is missing: run ./scripts/install-peers.sh",
                        sdk.display()
                    ));
                }
                let node_ok = Command::new("node")
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                if !node_ok {
                    return Err("`node` is not on PATH".into());
                }
                Ok(vec!["node".into(), script("agent.mjs")])
            }
            Peer::FastAgent => {
                let bin = repo.join(".peers/fast-agent/bin/fast-agent-acp");
                if !bin.exists() {
                    return Err(format!(
                        "{} is missing: run ./scripts/install-peers.sh (it needs Python 3.12, via pyenv if need be)",
                        bin.display()
                    ));
                }
                let args = ["--model", "passthrough", "--no-permissions"];
                Ok(std::iter::once(bin.into_os_string())
                    .chain(args.map(OsString::from))
                    .collect())
            }
        }
    }

    /// The command, or `None` when the peer is missing (`crate::common::skip_or_fail`:
    /// printed and skipped locally, a failure under CI, fast-agent included).
    pub fn command_or_skip(self, test: &str) -> Option<Vec<OsString>> {
        match self.command() {
            Ok(cmd) => Some(cmd),
            Err(reason) => {
                crate::common::skip_or_fail(test, &format!("peer {self:?} unavailable: {reason}"));
                None
            }
        }
    }
}

/// The TypeScript SDK package directory installed by scripts/install-peers.sh.
pub fn sdk_dir() -> PathBuf {
    repo().join(".peers/node/node_modules/@agentclientprotocol/sdk")
}

/// How to start fsgate.
#[derive(Default)]
pub struct Options {
    /// Policy file (`--policy`); the built-in default if `None`.
    pub policy: Option<PathBuf>,
    /// Policy text, written to a file in the state directory and passed as `--policy`.
    pub policy_text: Option<String>,
    /// Pass `--confine-agent`.
    pub confine: bool,
    /// Extra environment for fsgate (and so for the agent).
    pub env: Vec<(String, OsString)>,
    /// Variables removed from fsgate's environment (after `env`; including the
    /// FSGATE_ACP_SDK and PYTHONUNBUFFERED the harness sets by default).
    pub env_remove: Vec<String>,
    /// fsgate's working directory (and so the agent's); the test's own if `None`.
    pub cwd: Option<PathBuf>,
    /// More `--workspace` arguments, after the first.
    pub workspaces: Vec<OsString>,
    /// How the editor answers `session/request_permission`.
    pub permission: Permission,
}

/// How the test editor answers `session/request_permission`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// With the first option offered.
    #[default]
    First,
    /// With the option of this kind (`allow_once`, `reject_once`, ...).
    Kind(&'static str),
    /// Never: the question waits until fsgate gives up.
    Ignore,
}

impl Options {
    /// Applies the environment and working directory to fsgate's command.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for k in &self.env_remove {
            cmd.env_remove(k);
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
    }
}

#[derive(Default)]
struct Inbox {
    /// Every line fsgate wrote to stdout, in order.
    raw: Vec<String>,
    /// Responses to our requests, by the JSON text of their id.
    responses: HashMap<String, Value>,
    /// stdout reached EOF.
    closed: bool,
}

type Shared<T> = Arc<(Mutex<T>, Condvar)>;

/// A running `fsgate acp -- AGENT` with its workspace, played from the editor's side.
pub struct Editor {
    child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    inbox: Shared<Inbox>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
    /// Canonical workspace root.
    pub root: PathBuf,
    /// Canonical directory outside the workspace (escape targets, a fake home).
    pub outside: PathBuf,
    /// Canonical directory holding the audit log (`audit.jsonl`), backups and policy.
    pub state: PathBuf,
    _dirs: [TempDir; 3],
}

fn canonical_tempdir(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create tempdir");
    let canon = dir.path().canonicalize().expect("canonicalise tempdir");
    (dir, canon)
}

impl Editor {
    /// Starts `fsgate acp ... -- agent` with the default policy.
    pub fn start(agent: &[OsString]) -> Editor {
        Editor::launch(agent, Options::default())
    }

    /// Starts `fsgate acp ... -- agent`.
    pub fn launch(agent: &[OsString], opts: Options) -> Editor {
        let (ws_dir, root) = canonical_tempdir("fsgate-ws-");
        let (out_dir, outside) = canonical_tempdir("fsgate-outside-");
        let (state_dir, state) = canonical_tempdir("fsgate-state-");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsgate"));
        cmd.arg("acp").arg("--workspace").arg(&root);
        for w in &opts.workspaces {
            cmd.arg("--workspace").arg(w);
        }
        if let Some(text) = &opts.policy_text {
            let file = state.join("policy.toml");
            std::fs::write(&file, text).expect("write policy file");
            cmd.arg("--policy").arg(file);
        } else if let Some(p) = &opts.policy {
            cmd.arg("--policy").arg(p);
        }
        cmd.arg("--audit-log").arg(state.join("audit.jsonl"));
        cmd.arg("--backup-dir").arg(state.join("backups"));
        if opts.confine {
            cmd.arg("--confine-agent");
        }
        cmd.arg("--").args(agent);
        cmd.env("FSGATE_ACP_SDK", sdk_dir());
        cmd.env("PYTHONUNBUFFERED", "1");
        opts.apply(&mut cmd);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fsgate acp");
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let inbox: Shared<Inbox> = Arc::default();
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout piped");
        let (i2, s2) = (Arc::clone(&inbox), Arc::clone(&stdin));
        let permission = opts.permission;
        std::thread::spawn(move || read_stdout(out, &i2, &s2, permission));
        let mut err = child.stderr.take().expect("stderr piped");
        let e2 = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = e2.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Editor {
            child,
            stdin,
            inbox,
            stderr,
            next_id: 0,
            root,
            outside,
            state,
            _dirs: [ws_dir, out_dir, state_dir],
        }
    }

    /// fsgate's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// fsgate's and the agent's stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Writes one line to fsgate's stdin.
    pub fn send_raw(&self, line: &str) {
        write_line(&self.stdin, line)
            .unwrap_or_else(|e| panic!("write to fsgate: {e}\nstderr:\n{}", self.stderr()));
    }

    /// Sends a request with the next id of the editor's own numbering (from 0).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.request_with_id(id.clone(), method, params);
        id
    }

    /// Sends a request with a chosen id.
    pub fn request_with_id(&self, id: Value, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
    }

    /// Waits for the response to `id`.
    pub fn response(&self, id: &Value) -> Value {
        self.response_within(id, TIMEOUT)
    }

    /// Waits up to `limit` for the response to `id`.
    pub fn response_within(&self, id: &Value, limit: Duration) -> Value {
        let key = id.to_string();
        let (lock, cv) = &*self.inbox;
        let deadline = Instant::now() + limit;
        let mut inbox = lock.lock().expect("inbox lock");
        loop {
            if let Some(v) = inbox.responses.get(&key) {
                return v.clone();
            }
            let now = Instant::now();
            if inbox.closed || now >= deadline {
                let why = if inbox.closed {
                    "fsgate closed stdout"
                } else {
                    "timed out"
                };
                let raw = inbox.raw.join("\n");
                drop(inbox);
                panic!(
                    "no response to id {key}: {why}\nstdout:\n{raw}\nstderr:\n{}",
                    self.stderr()
                );
            }
            inbox = cv
                .wait_timeout(inbox, deadline - now)
                .expect("inbox wait")
                .0;
        }
    }

    /// Sends a request and returns its `result`, failing on an error response.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        let resp = self.response(&id);
        match resp.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {resp}\nstderr:\n{}", self.stderr()),
        }
    }

    /// `initialize` with the given (deliberately wrong) fs capabilities; returns the result.
    pub fn initialize(&mut self, read: bool, write: bool) -> Value {
        self.call(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": read, "writeTextFile": write}, "terminal": false},
                "clientInfo": {"name": "fsgate-test-editor", "version": "0"},
            }),
        )
    }

    /// `session/new` in `cwd`; returns the sessionId.
    pub fn new_session_in(&mut self, cwd: &Path) -> String {
        let r = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}));
        r["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId in {r}"))
            .to_string()
    }

    /// `initialize` (with both fs capabilities false) and `session/new` in the workspace.
    pub fn open_session(&mut self) -> String {
        self.initialize(false, false);
        let root = self.root.clone();
        self.new_session_in(&root)
    }

    /// Sends `session/prompt` with `text`, waits for the end of the turn, and returns the
    /// agent's reports: the JSON in each `agent_message_chunk` of that session.
    pub fn prompt(&mut self, session: &str, text: &str) -> Vec<Value> {
        let start = self.line_count();
        let id = self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
        self.finish_prompt(session, &id, start)
    }

    /// How many lines fsgate has written so far (the start of a prompt's window).
    pub fn line_count(&self) -> usize {
        self.inbox.0.lock().map(|i| i.raw.len()).unwrap_or(0)
    }

    /// Waits for the prompt `id` to end and collects its reports: the chunks among the
    /// lines from index `start` up to the prompt's response.
    pub fn finish_prompt(&self, session: &str, id: &Value, start: usize) -> Vec<Value> {
        let resp = self.response(id);
        assert_eq!(
            resp["result"]["stopReason"],
            "end_turn",
            "prompt failed: {resp}\nstderr:\n{}",
            self.stderr()
        );
        // The agent's updates precede its response on the one ordered relay.
        let mut reports = Vec::new();
        for v in self.lines().into_iter().skip(start) {
            if v.get("id") == Some(id) && v.get("method").is_none() {
                break;
            }
            let p = &v["params"];
            if v["method"] == "session/update"
                && p["sessionId"] == session
                && p["update"]["sessionUpdate"] == "agent_message_chunk"
                && let Some(text) = p["update"]["content"]["text"].as_str()
                && let Ok(report) = serde_json::from_str::<Value>(text)
            {
                reports.push(report);
            }
        }
        reports
    }

    /// Every line fsgate wrote so far, parsed (lines that are not JSON become strings).
    pub fn lines(&self) -> Vec<Value> {
        let (lock, _) = &*self.inbox;
        let inbox = lock.lock().expect("inbox lock");
        inbox
            .raw
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.clone())))
            .collect()
    }

    /// Every line fsgate wrote so far, byte for byte.
    pub fn raw_lines(&self) -> Vec<String> {
        let (lock, _) = &*self.inbox;
        lock.lock().map(|i| i.raw.clone()).unwrap_or_default()
    }

    /// The audit log's records so far.
    pub fn audit_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state.join("audit.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Closes fsgate's stdin (the editor went away).
    pub fn close_stdin(&self) {
        if let Ok(mut s) = self.stdin.lock() {
            s.take();
        }
    }

    /// Waits up to `limit` for fsgate to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_line(stdin: &Mutex<Option<ChildStdin>>, line: &str) -> std::io::Result<()> {
    let mut guard = stdin
        .lock()
        .map_err(|_| std::io::Error::other("stdin lock poisoned"))?;
    let s = guard
        .as_mut()
        .ok_or_else(|| std::io::Error::other("stdin already closed"))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    s.flush()
}

/// The reader thread: files every line and answers the agent's requests.
fn read_stdout(
    out: impl Read,
    inbox: &Shared<Inbox>,
    stdin: &Mutex<Option<ChildStdin>>,
    permission: Permission,
) {
    let (lock, cv) = &**inbox;
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        let parsed: Option<Value> = serde_json::from_str(&line).ok();
        if let Ok(mut inbox) = lock.lock() {
            inbox.raw.push(line);
            if let Some(v) = &parsed
                && v.get("method").is_none()
                && let Some(id) = v.get("id")
            {
                inbox.responses.insert(id.to_string(), v.clone());
            }
        }
        cv.notify_all();
        if let Some(v) = parsed
            && let (Some(id), Some(method)) = (v.get("id"), v.get("method").and_then(Value::as_str))
        {
            let reply = if method == "session/request_permission" {
                let options = v["params"]["options"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let option = match permission {
                    Permission::First => options.first(),
                    Permission::Kind(kind) => options.iter().find(|o| o["kind"] == kind),
                    Permission::Ignore => continue,
                };
                let option = option.map(|o| o["optionId"].clone()).unwrap_or_default();
                json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "selected", "optionId": option}}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("the test editor does not serve {method}")}})
            };
            let _ = write_line(stdin, &reply.to_string());
        }
    }
    if let Ok(mut inbox) = lock.lock() {
        inbox.closed = true;
    }
    cv.notify_all();
}

/// The `ok` of a report, failing with the report if it is an error.
pub fn ok(report: &Value) -> &Value {
    match report.get("ok") {
        Some(v) => v,
        None => panic!("expected success, got {report}"),
    }
}

/// The `error` of a report, failing with the report if it succeeded.
pub fn err(report: &Value) -> &Value {
    match report.get("error") {
        Some(e) if !e.is_null() => e,
        _ => panic!("expected an error, got {report}"),
    }
}

/// The method names of a message, or of each element of a batch.
pub fn methods_of(v: &Value) -> Vec<String> {
    let items = match v {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    items
        .into_iter()
        .filter_map(|m| m.get("method").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The test-only agent binary (tests/bin/acp_agent.rs) with `args`, or None after
/// `skip_or_fail` when the build left it out.
pub fn bin_agent(test: &str, args: &[&str]) -> Option<Vec<std::ffi::OsString>> {
    let bin = option_env!("CARGO_BIN_EXE_fsgate-test-acp-agent").unwrap_or_default();
    if bin.is_empty() || !std::path::Path::new(bin).exists() {
        crate::common::skip_or_fail(test, "built without `--features test-bins`");
        return None;
    }
    Some(
        std::iter::once(bin)
            .chain(args.iter().copied())
            .map(Into::into)
            .collect(),
    )
}
