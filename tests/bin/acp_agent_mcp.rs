//! The test agent's MCP client, for the server `fsgate acp` adds to the agent's
//! sessions: Streamable HTTP with a plain HTTP/1.1 client on std (one connection per
//! message), the entry's command (`fsgate mcp-connect`) spoken to in lines on stdio, or
//! the ACP connection itself (MCP-over-ACP: the agent's `mcp/message` requests, which
//! the agent sends itself; see `Mcp::acp_connection`).
//! The 2025-11-25 handshake first, then requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// How long any answer may take.
const TIMEOUT: Duration = Duration::from_secs(20);

/// A connection to one MCP server.
pub struct Mcp {
    via: Via,
    next: u64,
}

enum Via {
    Http {
        /// `host:port`.
        addr: String,
        path: String,
        /// The entry's headers (the session's secret among them).
        headers: Vec<(String, String)>,
        /// `Mcp-Session-Id` once the server gave one.
        session: Option<String>,
        /// The connection kept open between messages, as HTTP clients do.
        conn: Option<BufReader<TcpStream>>,
    },
    Stdio {
        child: Child,
        stdin: ChildStdin,
        lines: BufReader<ChildStdout>,
    },
    /// An MCP-over-ACP connection, by the id `mcp/connect` gave.
    Acp { connection: String },
}

impl Drop for Mcp {
    fn drop(&mut self) {
        if let Via::Stdio { child, .. } = &mut self.via {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The entry named `name` in `mcpServers`.
pub fn entry<'a>(servers: &'a Value, name: &str) -> Option<&'a Value> {
    servers.as_array()?.iter().find(|e| e["name"] == name)
}

/// What the entry says, its secrets left out.
pub fn describe(e: &Value) -> Value {
    json!({
        "type": e.get("type").cloned().unwrap_or(json!("stdio")),
        "name": e["name"],
        "url": e.get("url"),
        "command": e.get("command"),
        "args": e.get("args"),
        "headerNames": e["headers"].as_array().map(|h| h.iter().map(|x| x["name"].clone()).collect::<Vec<_>>()),
        "envNames": e["env"].as_array().map(|h| h.iter().map(|x| x["name"].clone()).collect::<Vec<_>>()),
        "hasServerId": e["serverId"].is_string(),
    })
}

impl Mcp {
    /// A connection over ACP (its handshake is the caller's, on the ACP connection).
    pub fn acp(connection: String) -> Mcp {
        Mcp {
            via: Via::Acp { connection },
            next: 0,
        }
    }

    /// The MCP-over-ACP connection's id, if this is one.
    pub fn acp_connection(&self) -> Option<&str> {
        match &self.via {
            Via::Acp { connection } => Some(connection),
            _ => None,
        }
    }

    /// Connects as the entry says and runs the handshake.
    pub fn connect(e: &Value) -> Result<Mcp, String> {
        let via = match e["type"].as_str() {
            Some("http") => http_via(e)?,
            None | Some("stdio") => stdio_via(e)?,
            Some(other) => return Err(format!("unsupported MCP server type {other}")),
        };
        let mut mcp = Mcp { via, next: 0 };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "fsgate-test-acp-agent", "version": "0"}});
        mcp.request("initialize", init)
            .map_err(|e| format!("initialize: {e}"))?;
        mcp.notify("notifications/initialized")?;
        Ok(mcp)
    }

    /// A request and its result (or its error object).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next += 1;
        let id = json!(self.next);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = match &mut self.via {
            Via::Http { .. } => self.post(&msg).map_err(|e| json!({"message": e}))?,
            Via::Stdio { stdin, lines, .. } => {
                writeln!(stdin, "{msg}").map_err(|e| json!({"message": e.to_string()}))?;
                read_answer(lines, &id).map_err(|e| json!({"message": e}))?
            }
            Via::Acp { .. } => return Err(json!({"message": "over ACP: sent by the agent"})),
        };
        match answer.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(answer.get("error").cloned().unwrap_or(answer)),
        }
    }

    fn notify(&mut self, method: &str) -> Result<(), String> {
        let msg = json!({"jsonrpc": "2.0", "method": method});
        match &mut self.via {
            Via::Http { .. } => self.post(&msg).map(drop),
            Via::Stdio { stdin, .. } => writeln!(stdin, "{msg}").map_err(|e| e.to_string()),
            Via::Acp { .. } => Err("over ACP: sent by the agent".into()),
        }
    }

    /// POSTs one message on the kept connection (a new one if it was closed); its
    /// answer (Null for a 202).
    fn post(&mut self, msg: &Value) -> Result<Value, String> {
        let Via::Http {
            addr,
            path,
            headers,
            session,
            conn,
        } = &mut self.via
        else {
            return Err("not http".into());
        };
        let body = msg.to_string();
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers.iter() {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(s) = session.as_ref() {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let resp = match exchange(conn, addr, req.as_bytes()) {
            Ok(r) => r,
            // The server may have closed the kept connection: once more on a new one.
            Err(_) => {
                *conn = None;
                exchange(conn, addr, req.as_bytes())?
            }
        };
        if let Some(s) = resp.header("mcp-session-id") {
            *session = Some(s.to_string());
        }
        match resp.status {
            202 => Ok(Value::Null),
            200 => resp.message(msg.get("id")),
            s => Err(format!("HTTP {s}: {}", String::from_utf8_lossy(&resp.body))),
        }
    }
}

fn http_via(e: &Value) -> Result<Via, String> {
    let url = e["url"].as_str().ok_or("no url")?;
    let rest = url.strip_prefix("http://").ok_or("not an http:// url")?;
    let (addr, path) = rest.split_once('/').ok_or("no path")?;
    let headers = e["headers"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|x| {
                    let s = |k: &str| x[k].as_str().unwrap_or_default().to_string();
                    (s("name"), s("value"))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Via::Http {
        addr: addr.to_string(),
        path: format!("/{path}"),
        headers,
        session: None,
        conn: None,
    })
}

/// Writes `req` on the kept connection (opened if need be) and reads its response.
fn exchange(
    conn: &mut Option<BufReader<TcpStream>>,
    addr: &str,
    req: &[u8],
) -> Result<Response, String> {
    if conn.is_none() {
        let tcp = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        *conn = Some(BufReader::new(tcp));
    }
    let reader = conn.as_mut().ok_or("no connection")?;
    reader
        .get_mut()
        .write_all(req)
        .map_err(|e| format!("write: {e}"))?;
    let resp = Response::read(reader);
    if resp.as_ref().map_or(true, |r| r.closes) {
        *conn = None;
    }
    resp
}

fn stdio_via(e: &Value) -> Result<Via, String> {
    let command = e["command"].as_str().ok_or("no command")?;
    let mut cmd = Command::new(command);
    for a in e["args"].as_array().into_iter().flatten() {
        cmd.arg(a.as_str().unwrap_or_default());
    }
    for v in e["env"].as_array().into_iter().flatten() {
        cmd.env(
            v["name"].as_str().unwrap_or_default(),
            v["value"].as_str().unwrap_or_default(),
        );
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {command}: {e}"))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    Ok(Via::Stdio {
        child,
        stdin,
        lines: BufReader::new(stdout),
    })
}

/// The next line answering `id` (server messages in between are skipped).
fn read_answer(lines: &mut BufReader<ChildStdout>, id: &Value) -> Result<Value, String> {
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the server closed the connection".into());
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v.get("method").is_none() && v.get("id") == Some(id) {
            return Ok(v);
        }
    }
}

/// An HTTP/1.1 response.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// The server closes the connection after it.
    closes: bool,
}

impl Response {
    /// Reads one response: its head, then its body by length, chunks, or to the end.
    fn read(r: &mut BufReader<TcpStream>) -> Result<Response, String> {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            if r.read_until(b'\n', &mut line)
                .map_err(|e| format!("read: {e}"))?
                == 0
            {
                return Err("the server closed the connection".into());
            }
            if line == b"\r\n" {
                break;
            }
            head.push(String::from_utf8_lossy(&line).trim_end().to_string());
        }
        let status = head
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or("no status")?;
        let headers: Vec<(String, String)> = head[1..]
            .iter()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let chunked = find("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let length = find("content-length").and_then(|v| v.parse::<usize>().ok());
        let mut closes = find("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let body = match (chunked, length) {
            (true, _) => dechunk(r)?,
            (false, Some(n)) => {
                let mut b = vec![0; n];
                r.read_exact(&mut b).map_err(|e| format!("read: {e}"))?;
                b
            }
            (false, None) => {
                closes = true;
                let mut b = Vec::new();
                r.read_to_end(&mut b).map_err(|e| format!("read: {e}"))?;
                b
            }
        };
        Ok(Response {
            status,
            headers,
            body,
            closes,
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message answering `id`: the body, or the event carrying it.
    fn message(&self, id: Option<&Value>) -> Result<Value, String> {
        let text = String::from_utf8_lossy(&self.body);
        if !self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            return serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"));
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("method").is_none() && v.get("id") == id)
            .ok_or_else(|| format!("no answer among the events: {text}"))
    }
}

/// A chunked body, read to its last chunk.
fn dechunk(r: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).map_err(|e| format!("read: {e}"))?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("bad chunk size {line:?}: {e}"))?;
        let mut chunk = vec![0; size + 2];
        r.read_exact(&mut chunk).map_err(|e| format!("read: {e}"))?;
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&chunk[..size]);
    }
}
