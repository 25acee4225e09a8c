//! Who may connect to the WebSocket door: bearer token, browser Origin, Host header
//! (tests/peers/ws/auth.py with Python `websockets`, plus raw HTTP for what a
//! well-behaved client library cannot send).

use crate::ws_harness::{WsGate, python_or_skip};

fn gate() -> WsGate {
    WsGate::start(None, |root| {
        std::fs::write(root.join("readme.md"), "# hi").expect("readme");
    })
}

#[test]
fn tokens_and_origins_are_checked_on_the_upgrade() {
    let Some(py) = python_or_skip("ws auth") else {
        return;
    };
    let gate = gate();
    assert_eq!(
        gate.token.len(),
        64,
        "a 32-byte hex token is printed at start"
    );
    let summary = gate.peer_ok(&py, "auth.py", &[]);
    let reasons = &summary["reasons"];
    assert!(
        reasons["no token"]
            .as_str()
            .is_some_and(|r| r.contains("missing token")),
        "{summary}"
    );
    assert!(
        reasons["foreign origin"]
            .as_str()
            .is_some_and(|r| r.contains("Origin")),
        "{summary}"
    );
    // Refused connections never reach the files channel: each is one `ws-upgrade` denial
    // in the audit log, naming why (never what was presented).
    let all = gate.audit_requests();
    let refused: Vec<_> = all.iter().filter(|r| r["op"] == "ws-upgrade").collect();
    assert_eq!(refused.len(), 9, "{refused:?}");
    for r in &refused {
        assert_eq!(r["decision"], "deny", "{r}");
        assert_eq!(r["outcome"], "-32003", "{r}");
        assert!(
            r["reason"]
                .as_str()
                .is_some_and(|m| m.starts_with("HTTP 40")),
            "{r}"
        );
        assert!(!r.to_string().contains(&"0".repeat(64)), "{r}");
        assert!(!r.to_string().contains(&gate.token), "{r}");
    }
    // The four good connections' lists.
    let records: Vec<_> = all.iter().filter(|r| r["op"] != "ws-upgrade").collect();
    assert_eq!(records.len(), 4, "{records:?}");
    let sessions: std::collections::HashSet<_> =
        records.iter().map(|r| r["session"].to_string()).collect();
    assert_eq!(sessions.len(), 4, "each connection is its own session");
    // The server's log names refusals without echoing what was presented.
    let log = gate.stderr();
    assert!(log.contains("ws connection refused"), "{log}");
    assert!(
        !log.contains(&"0".repeat(64)),
        "a presented token must not be logged"
    );
}

#[test]
fn host_must_name_the_loopback_and_is_required() {
    let gate = gate();
    let auth = format!("Authorization: Bearer {}", gate.token);
    let rebinding =
        gate.raw_http(&gate.upgrade_request(&["Host: evil.example:8080".into(), auth.clone()]));
    assert!(rebinding.starts_with("HTTP/1.1 403"), "{rebinding}");
    let missing = gate.raw_http(&gate.upgrade_request(std::slice::from_ref(&auth)));
    assert!(missing.starts_with("HTTP/1.1 400"), "{missing}");
    let no_token = gate.raw_http(&gate.upgrade_request(&[format!("Host: {}", gate.addr)]));
    assert!(no_token.starts_with("HTTP/1.1 401"), "{no_token}");
    assert!(
        no_token
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{no_token}"
    );
    let ok = gate.raw_http(&gate.upgrade_request(&[format!("Host: {}", gate.addr), auth.clone()]));
    assert!(ok.starts_with("HTTP/1.1 101"), "{ok}");
    let ok6 = gate.raw_http(&gate.upgrade_request(&["Host: localhost".into(), auth]));
    assert!(ok6.starts_with("HTTP/1.1 101"), "{ok6}");
}
