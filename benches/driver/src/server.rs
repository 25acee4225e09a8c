//! Spawning a server under test, its handshake, and what /proc says about it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::Error;
use crate::client::Client;

/// How long a server may take to start and answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The MCP revision both servers are asked for.
const MCP_VERSION: &str = "2025-06-18";

/// The protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// MCP tools over stdio.
    Mcp,
    /// ACP `fs/*` methods over stdio (`fsgate serve --transport acp`).
    Acp,
    /// The WebSocket files channel (`fsgate serve --transport ws`).
    Ws,
}

/// What to start.
#[derive(Debug, Clone)]
pub enum Spec {
    /// The reference server: `node <index.js> <root>`.
    Reference { node: PathBuf, js: PathBuf },
    /// `fsgate serve`, with an optional policy file.
    Fsgate {
        bin: PathBuf,
        door: Door,
        policy: Option<PathBuf>,
    },
}

impl Spec {
    /// The protocol this server speaks.
    pub fn door(&self) -> Door {
        match self {
            Spec::Reference { .. } => Door::Mcp,
            Spec::Fsgate { door, .. } => *door,
        }
    }
}

/// A running server with its connection.
pub struct Server {
    child: Child,
    /// The server's process id (the server itself, not a wrapper).
    pub pid: u32,
    /// The connection the workloads use.
    pub client: Arc<Client>,
    /// The protocol `client` speaks.
    pub door: Door,
    /// From spawn to the `initialize` answer (or to the WebSocket connection).
    pub startup: Duration,
}

fn command(spec: &Spec, root: &Path, state: &Path) -> Command {
    match spec {
        Spec::Reference { node, js } => {
            let mut c = Command::new(node);
            c.arg(js).arg(root);
            c
        }
        Spec::Fsgate { bin, door, policy } => {
            let mut c = Command::new(bin);
            let t = match door {
                Door::Mcp => "mcp",
                Door::Acp => "acp",
                Door::Ws => "ws",
            };
            c.args(["serve", "--transport", t, "--workspace"]).arg(root);
            c.arg("--audit-log")
                .arg(state.join("audit").join("audit.jsonl"));
            c.arg("--backup-dir").arg(state.join("backups"));
            if *door == Door::Ws {
                c.args(["--listen", "127.0.0.1:0"]);
            }
            if let Some(p) = policy {
                c.arg("--policy").arg(p);
            }
            c
        }
    }
}

/// Starts the server on `root` (its logs and fsgate's audit and backups go to `state`),
/// connects and completes the handshake.
pub async fn start(spec: &Spec, root: &Path, state: &Path) -> Result<Server, Error> {
    std::fs::create_dir_all(state).map_err(|e| Error::io(state, e))?;
    let log_path = state.join("stderr.log");
    let log = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
    let mut cmd = command(spec, root, state);
    let door = spec.door();
    cmd.stdout(Stdio::piped()).kill_on_drop(true);
    if door == Door::Ws {
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    } else {
        cmd.stdin(Stdio::piped()).stderr(log);
    }
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::Protocol(format!("spawn {spec:?}: {e}")))?;
    let pid = child
        .id()
        .ok_or(Error::Protocol("server exited at once".into()))?;
    let client = match door {
        Door::Ws => ws_connect(&mut child).await?,
        _ => {
            let (Some(i), Some(o)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(Error::Protocol("no stdio pipes".into()));
            };
            Client::stdio(i, o)
        }
    };
    let client = Arc::new(client);
    tokio::time::timeout(START_TIMEOUT, handshake(&client, door))
        .await
        .map_err(|_| Error::Protocol(format!("no initialize answer in {START_TIMEOUT:?}")))??;
    Ok(Server {
        child,
        pid,
        client,
        door,
        startup: t0.elapsed(),
    })
}

async fn handshake(client: &Client, door: Door) -> Result<(), Error> {
    match door {
        Door::Mcp => {
            let r = client
                .call(json!({"jsonrpc": "2.0", "method": "initialize", "params": {
                    "protocolVersion": MCP_VERSION, "capabilities": {},
                    "clientInfo": {"name": "fsgate-bench", "version": "0.1.0"}}}))
                .await?;
            if r["result"]["protocolVersion"].as_str().is_none() {
                return Err(Error::Protocol(format!("bad MCP initialize answer: {r}")));
            }
            client
                .notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await
        }
        Door::Acp => {
            let r = client
                .call(json!({"jsonrpc": "2.0", "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
                .await?;
            if r["result"]["clientCapabilities"]["fs"]["readTextFile"] != Value::Bool(true) {
                return Err(Error::Protocol(format!("bad ACP initialize answer: {r}")));
            }
            Ok(())
        }
        // The upgrade (with the token) was the handshake.
        Door::Ws => Ok(()),
    }
}

/// Reads the URL and token fsgate prints on stderr, then keeps draining stderr.
async fn ws_connect(child: &mut Child) -> Result<Client, Error> {
    let err = child
        .stderr
        .take()
        .ok_or(Error::Protocol("no stderr pipe".into()))?;
    let mut lines = BufReader::new(err).lines();
    let (mut url, mut token) = (None, None);
    let found = tokio::time::timeout(START_TIMEOUT, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if let Some(t) = l.split("fsgate: ws token: ").nth(1) {
                token = Some(t.trim().to_string());
            }
            if let Some(u) = l.split("fsgate: ws listening on ").nth(1) {
                url = Some(u.trim().to_string());
            }
            if url.is_some() && token.is_some() {
                return true;
            }
        }
        false
    })
    .await;
    if found != Ok(true) {
        return Err(Error::Protocol("fsgate ws printed no url and token".into()));
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    match (url, token) {
        (Some(u), Some(t)) => Client::websocket(&u, &t).await,
        _ => Err(Error::Protocol("fsgate ws printed no url and token".into())),
    }
}

impl Server {
    /// Ends the server: closes its input (SIGTERM for the WebSocket server), waits, and
    /// kills it if it does not exit.
    pub async fn stop(self) {
        let Server {
            mut child,
            pid,
            client,
            door,
            ..
        } = self;
        drop(client);
        if door == Door::Ws
            && let Ok(p) = i32::try_from(pid)
        {
            // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
            unsafe { libc::kill(p, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// utime + stime of `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64, Error> {
    let p = PathBuf::from(format!("/proc/{pid}/stat"));
    let s = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    match (num(11), num(12)) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => Err(Error::Protocol(format!("unreadable {}", p.display()))),
    }
}

/// Clock ticks per second (for [`cpu_ticks`]).
pub fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// A `Vm*` line of /proc/PID/status (`VmRSS`, `VmHWM`), in KiB.
pub fn vm_kib(pid: u32, key: &str) -> Result<u64, Error> {
    let p = PathBuf::from(format!("/proc/{pid}/status"));
    let s = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| Error::Protocol(format!("no {key} in {}", p.display())))
}
