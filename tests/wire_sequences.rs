//! Random message sequences on each door of the real binary: the MCP door (`serve
//! --transport mcp`), the ACP door (`serve`) and the ACP proxy (`acp -- AGENT`, with the
//! test agent). A sequence mixes requests (valid, with params of the wrong shape, with
//! and without the 2026-07-28 `_meta`), notifications, responses nobody asked for and
//! lines that are no JSON-RPC at all, in any order: handshakes missing, late or twice,
//! ids reused while in flight, notifications first. Whatever the sequence:
//!
//! - the session goes on: a last request sent after it is answered, and once stdin
//!   closes the process exits with status 0 (never before);
//! - every request with a usable id gets exactly one answer under that id, and no
//!   answer names an id no request had;
//! - stdout carries JSON-RPC messages only.
//!
//! Each door runs `FSGATE_SEQ_CASES` sequences (default 12, a few seconds);
//! `FSGATE_SEQ_CASES=2000 cargo test --features test-bins --test all wire_sequences --
//! --nocapture` is a long run, and prints how many sequences and messages it sent
//! (`FSGATE_SEQ_BIN_DIR`: take `fsgate` and the test agent from there instead).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// Longest a process may take to exit once its input ends.
const EXIT_WAIT: Duration = Duration::from_secs(60);

/// A permissive policy with a small message limit, so that oversized lines are cheap.
const POLICY: &str = r#"version = 1

[limits]
max_message_bytes = 4096

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
reason = "the sequence tests reach everything"
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    Mcp,
    Acp,
    Proxy,
}

/// One message of a sequence; `@ROOT` in its text stands for the workspace root, `@PAD`
/// for 3,000 bytes.
#[derive(Debug, Clone)]
enum Msg {
    /// A request with a usable id (a small integer or a short string, often reused).
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response or error from the client, to nothing the server asked.
    Response { id: Value, body: Value },
    /// Anything else: not JSON, a batch, an unusable id, no `jsonrpc`... If it has an
    /// id from the raw pool, it may be answered under it, at most once.
    Raw(String),
}

impl Msg {
    fn line(&self, root: &str) -> String {
        let mut v = match self {
            Msg::Request { id, method, .. } => {
                json!({"jsonrpc": "2.0", "id": id, "method": method})
            }
            Msg::Notification { method, .. } => json!({"jsonrpc": "2.0", "method": method}),
            Msg::Response { id, body } => {
                let mut v = body.clone();
                v["jsonrpc"] = json!("2.0");
                v["id"] = id.clone();
                v
            }
            // Over the 4 KiB message limit, kept short in a failure's report.
            Msg::Raw(text) => {
                return text
                    .replace("@ROOT", root)
                    .replace("@PAD", &"x".repeat(3000));
            }
        };
        if let Msg::Request {
            params: Some(p), ..
        }
        | Msg::Notification {
            params: Some(p), ..
        } = self
        {
            v["params"] = p.clone();
        }
        v.to_string().replace("@ROOT", root)
    }
}

/// The 2026-07-28 `_meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn ids() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..6).prop_map(Value::from),
        prop::sample::select(vec!["a", "b", "0"]).prop_map(Value::from),
    ]
}

/// Params of a wrong shape, or none.
fn odd_params() -> impl Strategy<Value = Option<Value>> {
    prop::sample::select(vec![
        None,
        Some(json!([])),
        Some(json!(5)),
        Some(json!("text")),
        Some(Value::Null),
        Some(json!({"_meta": 5})),
        Some(json!({"unexpected": true})),
    ])
}

/// Requests of the MCP door, with params as meant (each with or without `_meta`).
fn mcp_request() -> impl Strategy<Value = (String, Value)> {
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "seq", "version": "0"}});
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    prop::sample::select(vec![
        ("initialize", init),
        ("initialize", json!({"protocolVersion": "2025-06-18"})),
        ("ping", json!({})),
        ("tools/list", json!({})),
        ("server/discover", json!({})),
        ("tools/call", call("read_text_file", json!({"path": "a.txt"}))),
        ("tools/call", call("stat", json!({"path": "a.txt"}))),
        ("tools/call", call("ls", json!({"path": "."}))),
        (
            "tools/call",
            call("write_text_file", json!({"path": "w.txt", "content": "w"})),
        ),
        ("tools/call", call("read_text_file", json!({"path": 5}))),
        ("tools/call", call("no_such_tool", json!({}))),
        ("tools/call", json!({"name": "ls", "arguments": "text"})),
        ("logging/setLevel", json!({"level": "info"})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/read", json!({"uri": "file:///a.txt"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
        ("subscriptions/listen", json!({"notifications": {}})),
        ("tasks/get", json!({"taskId": "t"})),
        ("x/unknown", json!({})),
    ])
    .prop_map(|(m, p)| (m.to_string(), p))
}

/// Requests of the ACP door (`serve`).
fn acp_request() -> impl Strategy<Value = (String, Value)> {
    let file = "@ROOT/a.txt";
    prop::sample::select(vec![
        ("initialize", json!({"protocolVersion": 1})),
        ("initialize", json!({"protocolVersion": "x"})),
        ("session/new", json!({"cwd": "@ROOT", "mcpServers": []})),
        ("fs/read_text_file", json!({"sessionId": "s", "path": file})),
        (
            "fs/read_text_file",
            json!({"sessionId": "s", "path": "a.txt"}),
        ),
        (
            "fs/write_text_file",
            json!({"sessionId": "s", "path": "@ROOT/w.txt", "content": "w"}),
        ),
        ("_fsgate/ls", json!({"path": "@ROOT"})),
        ("_fsgate/stat", json!({"path": file})),
        ("_fsgate/read_file", json!({"path": file})),
        ("x/unknown", json!({})),
    ])
    .prop_map(|(m, p)| (m.to_string(), p))
}

/// Requests of the editor to `fsgate acp` and its agent.
fn proxy_request() -> impl Strategy<Value = (String, Value)> {
    let prompt = |text: &str| json!({"sessionId": "bin-session-1", "prompt": [{"type": "text", "text": text}]});
    prop::sample::select(vec![
        ("initialize", json!({"protocolVersion": 1})),
        ("session/new", json!({"cwd": "@ROOT", "mcpServers": []})),
        ("session/prompt", prompt("read @ROOT/a.txt")),
        ("session/prompt", prompt("read a.txt")),
        ("session/prompt", prompt("")),
        (
            "fs/read_text_file",
            json!({"sessionId": "bin-session-1", "path": "@ROOT/a.txt"}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": "bin-session-1", "modeId": "x"}),
        ),
        ("x/unknown", json!({})),
    ])
    .prop_map(|(m, p)| (m.to_string(), p))
}

fn notification_methods(door: Door) -> Vec<&'static str> {
    match door {
        Door::Mcp => vec![
            "notifications/initialized",
            "notifications/cancelled",
            "notifications/roots/list_changed",
            "notifications/progress",
            "x/custom",
        ],
        Door::Acp | Door::Proxy => vec!["session/cancel", "notifications/initialized", "x/custom"],
    }
}

/// Lines that are no usable request; ids 900..=902 are theirs alone.
fn raw() -> impl Strategy<Value = Msg> {
    prop::sample::select(vec![
        "".to_string(),
        "   ".to_string(),
        "not json {".to_string(),
        "[]".to_string(),
        r#"[{"jsonrpc":"2.0","id":900,"method":"ping"}]"#.to_string(),
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":[901],"method":"ping"}"#.to_string(),
        r#"{"id":901,"method":"ping"}"#.to_string(),
        r#"{"jsonrpc":"1.0","id":902,"method":"initialize"}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":5}"#.to_string(),
        r#"{"jsonrpc":"2.0"}"#.to_string(),
        "5".to_string(),
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":900,\"method\":\"ping\"}".to_string(),
        r#"{"jsonrpc":"2.0","id":902,"method":"tools/call","params":{"pad":"@PAD@PAD"}}"#
            .to_string(),
        r#"{"jsonrpc":"2.0","method":"x","params":"@PAD@PAD"}"#.to_string(),
    ])
    .prop_map(Msg::Raw)
}

fn message(door: Door) -> BoxedStrategy<Msg> {
    let request = match door {
        Door::Mcp => mcp_request().boxed(),
        Door::Acp => acp_request().boxed(),
        Door::Proxy => proxy_request().boxed(),
    };
    let stateless = door == Door::Mcp;
    let requests = (ids(), request, any::<bool>(), odd_params(), 0u8..8).prop_map(
        move |(id, (method, mut params), modern, odd, pick)| {
            let params = if pick == 0 {
                odd
            } else {
                if stateless && modern && params.is_object() {
                    params["_meta"] = meta();
                }
                Some(params)
            };
            Msg::Request { id, method, params }
        },
    );
    let notifications = (
        prop::sample::select(notification_methods(door)),
        ids(),
        odd_params(),
        any::<bool>(),
    )
        .prop_map(|(m, id, odd, plain)| Msg::Notification {
            method: m.to_string(),
            params: if plain {
                Some(json!({"requestId": id, "sessionId": "bin-session-1"}))
            } else {
                odd
            },
        });
    let responses = (
        ids(),
        prop::sample::select(vec![
            json!({"result": {}}),
            json!({"result": 5}),
            json!({"error": {"code": -32601, "message": "no"}}),
            json!({"error": 5}),
            json!({"result": {"roots": []}}),
        ]),
    )
        .prop_map(|(id, body)| Msg::Response { id, body });
    prop_oneof![6 => requests, 2 => notifications, 1 => responses, 2 => raw()].boxed()
}

/// The request sent after each sequence; it must be answered.
fn probe(door: Door) -> Msg {
    let (method, params) = match door {
        Door::Mcp => ("tools/list", json!({"_meta": meta()})),
        Door::Acp | Door::Proxy => ("initialize", json!({"protocolVersion": 1})),
    };
    Msg::Request {
        id: json!("probe"),
        method: method.into(),
        params: Some(params),
    }
}

/// What one sequence sent and got.
#[derive(Default)]
struct Tally {
    sequences: u64,
    messages: u64,
    answers: u64,
}

/// Runs `seq` and then the probe on a fresh process of `door`; checks the properties.
fn run(door: Door, seq: &[Msg], tally: &mut Tally) -> Result<(), TestCaseError> {
    let dirs: Vec<tempfile::TempDir> = (0..2)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let root = dirs[0].path().canonicalize().expect("root");
    let state = dirs[1].path().canonicalize().expect("state");
    std::fs::write(root.join("a.txt"), "hello\n").expect("seed");
    std::fs::write(state.join("policy.toml"), POLICY).expect("policy");
    let mut child = command(door, &root, &state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let stderr = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    let root_text = root.to_string_lossy().into_owned();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut written = Ok(());
    for m in seq.iter().chain(std::iter::once(&probe(door))) {
        written = writeln!(stdin, "{}", m.line(&root_text));
        if written.is_err() {
            break;
        }
    }
    drop(stdin);
    let deadline = Instant::now() + EXIT_WAIT;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let lines = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let context = || {
        let clip = |l: &String| l.chars().take(200).collect::<String>();
        let shown: Vec<String> = lines.iter().take(60).map(clip).collect();
        format!("stdout:\n{}\nstderr:\n{stderr}", shown.join("\n"))
    };
    prop_assert!(
        written.is_ok(),
        "stdin closed early: {:?}\n{}",
        written,
        context()
    );
    let status = status.ok_or_else(|| TestCaseError::fail(format!("no exit\n{}", context())))?;
    prop_assert!(status.success(), "exit {status}\n{}", context());
    let answers =
        answers_by_id(&lines).map_err(|e| TestCaseError::fail(format!("{e}\n{}", context())))?;
    check_answers(door, seq, &answers)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{}", context())))?;
    tally.sequences += 1;
    if tally.sequences.is_multiple_of(500) {
        eprintln!(
            "wire_sequences {door:?}: {} sequences, {} messages so far",
            tally.sequences, tally.messages
        );
    }
    tally.messages += seq.len() as u64 + 1;
    tally.answers += answers.values().map(|v| v.len() as u64).sum::<u64>();
    Ok(())
}

/// A program of this build, or of `FSGATE_SEQ_BIN_DIR` (a copy, so that a long run
/// goes on while the tree is rebuilt).
fn program(name: &str, built: &str) -> std::path::PathBuf {
    match std::env::var_os("FSGATE_SEQ_BIN_DIR") {
        Some(dir) => Path::new(&dir).join(name),
        None => built.into(),
    }
}

fn command(door: Door, root: &Path, state: &Path) -> Command {
    let mut cmd = Command::new(program("fsgate", env!("CARGO_BIN_EXE_fsgate")));
    match door {
        Door::Mcp => cmd.args(["serve", "--transport", "mcp"]),
        Door::Acp => cmd.arg("serve"),
        Door::Proxy => cmd.arg("acp"),
    };
    cmd.arg("--workspace").arg(root);
    cmd.arg("--policy").arg(state.join("policy.toml"));
    cmd.arg("--audit-log")
        .arg(state.join("audit").join("audit.jsonl"));
    cmd.arg("--backup-dir").arg(state.join("backups"));
    if door == Door::Proxy {
        let agent = env!("CARGO_BIN_EXE_fsgate-test-acp-agent");
        cmd.arg("--").arg(program("fsgate-test-acp-agent", agent));
    }
    cmd.current_dir(state);
    cmd
}

/// The answers on stdout, by the JSON text of their id; Err on a line that is no
/// JSON-RPC message.
fn answers_by_id(lines: &[String]) -> Result<HashMap<String, Vec<Value>>, String> {
    let mut by_id: HashMap<String, Vec<Value>> = HashMap::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {line}"))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("not JSON-RPC 2.0: {line}"));
        }
        if v.get("method").is_some() {
            continue; // The server's (or agent's) own request or notification.
        }
        if v.get("result").is_some() == v.get("error").is_some() {
            return Err(format!("not one of result and error: {line}"));
        }
        let id = v.get("id").cloned().unwrap_or(Value::Null);
        by_id.entry(id.to_string()).or_default().push(v);
    }
    Ok(by_id)
}

/// Requests with each id, and (MCP) the cancellations naming each id after one: a
/// cancelled MCP request may go unanswered (the protocol asks that it be).
fn asked(door: Door, seq: &[Msg]) -> (HashMap<String, usize>, HashMap<String, usize>) {
    let (mut asked, mut cancels) = (HashMap::new(), HashMap::new());
    for m in seq.iter().chain(std::iter::once(&probe(door))) {
        match m {
            Msg::Request { id, .. } => *asked.entry(id.to_string()).or_default() += 1,
            Msg::Notification {
                method,
                params: Some(p),
            } if door == Door::Mcp && method == "notifications/cancelled" => {
                let id = p["requestId"].to_string();
                if asked.contains_key(&id) {
                    *cancels.entry(id).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    (asked, cancels)
}

/// The ids in raw lines (an object's, a batch's members'), each with how many lines
/// carry it: such a line is answered at most once, under its id or null.
fn raw_ids(seq: &[Msg]) -> HashMap<String, usize> {
    let mut ids = HashMap::new();
    for m in seq {
        let Msg::Raw(text) = m else { continue };
        let text = text.trim_start_matches('\u{feff}');
        let v: Value = serde_json::from_str(text).unwrap_or_default();
        let members = match &v {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        };
        for id in members.iter().filter_map(|m| m.get("id")) {
            *ids.entry(id.to_string()).or_default() += 1;
        }
    }
    ids
}

fn check_answers(
    door: Door,
    seq: &[Msg],
    answers: &HashMap<String, Vec<Value>>,
) -> Result<(), String> {
    let (asked, cancels) = asked(door, seq);
    for (id, n) in &asked {
        let got = answers.get(id).map_or(0, Vec::len);
        let cancelled = cancels.get(id).copied().unwrap_or(0);
        if got > *n || got < n.saturating_sub(cancelled) {
            return Err(format!(
                "{n} request(s) with id {id} ({cancelled} cancelled), {got} answer(s)"
            ));
        }
    }
    let raw = raw_ids(seq);
    for (id, got) in answers {
        if id == "null" || asked.contains_key(id) {
            continue;
        }
        match raw.get(id) {
            None => return Err(format!("an answer under id {id}, which no message had")),
            Some(n) if got.len() > *n => {
                return Err(format!(
                    "{} answers under id {id}, of {n} raw lines",
                    got.len()
                ));
            }
            Some(_) => {}
        }
    }
    let probe = &answers[&json!("probe").to_string()][0];
    let answered = match door {
        Door::Mcp => probe["result"]["tools"].is_array(),
        Door::Acp => probe["result"].is_object(),
        // The agent may still be busy with a prompt: any answer shows the session lives.
        Door::Proxy => true,
    };
    if !answered {
        return Err(format!("the last request was not served: {probe}"));
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("FSGATE_SEQ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

fn fuzz_door(door: Door) {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let tally = std::cell::RefCell::new(Tally::default());
    let strategy = prop::collection::vec(message(door), 1..48);
    let started = Instant::now();
    let outcome = runner.run(&strategy, |seq| run(door, &seq, &mut tally.borrow_mut()));
    let tally = tally.into_inner();
    eprintln!(
        "wire_sequences {door:?}: {} sequences, {} messages, {} answers in {:.0?}",
        tally.sequences,
        tally.messages,
        tally.answers,
        started.elapsed()
    );
    if let Err(e) = outcome {
        panic!("{door:?}: {e}");
    }
}

#[test]
fn random_sequences_never_end_the_mcp_door() {
    fuzz_door(Door::Mcp);
}

#[test]
fn random_sequences_never_end_the_acp_door() {
    fuzz_door(Door::Acp);
}

#[test]
fn random_sequences_never_end_the_acp_proxy() {
    fuzz_door(Door::Proxy);
}
