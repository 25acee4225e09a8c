//! The MCP server `fsgate acp` hosts for its agent: the agents people run today do
//! their file work with tools of their own, not ACP `fs/*`, but they use the MCP
//! servers a session lists. So the proxy adds one of its own to every session the
//! agent opens, served from the gateway process, under the same policy, asking the
//! editor's person for `ask` rules, recorded in the one audit log under the ACP
//! session's id.
//!
//! It is the HTTP door's code ([`crate::http`]) on a loopback port bound
//! at start, with a secret per session: an agent that takes Streamable HTTP servers
//! (`agentCapabilities.mcpCapabilities.http`) gets a URL and an `Authorization`
//! header; any other gets a command, this very binary as `fsgate mcp-connect`, which
//! relays its stdio to the same port (the connection upgraded to the plain MCP line
//! protocol), the secret in its environment. Under `--confine-agent` that port is
//! the one part of the gateway the agent and its children can reach. An agent that
//! advertises ACP's draft MCP-over-ACP transport (`mcpCapabilities.acp`) is given an
//! entry of type `acp` instead, and reaches the same code over its ACP connection
//! (`crate::hosted_acp`).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::http::{self, Principal, Server};
use fsgate_gateway::Gateway;
use fsgate_gateway::ask::Asker;

/// The server's name in the agent's MCP server list (Claude Code shows its tools as
/// `mcp__fsgate__read_text_file`, Gemini CLI as `mcp_fsgate_read_text_file`).
pub const SERVER_NAME: &str = "fsgate";

/// The environment variable carrying the secret to `fsgate mcp-connect`.
pub const TOKEN_ENV: &str = "FSGATE_MCP_TOKEN";

/// MCP sessions one ACP session may hold at once (a reconnecting agent opens new ones;
/// idle ones are ended).
const SESSIONS_PER_ACP_SESSION: usize = 8;

/// The MCP server an ACP session's agent reaches (see [`http::HOSTED_DOOR`], kept with
/// the server it describes).
pub const DOOR: fsgate_gateway::DoorSpec = http::HOSTED_DOOR;

/// At most this many ACP sessions have a secret at once; the oldest is revoked beyond.
const MAX_ADMITTED: usize = 256;

/// How the agent reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Streamable HTTP, with the secret in a header.
    Http,
    /// A command (`fsgate mcp-connect`) relaying stdio, with the secret in its environment.
    Stdio,
    /// The ACP connection itself (`mcp/connect` with the entry's `serverId`).
    Acp,
}

impl Reach {
    /// Its name in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Reach::Http => "http",
            Reach::Stdio => "stdio",
            Reach::Acp => "acp",
        }
    }
}

/// A session's place at the server: its name (provisional until the agent names the
/// session) and the entry to add to the session's `mcpServers`.
#[derive(Debug)]
pub struct Admission {
    /// The session's name in records until the agent's answer names it.
    pub name: String,
    /// What [`Hosted::name`] and `Hosted::revoke` know it by.
    pub key: String,
    /// How the agent reaches it (HTTP, ACP transport, or the stdio bridge).
    pub reach: Reach,
    /// The `mcpServers` entry (it holds the secret: never logged, never recorded).
    pub entry: Value,
}

/// The hosted server.
pub struct Hosted {
    server: Arc<Server>,
    port: u16,
    /// This binary, for the stdio entry; None if it could not be found at start.
    exe: Option<PathBuf>,
    counter: AtomicU64,
    /// Secrets by admission key, to name or revoke them.
    admitted: Mutex<HashMap<String, Admitted>>,
}

/// One admission's number (oldest first), secret (the `serverId` for [`Reach::Acp`]),
/// principal, and how the agent reaches it.
type Admitted = (u64, String, Arc<Principal>, Reach);

impl Hosted {
    /// Binds the loopback port the server will listen on.
    ///
    /// # Ambient Authority
    /// Binds a socket: start-up, before the gateway confines itself.
    pub fn bind() -> std::io::Result<TcpListener> {
        let l = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        l.set_nonblocking(true)?;
        Ok(l)
    }

    /// The server over `gw` for a listener on `port`; `exe` is this binary.
    pub fn new(gw: Arc<Gateway>, port: u16, exe: Option<PathBuf>) -> Arc<Hosted> {
        Arc::new(Hosted {
            server: http::hosted_server(gw),
            port,
            exe,
            counter: AtomicU64::new(0),
            admitted: Mutex::new(HashMap::new()),
        })
    }

    /// Serves on `listener` (the one bound by [`Hosted::bind`]) until dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) -> std::io::Result<()> {
        http::run(Arc::clone(&self.server), listener).await
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL agents that speak Streamable HTTP are given.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, http::PATH)
    }

    /// Admits a session about to be opened: `known` is its id when the request names
    /// it (load, resume), else it gets a provisional name until [`Hosted::name`].
    /// `wanted`: how the agent would reach it (the bridge falls back to HTTP when this
    /// binary was not found). `taken`: names the session's list has already.
    pub(crate) fn admit(
        &self,
        known: Option<&str>,
        wanted: Reach,
        (asker, notifier): (Arc<dyn Asker>, Option<Arc<dyn fsgate_gateway::ChangeSink>>),
        taken: &[String],
        within: fsgate_gateway::Ceiling,
    ) -> Result<Admission, String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = match known {
            Some(id) => id.to_owned(),
            None => format!("acp-pending-{n}-{}", &http::secret()?[..8]),
        };
        let reach = match (wanted, &self.exe) {
            (Reach::Stdio, None) => Reach::Http,
            (other, _) => other,
        };
        let secret = match reach {
            Reach::Acp => server_id()?,
            Reach::Http | Reach::Stdio => http::secret()?,
        };
        let mut principal = Principal::new(Some(name.clone()), &DOOR, SESSIONS_PER_ACP_SESSION);
        principal.oversight = crate::mcp::identity::Oversight::Person { asker, notifier };
        principal.within = within;
        let principal = Arc::new(principal);
        if reach != Reach::Acp {
            self.server.keys.add(&secret, Arc::clone(&principal));
        }
        let key = self.remember(&name, n, (secret.clone(), principal, reach));
        let entry = self.entry(reach, &secret, server_name(taken));
        Ok(Admission {
            name,
            key,
            reach,
            entry,
        })
    }

    /// Keeps the secret of `name`, revoking the oldest beyond [`MAX_ADMITTED`]; the key
    /// it is kept under.
    fn remember(
        &self,
        name: &str,
        n: u64,
        (secret, p, reach): (String, Arc<Principal>, Reach),
    ) -> String {
        let mut admitted = self.admitted.lock().unwrap_or_else(|e| e.into_inner());
        if admitted.len() >= MAX_ADMITTED
            && let Some(oldest) = admitted
                .iter()
                .min_by_key(|(_, v)| v.0)
                .map(|(k, _)| k.clone())
            && let Some((_, s, p, _)) = admitted.remove(&oldest)
        {
            self.server.keys.remove(&s);
            p.end_stateless();
        }
        // A session loaded again keeps its older secret too (its agent may still use it).
        let key = if admitted.contains_key(name) {
            format!("{name}#{n}")
        } else {
            name.to_owned()
        };
        admitted.insert(key.clone(), (n, secret, p, reach));
        key
    }

    /// The principal of the session whose entry named `server_id` (MCP-over-ACP).
    pub(crate) fn acp_principal(&self, server_id: &str) -> Option<Arc<Principal>> {
        let admitted = self.admitted.lock().unwrap_or_else(|e| e.into_inner());
        admitted
            .values()
            .find(|(_, s, _, reach)| *reach == Reach::Acp && s == server_id)
            .map(|(_, _, p, _)| Arc::clone(p))
    }

    /// The message limit the server's doors keep to.
    pub(crate) fn max_message(&self) -> usize {
        self.server.limits.max_message
    }

    /// The room all the server's unwritten answers share.
    pub(crate) fn room(&self) -> Arc<http::AnswerRoom> {
        Arc::clone(&self.server.room)
    }

    /// The agent named the session admitted as `a`: `real`.
    pub fn name(&self, a: &Admission, real: &str) {
        let provisional = a.name.as_str();
        let admitted = self.admitted.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, p, _)) = admitted.get(&a.key) {
            *p.session.lock().unwrap_or_else(|e| e.into_inner()) = Some(real.to_owned());
        }
        drop(admitted);
        if provisional == real {
            return;
        }
        if !self.server.gw.name_session(provisional, real) {
            tracing::warn!(
                provisional,
                real,
                "too many session names held; records of this session keep its provisional name"
            );
        }
    }

    /// The session was not opened: its secret no longer opens anything.
    pub(crate) fn revoke(&self, a: &Admission) {
        let gone = self
            .admitted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&a.key);
        if let Some((_, secret, p, _)) = gone {
            self.server.keys.remove(&secret);
            p.end_stateless();
        }
    }

    /// The agent is gone: no secret opens anything any more, and every session ends.
    pub fn close(&self) {
        let all: Vec<Admitted> = self
            .admitted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, v)| v)
            .collect();
        for (_, secret, p, _) in all {
            self.server.keys.remove(&secret);
            p.end_stateless();
        }
        self.server.end_all();
    }

    /// The `mcpServers` entry for `reach`.
    fn entry(&self, reach: Reach, secret: &str, name: String) -> Value {
        match (reach, &self.exe) {
            (Reach::Acp, _) => json!({"type": "acp", "name": name, "serverId": secret}),
            (Reach::Stdio, Some(exe)) => json!({
                "name": name,
                "command": exe,
                "args": ["mcp-connect", "--port", self.port.to_string()],
                "env": [{"name": TOKEN_ENV, "value": secret}],
            }),
            _ => json!({
                "type": "http",
                "name": name,
                "url": self.url(),
                "headers": [{"name": "Authorization", "value": format!("Bearer {secret}")}],
            }),
        }
    }
}

/// A fresh `serverId`: a random UUID (version 4), as the draft's schema first had it.
fn server_id() -> Result<String, String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| format!("cannot draw a server id: {e}"))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// `fsgate`, or the first of `fsgate-gateway`, `fsgate-2`... the list does not name.
fn server_name(taken: &[String]) -> String {
    let free = |n: &str| !taken.iter().any(|t| t == n);
    if free(SERVER_NAME) {
        return SERVER_NAME.to_owned();
    }
    (2..)
        .map(|i| format!("{SERVER_NAME}-{i}"))
        .find(|n| free(n))
        .unwrap_or_else(|| SERVER_NAME.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_never_shadows_the_editor_s() {
        assert_eq!(server_name(&[]), "fsgate");
        assert_eq!(server_name(&["fsgate".into()]), "fsgate-2");
        assert_eq!(
            server_name(&["fsgate".into(), "fsgate-2".into()]),
            "fsgate-3"
        );
    }
}
