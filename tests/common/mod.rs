//! Test harness: spawns the real `fsgate serve` binary and speaks newline-delimited JSON-RPC 2.0 to it.
//!
//! Every `Gate` owns three fresh temporary directories: the workspace (canonicalised, since
//! tempdirs may sit behind symlinks), a state directory for the audit log, backups and policy
//! files, and an `outside` directory that tests use as the target of escape attempts. None of
//! them is inside another. A reader thread files responses by id (they may arrive in any
//! order); every wait has a timeout so a hung server fails the test instead of blocking CI.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

// The harness of the tests of `fsgate run`'s view.
pub mod view;

/// How long any single wait may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// JSON-RPC error codes (docs/errors.md).
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL: i64 = -32603;
pub const NOT_FOUND: i64 = -32002;
pub const REFUSED: i64 = -32003;
pub const LIMIT: i64 = -32004;

/// The session id the harness puts into every request that lacks one.
pub const SESSION: &str = "test-session";

/// The `error` member of a JSON-RPC response.
#[derive(Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl fmt::Debug for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RpcError {{ code: {}, message: {:?}, data: {:?} }}",
            self.code, self.message, self.data
        )
    }
}

impl RpcError {
    fn from_value(v: &Value) -> RpcError {
        RpcError {
            code: v.get("code").and_then(Value::as_i64).unwrap_or(i64::MIN),
            message: v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("<no message>")
                .to_owned(),
            data: v.get("data").cloned(),
        }
    }
}

/// What the reader thread has seen on the server's stdout.
#[derive(Default)]
struct Inbox {
    /// Responses keyed by the JSON text of their id (`1` and `"1"` stay distinct), with arrival time.
    by_id: HashMap<String, (Value, Instant)>,
    /// Responses whose id is null (parse errors, invalid requests).
    null_id: Vec<Value>,
    /// Lines that were not a JSON-RPC 2.0 response: stdout must carry nothing else.
    garbage: Vec<String>,
    /// Every well-formed line, in arrival order.
    all: Vec<Value>,
    /// stdout reached EOF.
    closed: bool,
}

type Shared<T> = Arc<(Mutex<T>, Condvar)>;

/// A running `fsgate serve` process with its workspace.
pub struct Gate {
    child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    inbox: Shared<Inbox>,
    stderr: Arc<Mutex<String>>,
    next_id: AtomicU64,
    threads: Vec<JoinHandle<()>>,
    /// Canonical workspace root.
    pub root: PathBuf,
    /// Canonical directory outside the workspace for escape targets.
    pub outside: PathBuf,
    /// Canonical directory outside the workspace for the audit log, backups and policy files.
    pub state: PathBuf,
    /// The `--audit-log` file the server was started with.
    pub audit_log: PathBuf,
    /// The `--policy` file, when one was given.
    policy_path: Option<PathBuf>,
    /// The temporary directories; `relaunch` hands them on to the next server.
    _dirs: Vec<TempDir>,
}

pub fn canonical_tempdir(prefix: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create tempdir");
    let canon = dir.path().canonicalize().expect("canonicalise tempdir");
    (dir, canon)
}

/// Path to the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_fsgate")
}

impl Gate {
    /// Starts `fsgate serve` on a fresh workspace with the built-in default policy.
    pub fn start() -> Gate {
        Gate::launch(None, &[])
    }

    /// Starts `fsgate serve` with `policy` (TOML text) written to a file outside the workspace.
    pub fn with_policy(policy: &str) -> Gate {
        Gate::launch(Some(policy), &[])
    }

    /// Starts with the default policy and extra environment variables (e.g. `RUST_LOG`).
    pub fn with_env(env: &[(&str, &str)]) -> Gate {
        Gate::launch(None, env)
    }

    fn launch(policy: Option<&str>, env: &[(&str, &str)]) -> Gate {
        Gate::launch_full(policy, env, None, &[])
    }

    /// Starts with `policy` (where `{ROOT}` stands for the workspace root) and the audit
    /// log at `audit_rel` inside the workspace, as an operator might misplace it.
    pub fn with_audit_in_workspace(policy: Option<&str>, audit_rel: &str) -> Gate {
        Gate::launch_full(policy, &[], Some(audit_rel), &[])
    }

    /// Starts with `policy` (`{ROOT}` stands for the workspace root) after writing
    /// `files` (workspace-relative path, text) into the workspace.
    pub fn with_policy_and_files(policy: &str, files: &[(&str, &str)]) -> Gate {
        Gate::launch_full(Some(policy), &[], None, files)
    }

    fn launch_full(
        policy: Option<&str>,
        env: &[(&str, &str)],
        audit_rel: Option<&str>,
        files: &[(&str, &str)],
    ) -> Gate {
        let (ws_dir, root) = canonical_tempdir("fsgate-ws-");
        for (rel, text) in files {
            let p = root.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).expect("create workspace dirs");
            }
            std::fs::write(&p, text).expect("write workspace file");
        }
        let (out_dir, outside) = canonical_tempdir("fsgate-outside-");
        let (state_dir, state) = canonical_tempdir("fsgate-state-");
        let policy_path = policy.map(|text| {
            let file = state.join("policy.toml");
            let text = text.replace("{ROOT}", &root.to_string_lossy());
            std::fs::write(&file, text).expect("write policy file");
            file
        });
        let audit_log = match audit_rel {
            Some(rel) => root.join(rel),
            None => state.join("audit").join("audit.jsonl"),
        };
        Gate::spawn(
            root,
            outside,
            state,
            audit_log,
            policy_path,
            (env, &[]),
            vec![ws_dir, out_dir, state_dir],
        )
    }

    /// Starts `fsgate serve` on several workspaces: `root` first, then `extra` (each a
    /// `--workspace` argument), with `policy` (TOML) if given, keeping `dirs` alive.
    pub fn with_workspaces(
        root: PathBuf,
        extra: &[std::ffi::OsString],
        policy: Option<&str>,
        (outside, state): (PathBuf, PathBuf),
        dirs: Vec<TempDir>,
    ) -> Gate {
        let policy_path = policy.map(|text| {
            let file = state.join("policy.toml");
            std::fs::write(&file, text).expect("write policy file");
            file
        });
        let audit_log = state.join("audit").join("audit.jsonl");
        let mut args = Vec::new();
        for e in extra {
            args.push("--workspace".into());
            args.push(e.clone());
        }
        Gate::spawn(
            root,
            outside,
            state,
            audit_log,
            policy_path,
            (&[], &args),
            dirs,
        )
    }

    /// Starts a new `fsgate serve` on the workspace, state directory, policy file,
    /// audit log and backup store of `old`, after `old`'s process has ended (it is
    /// killed if it still runs). The temporary directories move to the new `Gate`.
    pub fn relaunch(mut old: Gate) -> Gate {
        let dirs = std::mem::take(&mut old._dirs);
        let (root, outside, state) = (old.root.clone(), old.outside.clone(), old.state.clone());
        let (audit_log, policy_path) = (old.audit_log.clone(), old.policy_path.clone());
        drop(old);
        Gate::spawn(
            root,
            outside,
            state,
            audit_log,
            policy_path,
            (&[], &[]),
            dirs,
        )
    }

    fn spawn(
        root: PathBuf,
        outside: PathBuf,
        state: PathBuf,
        audit_log: PathBuf,
        policy_path: Option<PathBuf>,
        (env, extra): (&[(&str, &str)], &[std::ffi::OsString]),
        dirs: Vec<TempDir>,
    ) -> Gate {
        let mut cmd = Command::new(bin());
        cmd.arg("serve").arg("--workspace").arg(&root).args(extra);
        if let Some(file) = &policy_path {
            cmd.arg("--policy").arg(file);
        }
        cmd.arg("--audit-log").arg(&audit_log);
        cmd.arg("--backup-dir").arg(state.join("backups"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn fsgate");
        let stdout = child.stdout.take().expect("child stdout");
        let stderr_pipe = child.stderr.take().expect("child stderr");
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let inbox: Shared<Inbox> = Arc::new((Mutex::new(Inbox::default()), Condvar::new()));
        let stderr = Arc::new(Mutex::new(String::new()));

        let inbox2 = Arc::clone(&inbox);
        let reader = std::thread::spawn(move || read_stdout(stdout, inbox2));
        let stderr2 = Arc::clone(&stderr);
        let err_reader = std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = stderr2.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Gate {
            child,
            stdin,
            inbox,
            stderr,
            next_id: AtomicU64::new(1),
            threads: vec![reader, err_reader],
            root,
            outside,
            state,
            audit_log,
            policy_path,
            _dirs: dirs,
        }
    }

    /// The server's process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The policy file the server was started with (when it was given one).
    pub fn policy_file(&self) -> PathBuf {
        self.state.join("policy.toml")
    }

    /// Absolute ACP path of a workspace-relative path (`""` is the root itself).
    pub fn abs(&self, rel: &str) -> String {
        if rel.is_empty() {
            return self.root.to_string_lossy().into_owned();
        }
        self.root.join(rel).to_string_lossy().into_owned()
    }

    /// Real filesystem path of a workspace-relative path.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file into the workspace directly (not through fsgate), creating parents.
    pub fn put(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&p, content).expect("write workspace file");
        p
    }

    /// Writes a file into the outside directory, creating parents.
    pub fn put_outside(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.outside.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&p, content).expect("write outside file");
        p
    }

    /// Creates a symlink at workspace-relative `rel` pointing to `target` (taken verbatim).
    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::os::unix::fs::symlink(target, &p).expect("create symlink");
    }

    /// Reads a workspace file directly, `None` if it does not exist.
    pub fn get(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root.join(rel)).ok()
    }

    /// Whether anything (even a dangling symlink) exists at workspace-relative `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        std::fs::symlink_metadata(self.root.join(rel)).is_ok()
    }

    /// Sends a request and returns its id without waiting. Adds `sessionId` to object params.
    pub fn send(&self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.send_with_id(id.clone(), method, params);
        id
    }

    /// Sends a request with a caller-chosen id (any JSON type).
    pub fn send_with_id(&self, id: Value, method: &str, mut params: Value) {
        if let Some(obj) = params.as_object_mut() {
            obj.entry("sessionId").or_insert_with(|| json!(SESSION));
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&msg.to_string());
    }

    /// Writes one raw line (a newline is appended) to the server's stdin.
    pub fn send_raw(&self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.send_bytes(&bytes);
    }

    /// Writes raw bytes to the server's stdin; a closed pipe is reported with stderr.
    pub fn send_bytes(&self, bytes: &[u8]) {
        let mut guard = self.stdin.lock().expect("stdin lock");
        let pipe = guard.as_mut().expect("stdin already closed");
        if let Err(e) = pipe.write_all(bytes).and_then(|_| pipe.flush()) {
            panic!(
                "writing to fsgate stdin failed: {e}\n--- stderr ---\n{}",
                self.stderr()
            );
        }
    }

    /// A handle to stdin that another thread can write through (for very large lines).
    pub fn stdin_handle(&self) -> Arc<Mutex<Option<ChildStdin>>> {
        Arc::clone(&self.stdin)
    }

    /// Waits for the full response object with this id.
    pub fn wait_response(&self, id: &Value) -> Value {
        self.wait_response_timed(id, TIMEOUT).0
    }

    /// Waits for the response with this id; also returns when it arrived.
    pub fn wait_response_timed(&self, id: &Value, timeout: Duration) -> (Value, Instant) {
        let key = id.to_string();
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.inbox;
        let mut inbox = lock.lock().expect("inbox lock");
        loop {
            if let Some(found) = inbox.by_id.remove(&key) {
                return found;
            }
            let now = Instant::now();
            if now >= deadline || inbox.closed {
                let closed = inbox.closed;
                drop(inbox);
                let why = if closed { "stdout closed" } else { "timed out" };
                panic!(
                    "no response for id {key} ({why})\n--- stderr ---\n{}",
                    self.stderr()
                );
            }
            inbox = cv
                .wait_timeout(inbox, deadline - now)
                .expect("inbox wait")
                .0;
        }
    }

    /// Waits for the response with this id or, whichever comes first, one with a null id.
    pub fn wait_response_or_null(&self, id: &Value) -> Value {
        let key = id.to_string();
        let deadline = Instant::now() + TIMEOUT;
        let (lock, cv) = &*self.inbox;
        let mut inbox = lock.lock().expect("inbox lock");
        loop {
            if let Some((v, _)) = inbox.by_id.remove(&key) {
                return v;
            }
            if !inbox.null_id.is_empty() {
                return inbox.null_id.remove(0);
            }
            let now = Instant::now();
            if now >= deadline || inbox.closed {
                drop(inbox);
                panic!(
                    "no response for id {key} nor a null-id one\n--- stderr ---\n{}",
                    self.stderr()
                );
            }
            inbox = cv
                .wait_timeout(inbox, deadline - now)
                .expect("inbox wait")
                .0;
        }
    }

    /// Waits for the response to `id` and splits it into result or error.
    pub fn wait(&self, id: &Value) -> Result<Value, RpcError> {
        let resp = self.wait_response(id);
        split(&resp)
    }

    /// Sends a request and waits for its outcome.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.send(method, params);
        self.wait(&id)
    }

    /// Calls and expects success; panics with the error and stderr otherwise.
    pub fn ok(&self, method: &str, params: Value) -> Value {
        match self.call(method, params.clone()) {
            Ok(v) => v,
            Err(e) => panic!(
                "{method} {params} failed: {e:?}\n--- stderr ---\n{}",
                self.stderr()
            ),
        }
    }

    /// Calls and expects an error; panics with the result otherwise.
    pub fn err(&self, method: &str, params: Value) -> RpcError {
        match self.call(method, params.clone()) {
            Ok(v) => panic!("{method} {params} unexpectedly succeeded with {v}"),
            Err(e) => e,
        }
    }

    /// Waits for the next response whose id is null.
    pub fn wait_null_id(&self) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        let (lock, cv) = &*self.inbox;
        let mut inbox = lock.lock().expect("inbox lock");
        loop {
            if !inbox.null_id.is_empty() {
                return inbox.null_id.remove(0);
            }
            let now = Instant::now();
            if now >= deadline || inbox.closed {
                drop(inbox);
                panic!("no null-id response\n--- stderr ---\n{}", self.stderr());
            }
            inbox = cv
                .wait_timeout(inbox, deadline - now)
                .expect("inbox wait")
                .0;
        }
    }

    /// Lines on stdout that were not JSON-RPC 2.0 responses.
    pub fn garbage(&self) -> Vec<String> {
        self.inbox.0.lock().expect("inbox lock").garbage.clone()
    }

    /// Every JSON-RPC message seen on stdout so far.
    pub fn all_messages(&self) -> Vec<Value> {
        self.inbox.0.lock().expect("inbox lock").all.clone()
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Closes the server's stdin (EOF).
    pub fn close_stdin(&self) {
        if let Ok(mut guard) = self.stdin.lock() {
            guard.take();
        }
    }

    /// Waits for the process to exit, killing it and failing after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    panic!(
                        "fsgate did not exit within {timeout:?}\n--- stderr ---\n{}",
                        self.stderr()
                    );
                }
                Err(e) => panic!("try_wait failed: {e}"),
            }
        }
    }

    /// Joins the stdout/stderr reader threads (after the process has exited).
    pub fn join_readers(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.close_stdin();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn read_stdout(stdout: std::process::ChildStdout, inbox: Shared<Inbox>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\n', '\r'])
            .to_owned();
        let (lock, cv) = &*inbox;
        let Ok(mut ib) = lock.lock() else { break };
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.get("jsonrpc") == Some(&json!("2.0")) && v.get("id").is_some() => {
                ib.all.push(v.clone());
                let id = v.get("id").cloned().unwrap_or(Value::Null);
                if id.is_null() {
                    ib.null_id.push(v);
                } else {
                    ib.by_id.insert(id.to_string(), (v, Instant::now()));
                }
            }
            _ => ib.garbage.push(text),
        }
        cv.notify_all();
    }
    let (lock, cv) = &*inbox;
    if let Ok(mut ib) = lock.lock() {
        ib.closed = true;
    }
    cv.notify_all();
}

/// Splits a response object into its result or error; panics on a malformed response.
pub fn split(resp: &Value) -> Result<Value, RpcError> {
    match (resp.get("result"), resp.get("error")) {
        (Some(r), None) => Ok(r.clone()),
        (None, Some(e)) => Err(RpcError::from_value(e)),
        _ => panic!("response must have exactly one of result/error: {resp}"),
    }
}

/// Asserts a policy refusal: code -32003 and `error.data = {reason, rule, path}` as strings.
/// `path_rel` is the workspace-relative path the refusal should name (absolute or relative form).
pub fn assert_refused(res: Result<Value, RpcError>, gate: &Gate, path_rel: &str) -> RpcError {
    let err = match res {
        Ok(v) => panic!("expected refusal (-32003) for {path_rel}, got success {v}"),
        Err(e) => e,
    };
    assert_eq!(
        err.code, REFUSED,
        "expected -32003 for {path_rel}, got {err:?}"
    );
    let data = err
        .data
        .clone()
        .unwrap_or_else(|| panic!("-32003 without error.data: {err:?}"));
    for key in ["reason", "rule", "path"] {
        let s = data.get(key).and_then(Value::as_str);
        assert!(
            s.is_some_and(|s| !s.is_empty()),
            "error.data.{key} missing or empty: {err:?}"
        );
    }
    let path = data["path"].as_str().unwrap_or_default();
    let ok_forms = [
        gate.abs(path_rel),
        path_rel.to_owned(),
        format!("/{path_rel}"),
    ];
    assert!(
        ok_forms.iter().any(|f| f == path),
        "error.data.path {path:?} should name {path_rel:?} (one of {ok_forms:?}): {err:?}"
    );
    err
}

/// Asserts a refusal (-32003 with `error.data = {reason, rule, path}`) without checking which
/// path it names: for paths outside the workspace, which have no workspace-relative form.
pub fn assert_refused_any(res: Result<Value, RpcError>) -> RpcError {
    let err = match res {
        Ok(v) => panic!("expected refusal (-32003), got success {v}"),
        Err(e) => e,
    };
    assert_eq!(err.code, REFUSED, "expected -32003, got {err:?}");
    let data = err
        .data
        .clone()
        .unwrap_or_else(|| panic!("-32003 without error.data: {err:?}"));
    for key in ["reason", "rule", "path"] {
        assert!(
            data.get(key).and_then(Value::as_str).is_some(),
            "error.data.{key} missing: {err:?}"
        );
    }
    err
}

/// Asserts an error with exactly `code`.
pub fn assert_code(res: Result<Value, RpcError>, code: i64) -> RpcError {
    match res {
        Ok(v) => panic!("expected error {code}, got success {v}"),
        Err(e) => {
            assert_eq!(e.code, code, "wrong error code: {e:?}");
            e
        }
    }
}

/// Runs the binary with `args` to completion (stdin closed), failing after the timeout.
pub fn run_cli(args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    wait_output(&mut child, TIMEOUT)
}

/// Collects a child's output, killing it and failing if it runs past `timeout`.
pub fn wait_output(child: &mut Child, timeout: Duration) -> Output {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut v);
        }
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut v);
        }
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                // Where each thread waits, and what it said, tell where it hung.
                let threads = thread_states(child.id());
                let _ = child.kill();
                let _ = child.wait();
                let said = t_err.join().unwrap_or_default();
                panic!(
                    "fsgate did not exit within {timeout:?}; its threads:\n{threads}its stderr:\n{}",
                    String::from_utf8_lossy(&said)
                );
            }
        }
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// Names of `_fsgate/ls` entries.
pub fn entry_names(ls_result: &Value) -> Vec<String> {
    ls_result["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("ls result without entries array: {ls_result}"))
        .iter()
        .map(|e| {
            e["name"]
                .as_str()
                .unwrap_or_else(|| panic!("entry without name: {e}"))
                .to_owned()
        })
        .collect()
}

/// Paths of `_fsgate/glob` matches, sorted.
pub fn glob_paths(glob_result: &Value) -> Vec<String> {
    let mut v: Vec<String> = glob_result["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("glob result without matches array: {glob_result}"))
        .iter()
        .map(|m| {
            m.as_str()
                .unwrap_or_else(|| panic!("glob match not a string: {m}"))
                .to_owned()
        })
        .collect();
    v.sort();
    v
}

/// `(path, lineNumber, line)` of `_fsgate/grep` matches, sorted; a trailing newline is dropped.
pub fn grep_hits(grep_result: &Value) -> Vec<(String, u64, String)> {
    let mut v: Vec<(String, u64, String)> = grep_result["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("grep result without matches array: {grep_result}"))
        .iter()
        .map(|m| {
            let path = m["path"]
                .as_str()
                .unwrap_or_else(|| panic!("grep match without path: {m}"));
            let n = m["lineNumber"]
                .as_u64()
                .unwrap_or_else(|| panic!("grep match without lineNumber: {m}"));
            let line = m["line"]
                .as_str()
                .unwrap_or_else(|| panic!("grep match without line: {m}"));
            (
                path.to_owned(),
                n,
                line.trim_end_matches(['\n', '\r']).to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A policy file like the default one, with the given `[limits]` values and extra TOML appended.
pub fn policy_with(max_read: u64, max_write: u64, binary: &str, extra: &str) -> String {
    format!(
        r#"version = 1

[secrets]
builtin = true
patterns = []

[limits]
max_read_bytes = {max_read}
max_write_bytes = {max_write}
binary = "{binary}"

[[rule]]
id = "workspace-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
reason = "the workspace is readable"

[[rule]]
id = "workspace-write"
effect = "allow"
ops = ["write", "delete"]
paths = ["**"]
reason = "the workspace is writable"
{extra}"#
    )
}

/// Whether a test that cannot run here (a missing peer, tool or kernel feature) must
/// fail rather than skip: under CI (`CI` set to anything but `false`/`0`), or with
/// `FSGATE_REQUIRE_PEERS` set. `./scripts/test.sh` sets the latter.
pub fn must_not_skip() -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    ci || std::env::var_os("FSGATE_REQUIRE_PEERS").is_some()
}

/// Says why `test` cannot run here: fails it under CI (see [`must_not_skip`]),
/// otherwise prints `SKIPPED: ...` where cargo's output capture cannot hide it.
pub fn skip_or_fail(test: &str, reason: &str) {
    assert!(
        !must_not_skip(),
        "{test} cannot run here: {reason} (required under CI / FSGATE_REQUIRE_PEERS)"
    );
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {test}: {reason}");
}

/// The raw control, format (bidi, zero-width) and separator characters in `text`, other
/// than the newlines that end its lines: what no output a person reads may hold.
pub fn raw_controls(text: &str) -> Vec<char> {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    text.chars()
        .filter(|&c| {
            c != '\n'
                && matches!(
                    get_general_category(c),
                    G::Control | G::Format | G::LineSeparator | G::ParagraphSeparator
                )
        })
        .collect()
}

/// One line per thread of process `pid`: its name, kernel wait channel and the syscall
/// it is in (`/proc`), for a hang's report.
pub fn thread_states(pid: u32) -> String {
    let task = format!("/proc/{pid}/task");
    let Ok(entries) = std::fs::read_dir(&task) else {
        return format!("({task} unreadable)\n");
    };
    let mut out = String::new();
    for e in entries.flatten() {
        let dir = e.path();
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        out.push_str(&format!(
            "  {} {}: wchan {} syscall {} {}\n",
            e.file_name().to_string_lossy(),
            read("comm"),
            read("wchan"),
            read("syscall"),
            signal_masks(&read("status"), &["SigPnd", "SigBlk"])
        ));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    out.push_str(&format!(
        "  process: {}\n",
        signal_masks(&status, &["ShdPnd", "SigCgt", "SigIgn"])
    ));
    out.push_str(&stacks(pid));
    out
}

/// The named signal-mask lines of a /proc status file, on one line.
fn signal_masks(status: &str, keys: &[&str]) -> String {
    status
        .lines()
        .filter(|l| keys.iter().any(|k| l.starts_with(&format!("{k}:"))))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every thread's stack from gdb, when gdb is installed (a hang's report only).
fn stacks(pid: u32) -> String {
    let out = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-p",
            &pid.to_string(),
            "-ex",
            "thread apply all bt 25",
        ])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let frames: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with('#') || l.starts_with("Thread "))
                .collect();
            format!("  stacks (gdb):\n    {}\n", frames.join("\n    "))
        }
        Err(e) => format!("  (no stacks: gdb: {e})\n"),
    }
}

/// Gives `/dev/fuse` a desktop's mode (0666) while the value lives, if it has a
/// stricter one (as on machines where only root may open it), and puts the mode back
/// when dropped. Held under an exclusive lock on a file beside the device's users (tests
/// of this and other processes take turns), so no test puts the mode back under
/// another.
pub struct DesktopFuse {
    mode: Option<u32>,
    _lock: std::fs::File,
}

impl DesktopFuse {
    pub fn ensure() -> DesktopFuse {
        use std::os::unix::fs::PermissionsExt;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(std::env::temp_dir().join("fsgate-tests-dev-fuse.lock"))
            .expect("the lock file");
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).expect("flock");
        let mode = std::fs::metadata("/dev/fuse")
            .expect("/dev/fuse")
            .permissions()
            .mode();
        let mut held = DesktopFuse {
            mode: None,
            _lock: lock,
        };
        if mode & 0o666 != 0o666 {
            std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(0o666))
                .expect("chmod /dev/fuse");
            held.mode = Some(mode);
        }
        held
    }
}

impl Drop for DesktopFuse {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if let Some(mode) = self.mode {
            let _ = std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(mode));
        }
    }
}
