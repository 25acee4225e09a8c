//! Two gateways on one workspace (an MCP server for one tool, the ACP proxy for the
//! editor): with the default log each appends to a chain of its own in the workspace's
//! audit directory, and `audit verify`/`show --workspace` read them together. A log the
//! operator named is still refused while another process holds it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{TIMEOUT, bin, canonical_tempdir, wait_output};

/// A running gateway: its stdin, its stdout lines, its stderr in a file.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Running {
    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").expect("write request");
        stdin.flush().expect("flush");
    }

    /// The answer with `id` (other lines, such as notifications, are skipped).
    fn answer(&mut self, id: u64) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(TIMEOUT)
                .unwrap_or_else(|_| panic!("no answer {id}: {}", self.stderr_text()));
            let v: Value = serde_json::from_str(&line).expect("an answer is JSON");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Closes stdin and waits for a clean exit; returns stderr.
    fn finish(mut self) -> String {
        drop(self.stdin.take());
        let out = wait_output(&mut self.child, TIMEOUT);
        assert!(out.status.success(), "{out:?}: {}", self.stderr_text());
        self.stderr_text()
    }
}

struct Setup {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    ws: PathBuf,
    state: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let (ws_dir, ws) = canonical_tempdir("fsgate-ws-");
        let (state_dir, state) = canonical_tempdir("fsgate-state-");
        Setup {
            _dirs: (ws_dir, state_dir),
            ws,
            state,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let ws = self.ws.to_string_lossy();
        let mut cmd = Command::new(bin());
        cmd.args(args.iter().map(|a| a.replace("{WS}", &ws)))
            .env("XDG_STATE_HOME", &self.state)
            .env("HOME", &self.state);
        cmd
    }

    fn start(&self, args: &[&str], stderr_name: &str) -> Running {
        let stderr = self.state.join(stderr_name);
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(file)
            .spawn()
            .expect("spawn fsgate");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Running {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fsgate");
        wait_output(&mut child, TIMEOUT)
    }

    /// The workspace's default audit directory (the one state directory's `audit/`).
    fn audit_dir(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.state.join("fsgate"))
            .expect("state directory")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.remove(0).join("audit")
    }
}

fn acp_write(id: u64, path: &Path, content: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
           "params": {"sessionId": "editor", "path": path, "content": content}})
}

/// Starts an MCP server and writes `name` through it; the server is left running.
fn mcp_writes(s: &Setup, extra: &[&str], name: &str) -> Running {
    let mut args = vec!["serve", "--transport", "mcp", "--workspace", "{WS}"];
    args.extend_from_slice(extra);
    let mut mcp = s.start(&args, "mcp.stderr");
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}}));
    mcp.answer(1);
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    mcp.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "write_file",
                   "arguments": {"path": s.ws.join(name), "content": "from mcp\n"}}}));
    let answer = mcp.answer(2);
    assert!(
        answer["result"]["isError"] != json!(true) && answer.get("error").is_none(),
        "{answer}: {}",
        mcp.stderr_text()
    );
    mcp
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn two_gateways_on_one_workspace_each_keep_a_chain_read_together() {
    let s = Setup::new();
    let mut acp = s.start(&["serve", "--workspace", "{WS}"], "acp.stderr");
    acp.send(&acp_write(1, &s.ws.join("a.txt"), "from acp\n"));
    assert_eq!(
        acp.answer(1)["result"],
        json!(null),
        "{}",
        acp.stderr_text()
    );
    // The ACP gateway holds audit.jsonl; the MCP server starts meanwhile and writes.
    let mcp = mcp_writes(&s, &[], "b.txt");
    acp.send(&acp_write(2, &s.ws.join("a.txt"), "again\n"));
    assert_eq!(
        acp.answer(2)["result"],
        json!(null),
        "{}",
        acp.stderr_text()
    );
    let mcp_err = mcp.finish();
    let acp_err = acp.finish();
    let dir = s.audit_dir();
    let told = |p: &Path| format!("fsgate: audit log: {}", p.display());
    let (first, second) = (dir.join("audit.jsonl"), dir.join("audit-2.jsonl"));
    assert!(acp_err.lines().any(|l| l == told(&first)), "{acp_err}");
    assert!(mcp_err.lines().any(|l| l == told(&second)), "{mcp_err}");
    let note = "fsgate: another gateway is serving this workspace";
    assert!(mcp_err.contains(note), "{mcp_err}");
    assert!(!acp_err.contains(note), "{acp_err}");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("b.txt")).ok().as_deref(),
        Some("from mcp\n")
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("a.txt")).ok().as_deref(),
        Some("again\n")
    );

    // verify: both chains, each with its verdict.
    let out = s.run(&["audit", "verify", "--workspace", "{WS}"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    assert!(text.starts_with("INTACT"), "{text}");
    for p in [&first, &second] {
        assert!(text.contains(&p.display().to_string()), "{text}");
    }
    // show: both sessions' writes.
    let out = s.run(&["audit", "show", "--json", "--workspace", "{WS}"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let recs: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record is JSON"))
        .collect();
    let writes_by = |transport: &str| {
        recs.iter()
            .filter(|r| {
                r["kind"] == "request"
                    && r["transport"] == transport
                    && r["op"].as_str().is_some_and(|o| o.contains("write"))
            })
            .count()
    };
    assert_eq!(writes_by("acp"), 2, "{recs:#?}");
    assert_eq!(writes_by("mcp"), 1, "{recs:#?}");
    // Interleaved by time: the MCP write came between the two ACP writes.
    let order: Vec<&str> = recs
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file")
        .filter_map(|r| r["transport"].as_str())
        .collect();
    assert_eq!(order, ["acp", "mcp", "acp"], "{recs:#?}");
    let times: Vec<&str> = recs.iter().filter_map(|r| r["ts"].as_str()).collect();
    assert!(times.is_sorted(), "{times:?}");

    // report: both chains verified, written as one page.
    let page = s.state.join("report.html");
    let page_arg = page.to_string_lossy().into_owned();
    let out = s.run(&[
        "audit",
        "report",
        "--workspace",
        "{WS}",
        "--html",
        &page_arg,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = std::fs::read_to_string(&page).expect("report written");
    for p in [&first, &second] {
        assert!(html.contains(&p.display().to_string()), "{}", p.display());
    }

    // One byte changed in the second chain is found.
    let mut bytes = std::fs::read(&second).expect("read chain");
    let at = bytes.iter().position(|&b| b == b'"').expect("a quote") + 1;
    bytes[at] ^= 0x01;
    std::fs::write(&second, bytes).expect("tamper");
    let out = s.run(&["audit", "verify", "--workspace", "{WS}"]);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!stdout(&out).starts_with("INTACT"), "{out:?}");
}

#[test]
fn a_named_log_in_use_is_still_refused() {
    let s = Setup::new();
    let log = s.state.join("named.jsonl");
    let log_arg = log.to_string_lossy().into_owned();
    let named = ["--audit-log", log_arg.as_str()];
    let mut acp = s.start(
        &[&["serve", "--workspace", "{WS}"][..], &named].concat(),
        "acp.stderr",
    );
    acp.send(&acp_write(1, &s.ws.join("a.txt"), "x\n"));
    acp.answer(1);
    let out = s.run(
        &[
            &["serve", "--transport", "mcp", "--workspace", "{WS}"][..],
            &named,
        ]
        .concat(),
    );
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is in use by another process"), "{err}");
    acp.finish();
    let siblings: Vec<_> = std::fs::read_dir(&s.state)
        .expect("state")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("named-"))
        .collect();
    assert!(
        siblings.is_empty(),
        "no sibling chain for a named log: {siblings:?}"
    );
}
