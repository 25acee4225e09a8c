//! The `[ws]` settings, on an in-process server: allowed origins, the connection limit,
//! a custom ignore list and a small message limit (driven by the harness's Rust client
//! and raw HTTP).

use std::io::Read;

use fsgate_doors::ws::WsSettings;

use std::time::Duration;

use crate::ws_harness::InProcess;

#[test]
fn allowed_origins_admit_exactly_the_listed_pages() {
    let server = InProcess::start(
        WsSettings {
            allowed_origins: vec!["http://localhost:5173".into()],
            ..Default::default()
        },
        |_| {},
    );
    let (_s, ok) = server.upgrade(&["Origin: http://localhost:5173".into()]);
    assert!(ok.starts_with("HTTP/1.1 101"), "{ok}");
    let (_s, other_port) = server.upgrade(&["Origin: http://localhost:5174".into()]);
    assert!(other_port.starts_with("HTTP/1.1 403"), "{other_port}");
    let (_s, no_origin) = server.upgrade(&[]);
    assert!(no_origin.starts_with("HTTP/1.1 101"), "{no_origin}");
}

#[test]
fn connections_beyond_the_limit_get_503_until_one_closes() {
    let server = InProcess::start(
        WsSettings {
            max_connections: 2,
            ..Default::default()
        },
        |_| {},
    );
    let (first, a) = server.upgrade(&[]);
    let (_second, b) = server.upgrade(&[]);
    assert!(
        a.starts_with("HTTP/1.1 101") && b.starts_with("HTTP/1.1 101"),
        "{a}{b}"
    );
    let (_third, c) = server.upgrade(&[]);
    assert!(c.starts_with("HTTP/1.1 503"), "{c}");
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_s, again) = server.upgrade(&[]);
        if again.starts_with("HTTP/1.1 101") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "slot never freed: {again}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_oversized_frame_is_refused_from_its_header() {
    let server = InProcess::start(
        WsSettings {
            max_message_bytes: Some(4096),
            ..Default::default()
        },
        |_| {},
    );
    let (mut s, head) = server.upgrade(&[]);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // A masked text frame header announcing 1 MiB; no payload follows. The server
    // must answer from the header alone, without waiting for (or buffering) the body.
    let len: u64 = 1 << 20;
    let mut frame = vec![0x81, 0x80 | 127];
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&[1, 2, 3, 4]);
    std::io::Write::write_all(&mut s, &frame).expect("send header");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.contains("-32004") && text.contains("exceeds the limit of 4096 bytes"),
        "{text}"
    );
    // The close frame (opcode 0x8) with code 1009.
    let close = got
        .windows(4)
        .any(|w| w[0] == 0x88 && w[2..4] == 1009u16.to_be_bytes());
    assert!(close, "no close 1009 in {got:?}");
}

#[test]
fn a_custom_ignore_list_replaces_the_default() {
    let server = InProcess::start(
        WsSettings {
            ignore: vec!["generated".into()],
            debounce_ms: 20,
            ..Default::default()
        },
        |_| {},
    );
    let put = |rel: &str| {
        let p = server.root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("parents");
        std::fs::write(p, "x").expect("write");
    };
    let mut c = server.client();
    put("generated/out.js");
    put("src/generated/deep.js");
    put("node_modules/pkg/index.js");
    c.wait_change("create", "/node_modules/pkg/index.js", Some("file"));
    put("sentinel.txt");
    c.wait_change("create", "/sentinel.txt", None);
    c.settle(Duration::from_millis(300));
    let seen = c.change_paths();
    c.close();
    let seen: Vec<&str> = seen.iter().map(String::as_str).collect();
    assert!(seen.contains(&"/node_modules/pkg/index.js"), "{seen:?}");
    assert!(!seen.iter().any(|p| p.contains("generated")), "{seen:?}");
}
