//! The WebSocket door cannot be held shut by clients without a token: connections
//! still in their upgrade have a small budget of their own (the oldest is dropped when
//! it is full) and a short deadline for the whole upgrade; an authenticated slot is
//! taken only once the token is checked. Silent connections write no audit record.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::ws_harness::{WsClient, WsGate};

/// Silent connections opened before the real client comes.
const SILENT: usize = 200;
/// Connections that send their request headers a byte at a time, throughout.
const SLOW: usize = 8;
/// How long the real client may take to be served.
const SERVED_WITHIN: Duration = Duration::from_secs(5);

/// Sends `GET / HTTP/1.1\r\n...` one byte every 50 ms, never finishing, reconnecting
/// when the server drops it, until `stop`.
fn slow_loris(addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nX-Padding: {}",
            "a".repeat(4096)
        );
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = TcpStream::connect(&addr) else {
                return;
            };
            for b in head.bytes() {
                if stop.load(Ordering::Relaxed) || s.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    })
}

#[test]
fn half_open_and_slow_connections_do_not_lock_out_the_token_holder() {
    let gate = WsGate::start(None, |root| {
        std::fs::write(root.join("readme.md"), "# hi").expect("readme");
    });
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(&gate.addr).expect("connect"))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let slow: Vec<_> = (0..SLOW)
        .map(|_| slow_loris(gate.addr.clone(), Arc::clone(&stop)))
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    let started = Instant::now();
    let auth = [("Authorization", format!("Bearer {}", gate.token))];
    let mut client = match WsClient::connect_with(&gate.addr, &gate.addr, "", &auth) {
        Ok(c) => c,
        Err(r) => panic!(
            "the token holder was refused behind {SILENT} silent connections: HTTP {} {}",
            r.status, r.body
        ),
    };
    let listed = client.ok("list", serde_json::json!({"path": "/"}));
    let took = started.elapsed();
    assert_eq!(listed["entries"][0]["name"], "readme.md", "{listed}");
    assert!(took < SERVED_WITHIN, "served only after {took:?}");
    eprintln!("token holder served in {took:?} behind {SILENT} silent and {SLOW} slow connections");
    client.close();

    // The silent connections were dropped (the oldest first, then by the deadline).
    let dropped = silent
        .into_iter()
        .filter(|s| {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 64];
            matches!((&*s).read(&mut buf), Ok(0) | Err(_))
        })
        .count();
    assert_eq!(
        dropped, SILENT,
        "every silent connection is closed by the server"
    );
    stop.store(true, Ordering::Relaxed);
    for t in slow {
        let _ = t.join();
    }

    // A connection that never sent a whole request is no request: no audit record.
    let records = gate.audit_requests();
    assert!(
        records.iter().all(|r| r["op"] != "ws-upgrade"),
        "{records:#?}"
    );
    assert_eq!(records.len(), 1, "only the list: {records:#?}");
}

#[test]
fn refused_requests_are_still_recorded_and_take_no_slot() {
    let gate = WsGate::start(
        Some(&format!(
            "{}\n[ws]\nmax_connections = 1\nmax_pending_handshakes = 2\nhandshake_timeout_ms = 500\n",
            crate::ws_harness::policy("deny")
        )),
        |_| {},
    );
    // Refused for want of a token: recorded, and no authenticated slot spent on it.
    for _ in 0..3 {
        let head = gate.raw_http(&gate.upgrade_request(&[format!("Host: {}", gate.addr)]));
        assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    }
    let mut first = gate.client();
    first.ok("list", serde_json::json!({"path": "/"}));
    // The one slot is taken: a second token holder gets 503, recorded as a limit.
    let auth = [("Authorization", format!("Bearer {}", gate.token))];
    match WsClient::connect_with(&gate.addr, &gate.addr, "", &auth) {
        Ok(_) => panic!("max_connections = 1 admitted a second connection"),
        Err(r) => assert_eq!(r.status, 503, "{}", r.body),
    }
    // A silent connection is closed at the deadline, unrecorded. The read timeout is
    // far beyond the deadline: only the server's close can end the read early, however
    // loaded the machine is.
    let mut silent = TcpStream::connect(&gate.addr).expect("connect");
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let started = Instant::now();
    let mut buf = [0u8; 16];
    // Ok(0) or a reset is the server's close; a timeout is not.
    match silent.read(&mut buf) {
        Ok(0) => {}
        Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("not closed by the server: {other:?}"),
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(20),
        "closed after {took:?}"
    );
    first.close();
    // The records are appended by the gateway's writer: wait for the fourth.
    let upgrades = || -> Vec<String> {
        gate.audit_requests()
            .into_iter()
            .filter(|r| r["op"] == "ws-upgrade")
            .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = upgrades();
    while seen.len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        seen = upgrades();
    }
    assert_eq!(seen, ["-32003", "-32003", "-32003", "-32004"]);
}
