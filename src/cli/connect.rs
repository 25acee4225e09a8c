//! `fsgate mcp-connect --port PORT`: the command an agent that starts its MCP servers as
//! commands is given for the server `fsgate acp` hosts. It connects to that server on
//! the loopback, presents the session's secret (from `FSGATE_MCP_TOKEN`), upgrades the
//! connection to the plain MCP line protocol, and relays its stdin and stdout over it
//! until either side ends. It reads no file and holds no state: everything is decided
//! and recorded in the gateway.

use std::process::ExitCode;

use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

use fsgate_doors::http::bridge;

/// Relays stdio to the hosted MCP server on `port`.
pub(super) fn mcp_connect(port: u16) -> ExitCode {
    let Ok(token) = std::env::var(fsgate_doors::hosted::TOKEN_ENV) else {
        return super::exit::fail(&format!(
            "mcp-connect: {} is not set: this command is started by an agent that fsgate acp gave it to",
            fsgate_doors::hosted::TOKEN_ENV
        ));
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return super::exit::fail(&format!("mcp-connect: cannot start the runtime: {e}")),
    };
    match runtime.block_on(relay(port, &token)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fsgate_base::text::eprint_line(&format!("fsgate mcp-connect: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// Connects, upgrades, and copies both ways until the server or stdin ends.
async fn relay(port: u16, token: &str) -> Result<(), String> {
    let tcp = tokio::net::TcpStream::connect((std::net::Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| format!("cannot reach fsgate's MCP server on 127.0.0.1:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn.with_upgrades());
    let req = http::Request::get(bridge::PATH)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .header(http::header::CONNECTION, "upgrade")
        .header(http::header::UPGRADE, bridge::PROTOCOL)
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        return Err(format!(
            "fsgate's MCP server refused the connection: HTTP {}",
            resp.status()
        ));
    }
    let upgraded = hyper::upgrade::on(resp)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let (mut from_server, mut to_server) = tokio::io::split(TokioIo::new(upgraded));
    let mut stdin = fsgate_doors::stdio::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        let copied = tokio::io::copy(&mut stdin, &mut to_server).await;
        // The client is done: the server sees the end of its input and finishes.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_server).await;
        copied
    };
    let down = tokio::io::copy(&mut from_server, &mut stdout);
    tokio::pin!(up);
    tokio::select! {
        // The server ended (the session or the gateway did): so does the bridge.
        r = down => r.map(drop).map_err(|e| format!("from the server: {e}")),
        r = &mut up => {
            r.map_err(|e| format!("to the server: {e}"))?;
            // Let the server's last answers out.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), tokio::io::copy(&mut from_server, &mut stdout)).await;
            Ok(())
        }
    }
}
