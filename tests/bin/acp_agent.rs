//! `fsgate-test-acp-agent`: a test-only ACP agent as one self-contained binary (built
//! only with the `test-bins` feature, which nothing but the test suite enables; never
//! part of `fsgate`). It stands for agents shipped as a single executable, e.g. copied
//! into `~/.local/bin`.
//!
//! It speaks raw JSON-RPC lines (no SDK): `initialize`, `session/new`, and
//! `session/prompt`, whose text is the command language of tests/peers/acp/agent.py,
//! one command a line, each outcome reported as one `agent_message_chunk` whose text is
//! `{"cmd": LINE, "ok": RESULT}` or `{"cmd": LINE, "error": {...}}`. Commands: `read
//! PATH [LINE [LIMIT]]`, `write PATH TEXT` (through the client), `open PATH`, `env NAME`,
//! `signal PID`, `ppid`, `unix PATH`, `tty`, `tcp HOST PORT`, `tiocsti`, `exit CODE`.
//! With `--ignore-eof` it keeps running for 60 s once its stdin has ended, as an agent
//! that ignores end of input does.
//!
//! MCP: with `--mcp http` it advertises Streamable HTTP MCP servers in `initialize`,
//! with `--mcp acp` MCP servers over ACP itself (`mcpCapabilities.acp`, the draft
//! MCP-over-ACP transport: `mcp/connect`, `mcp/message`, `mcp/disconnect` sent to the
//! client), else neither, so it is given commands. At `session/new` it connects to the server
//! named `fsgate` in the session's `mcpServers` before answering (as Gemini CLI does),
//! and the commands `mcp-servers` (every entry listed, secrets left out), `mcp-entry`
//! (the fsgate entry), `mcp-tools`,
//! `mcp-read PATH`, `mcp-write PATH TEXT` and `mcp-call TOOL JSON` use it. `bench PATH
//! N` times N reads each way, alternating (docs/agents.md's figures).
//! `--acp-version 2` answers an `initialize` asking for ACP v2 with 2; `init-params`
//! reports the `initialize` params it received. `acp-connect ID` sends `mcp/connect`
//! for the server id ID, `mcp-disconnect` ends the session's MCP-over-ACP connection,
//! `mcp-write26 PATH TEXT` writes with a stateless (2026-07-28) request over it.
//! With `--mcp-roots DIR` its MCP-over-ACP connections declare the `roots` capability
//! and answer the server's `roots/list` (an `mcp/message` from the client) with DIR,
//! taken relative to the `cwd` of the session it last opened.
//!
//! # Ambient Authority
//! Opens, connects and signals whatever it is told to with plain std/libc: that is its
//! point (only the agent's sandbox may refuse).

#[path = "acp_agent_mcp.rs"]
mod mcp;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{Value, json};

/// The agent's stdio connection: lines in, lines out, and its own request ids.
struct Conn {
    lines: std::io::Lines<std::io::StdinLock<'static>>,
    next_id: u64,
    sessions: u64,
    /// The MCP transport it advertises besides stdio: "http", "acp" or "".
    mcp_mode: String,
    /// Each session's `fsgate` MCP entry, and its connection (or why there is none).
    mcp: HashMap<String, (Value, Result<mcp::Mcp, String>)>,
    /// Each session's whole `mcpServers`, described (no secrets).
    servers: HashMap<String, Value>,
    /// The newest ACP protocol version it speaks (`--acp-version`, default 1).
    acp_version: u64,
    /// The `initialize` params it received.
    init_params: Value,
    /// The root its MCP-over-ACP connections declare (`--mcp-roots`).
    mcp_roots: Option<String>,
    /// The `cwd` of the session it last opened.
    cwd: String,
}

impl Conn {
    fn send(&self, msg: &Value) {
        let mut out = std::io::stdout().lock();
        // A closed stdout means the client went away; the next read ends the loop.
        let _ = writeln!(out, "{msg}");
        let _ = out.flush();
    }

    /// Sends a request to the client and waits for its response (requests that arrive
    /// meanwhile are refused: this agent does one thing at a time).
    fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = json!(format!("bin-{}", self.next_id));
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        while let Some(Ok(line)) = self.lines.next() {
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg.get("method").is_none() && msg.get("id") == Some(&id) {
                return match msg.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => Err(msg.get("error").cloned().unwrap_or(Value::Null)),
                };
            }
            if let (Some(other), Some(_)) = (msg.get("id"), msg.get("method")) {
                let reply = self.roots_answer(other, &msg);
                self.send(&reply.unwrap_or_else(|| error(other, -32603, "the agent is busy")));
            }
        }
        Err(json!({"code": null, "message": "the client closed the connection"}))
    }
}

impl Conn {
    /// The answer to the server's `roots/list` over ACP, when it has roots to give.
    fn roots_answer(&self, id: &Value, msg: &Value) -> Option<Value> {
        let roots_list = msg["method"] == "mcp/message" && msg["params"]["method"] == "roots/list";
        let dir = self.mcp_roots.as_ref().filter(|_| roots_list)?;
        let dir = std::path::Path::new(&self.cwd).join(dir);
        Some(json!({"jsonrpc": "2.0", "id": id,
            "result": {"roots": [{"uri": format!("file://{}", dir.display()), "name": "given"}]}}))
    }
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// `{key: true, "errno": null}` or `{key: false, "errno": N}` for an OS call.
fn os_outcome(key: &str, r: std::io::Result<()>) -> Value {
    match r {
        Ok(()) => json!({key: true, "errno": null}),
        Err(e) => json!({key: false, "errno": e.raw_os_error(), "strerror": e.to_string()}),
    }
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn open(path: &str) -> Value {
    match std::fs::read(path) {
        Ok(bytes) => json!({"opened": true, "bytes": bytes.len()}),
        Err(e) => json!({"opened": false, "errno": e.raw_os_error(), "strerror": e.to_string()}),
    }
}

fn signal(pid: &str) -> Result<Value, String> {
    let pid: libc::pid_t = pid.parse().map_err(|e| format!("bad pid {pid:?}: {e}"))?;
    // SAFETY: kill with signal 0 sends nothing; it only checks permission.
    Ok(os_outcome("ok", check(unsafe { libc::kill(pid, 0) })))
}

fn ppid() -> Value {
    // SAFETY: plain queries of this process's ids; no memory is passed.
    let (ppid, pid, sid, pgid) = unsafe {
        (
            libc::getppid(),
            libc::getpid(),
            libc::getsid(0),
            libc::getpgid(0),
        )
    };
    json!({"ppid": ppid, "pid": pid, "sid": sid, "pgid": pgid})
}

fn open_tty() -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/tty")
}

fn tiocsti(fd: libc::c_int) -> Value {
    let byte: libc::c_char = b'#' as libc::c_char;
    // SAFETY: TIOCSTI reads one byte from the pointer, which lives across the call.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCSTI, &byte as *const libc::c_char) };
    os_outcome("ok", check(rc))
}

fn tiocsti_all() -> Value {
    use std::os::fd::AsRawFd;
    let mut out = serde_json::Map::new();
    for fd in 0..3 {
        out.insert(fd.to_string(), tiocsti(fd));
    }
    let tty = match open_tty() {
        Ok(f) => tiocsti(f.as_raw_fd()),
        Err(e) => os_outcome("ok", Err(e)),
    };
    out.insert("tty".into(), tty);
    Value::Object(out)
}

fn tcp(rest: &str) -> Result<Value, String> {
    let (host, port) = rest.split_once(' ').ok_or("usage: tcp HOST PORT")?;
    let port: u16 = port.trim().parse().map_err(|e| format!("bad port: {e}"))?;
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let r = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map(drop);
    Ok(os_outcome("connected", r))
}

/// `read PATH [LINE [LIMIT]]` as fs/read_text_file params.
fn read_params(sid: &str, rest: &str) -> Result<Value, String> {
    let mut parts = rest.split_whitespace();
    let path = parts.next().ok_or("usage: read PATH [LINE [LIMIT]]")?;
    let mut params = json!({"sessionId": sid, "path": path});
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|e| format!("bad number {s:?}: {e}"))
    };
    if let Some(line) = parts.next().filter(|l| *l != "-") {
        params["line"] = num(line)?.into();
    }
    if let Some(limit) = parts.next() {
        params["limit"] = num(limit)?.into();
    }
    Ok(params)
}

/// An MCP command on the session's `fsgate` server.
fn run_mcp(conn: &mut Conn, sid: &str, word: &str, rest: &str) -> Result<Value, Value> {
    if word == "mcp-servers" {
        return Ok(conn.servers.get(sid).cloned().unwrap_or(Value::Null));
    }
    let Some((entry, client)) = conn.mcp.get_mut(sid) else {
        return Err(
            json!({"code": null, "message": "no fsgate entry in this session's mcpServers"}),
        );
    };
    if word == "mcp-entry" {
        return Ok(mcp::describe(entry));
    }
    let client = client
        .as_mut()
        .map_err(|e| json!({"code": null, "message": format!("not connected: {e}")}))?;
    if let Some(cid) = client.acp_connection().map(str::to_owned) {
        return run_mcp_over_acp(conn, &cid, word, rest);
    }
    let (tool, args) = match word {
        "mcp-tools" => {
            let r = client.request("tools/list", json!({}))?;
            let names: Vec<Value> = r["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["name"].clone())
                .collect();
            return Ok(Value::Array(names));
        }
        "mcp-read" => ("read_text_file".to_string(), json!({"path": rest})),
        "mcp-write" => {
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            (
                "write_text_file".to_string(),
                json!({"path": path, "content": text}),
            )
        }
        _ => {
            let (tool, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
            let args: Value = serde_json::from_str(args)
                .map_err(|e| json!({"code": null, "message": e.to_string()}))?;
            (tool.to_string(), args)
        }
    };
    client.request("tools/call", json!({"name": tool, "arguments": args}))
}

/// An MCP command over the ACP connection: `mcp/message` requests to the client.
fn run_mcp_over_acp(conn: &mut Conn, cid: &str, word: &str, rest: &str) -> Result<Value, Value> {
    let (method, params) = match word {
        "mcp-tools" => ("tools/list", json!({})),
        "mcp-disconnect" => return conn.request("mcp/disconnect", json!({"connectionId": cid})),
        "mcp-read" => (
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": rest}}),
        ),
        "mcp-write" | "mcp-write26" => {
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            let mut params =
                json!({"name": "write_text_file", "arguments": {"path": path, "content": text}});
            if word == "mcp-write26" {
                params["_meta"] = stateless_meta();
            }
            ("tools/call", params)
        }
        _ => {
            let (tool, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
            let args: Value = serde_json::from_str(args)
                .map_err(|e| json!({"code": null, "message": e.to_string()}))?;
            ("tools/call", json!({"name": tool, "arguments": args}))
        }
    };
    let r = conn.request(
        "mcp/message",
        json!({"connectionId": cid, "method": method, "params": params}),
    )?;
    if word == "mcp-tools" {
        let names: Vec<Value> = r["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].clone())
            .collect();
        return Ok(Value::Array(names));
    }
    Ok(r)
}

/// The `_meta` of a stateless (2026-07-28) MCP request.
fn stateless_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "fsgate-test-acp-agent", "version": "0"}})
}

/// Connects to an MCP server over the ACP connection (`mcp/connect`) and runs the
/// handshake in `mcp/message`s.
fn connect_over_acp(conn: &mut Conn, e: &Value) -> Result<mcp::Mcp, String> {
    let show = |v: Value| v.to_string();
    let r = conn
        .request("mcp/connect", json!({"serverId": e["serverId"]}))
        .map_err(show)?;
    let cid = r["connectionId"]
        .as_str()
        .ok_or_else(|| format!("no connectionId in {r}"))?
        .to_owned();
    let caps = match conn.mcp_roots {
        Some(_) => json!({"roots": {}}),
        None => json!({}),
    };
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": caps,
        "clientInfo": {"name": "fsgate-test-acp-agent", "version": "0"}});
    conn.request(
        "mcp/message",
        json!({"connectionId": cid, "method": "initialize", "params": init}),
    )
    .map_err(show)?;
    conn.send(&json!({"jsonrpc": "2.0", "method": "mcp/message",
        "params": {"connectionId": cid, "method": "notifications/initialized"}}));
    Ok(mcp::Mcp::acp(cid))
}

/// `bench PATH N`: N reads of PATH through `fs/read_text_file` and N through the
/// session's fsgate MCP server, alternating (so that both meet the same load), each
/// timed (µs percentiles of each, and of the difference within each pair).
fn bench(conn: &mut Conn, sid: &str, rest: &str) -> Result<Value, Value> {
    let bad = |m: String| json!({"code": null, "message": m});
    let (path, n) = rest
        .split_once(' ')
        .ok_or_else(|| bad("usage: bench PATH N".into()))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|e| bad(format!("bad count: {e}")))?;
    let (mut fs, mut mcp, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let started = std::time::Instant::now();
        conn.request("fs/read_text_file", json!({"sessionId": sid, "path": path}))?;
        let one = started.elapsed().as_micros() as i64;
        let started = std::time::Instant::now();
        let r = run_mcp(conn, sid, "mcp-read", path)?;
        if r["isError"] == true {
            return Err(r);
        }
        let other = started.elapsed().as_micros() as i64;
        fs.push(one);
        mcp.push(other);
        added.push(other - one);
    }
    Ok(json!({"n": n, "fs": stats(fs), "mcp": stats(mcp), "added": stats(added)}))
}

/// Percentiles and mean of `v`, in µs.
fn stats(mut v: Vec<i64>) -> Value {
    v.sort_unstable();
    let at = |q: f64| {
        v.get(((v.len() as f64 - 1.0) * q).round() as usize)
            .copied()
    };
    let mean = v.iter().sum::<i64>() / (v.len().max(1) as i64);
    json!({"p50_us": at(0.5), "p90_us": at(0.9), "p99_us": at(0.99), "mean_us": mean})
}

/// One command: its result, or its error as reported.
fn run(conn: &mut Conn, sid: &str, word: &str, rest: &str) -> Result<Value, Value> {
    let local = |r: Result<Value, String>| r.map_err(|m| json!({"code": null, "message": m}));
    if word.starts_with("mcp-") {
        return run_mcp(conn, sid, word, rest);
    }
    if word == "bench" {
        return bench(conn, sid, rest);
    }
    if word == "init-params" {
        return Ok(conn.init_params.clone());
    }
    if word == "acp-connect" {
        return conn.request("mcp/connect", json!({"serverId": rest}));
    }
    match word {
        "read" => conn.request("fs/read_text_file", local(read_params(sid, rest))?),
        "write" => {
            let (path, text) = rest.split_once(' ').unwrap_or((rest, ""));
            let content = match text.starts_with('"') {
                true => local(serde_json::from_str(text).map_err(|e| e.to_string()))?,
                false => Value::from(text),
            };
            let params = json!({"sessionId": sid, "path": path, "content": content});
            conn.request("fs/write_text_file", params)
        }
        "open" => Ok(open(rest)),
        "env" => Ok(json!({"set": std::env::var_os(rest).is_some()})),
        "signal" => local(signal(rest)),
        "ppid" => Ok(ppid()),
        "unix" => Ok(os_outcome(
            "connected",
            std::os::unix::net::UnixStream::connect(rest).map(drop),
        )),
        "tty" => Ok(os_outcome("opened", open_tty().map(drop))),
        "tcp" => local(tcp(rest)),
        "tiocsti" => Ok(tiocsti_all()),
        "exit" => Ok(json!({"exiting": rest.parse::<i32>().unwrap_or(0)})),
        _ => local(Err(format!("unknown command {word:?}"))),
    }
}

fn prompt(conn: &mut Conn, params: &Value) -> Value {
    let session = params["sessionId"].as_str().unwrap_or_default().to_owned();
    let blocks = params["prompt"].as_array().cloned().unwrap_or_default();
    let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    let mut sid = session.clone();
    for line in text
        .join("\n")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        if word == "session" {
            sid = rest.trim().to_owned();
            continue;
        }
        let report = match run(conn, &sid, word, rest.trim()) {
            Ok(v) => json!({"cmd": line, "ok": v}),
            Err(e) => json!({"cmd": line, "error": e}),
        };
        let update = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": report.to_string()}});
        conn.send(&json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}));
        if word == "exit" {
            std::process::exit(rest.trim().parse().unwrap_or(0));
        }
    }
    json!({"stopReason": "end_turn"})
}

/// `session/new`: the session's id, once its `fsgate` MCP server (if listed) is
/// connected to.
fn new_session(conn: &mut Conn, params: &Value) -> Value {
    conn.sessions += 1;
    let sid = format!("bin-session-{}", conn.sessions);
    conn.cwd = params["cwd"].as_str().unwrap_or_default().to_owned();
    let listed = params["mcpServers"].as_array().into_iter().flatten();
    let described: Vec<Value> = listed.map(mcp::describe).collect();
    conn.servers.insert(sid.clone(), Value::Array(described));
    if let Some(e) = mcp::entry(&params["mcpServers"], "fsgate") {
        let client = match e["type"].as_str() {
            Some("acp") => connect_over_acp(conn, e),
            _ => mcp::Mcp::connect(e),
        };
        if let Err(err) = &client {
            eprintln!("fsgate-test-acp-agent: MCP server fsgate: {err}");
        }
        conn.mcp.insert(sid.clone(), (e.clone(), client));
    }
    json!({ "sessionId": sid })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut mcp_mode, mut acp_version, mut mcp_roots) = (String::new(), 1, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mcp" => mcp_mode = args.next().unwrap_or_default(),
            "--mcp-roots" => mcp_roots = args.next(),
            "--acp-version" => acp_version = args.next().and_then(|v| v.parse().ok()).unwrap_or(1),
            _ => {}
        }
    }
    let mut conn = Conn {
        lines: std::io::stdin().lock().lines(),
        next_id: 0,
        sessions: 0,
        mcp_mode,
        mcp: HashMap::new(),
        servers: HashMap::new(),
        acp_version,
        init_params: Value::Null,
        mcp_roots,
        cwd: String::new(),
    };
    while let Some(Ok(line)) = conn.lines.next() {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id").cloned(), msg["method"].as_str()) else {
            continue;
        };
        let result = match method {
            "initialize" => {
                conn.init_params = msg["params"].clone();
                // The version asked for if it speaks it, else its newest.
                let asked = msg["params"]["protocolVersion"].as_u64().unwrap_or(1);
                json!({"protocolVersion": asked.min(conn.acp_version),
                    "agentCapabilities": {"mcpCapabilities": {"http": conn.mcp_mode == "http",
                        "sse": false, "acp": conn.mcp_mode == "acp"}},
                    "agentInfo": {"name": "fsgate-test-acp-agent", "version": "0"}})
            }
            "session/new" => new_session(&mut conn, &msg["params"]),
            "session/prompt" => prompt(&mut conn, &msg["params"]),
            other => {
                let reply = conn.roots_answer(&id, &msg);
                let not_found = || error(&id, -32601, &format!("method not found: {other}"));
                conn.send(&reply.unwrap_or_else(not_found));
                continue;
            }
        };
        conn.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    if std::env::args().any(|a| a == "--ignore-eof") {
        std::thread::sleep(Duration::from_secs(60));
    }
}
