//! Who may connect to the WebSocket door: bearer token, browser Origin, Host header
//! (the harness's Rust client, plus raw HTTP for what a client library cannot send).

use crate::ws_harness::{Refused, WsClient, WsGate};

fn gate() -> WsGate {
    WsGate::start(None, |root| {
        std::fs::write(root.join("readme.md"), "# hi").expect("readme");
    })
}

/// Connects to `path_query` with `headers`; the upgrade must be refused with `status`.
fn refused(gate: &WsGate, status: u16, path_query: &str, headers: &[(&str, String)]) -> String {
    match WsClient::connect_with(&gate.addr, &gate.addr, path_query, headers) {
        Ok(c) => {
            c.close();
            panic!("{path_query} {headers:?} should be refused with {status}")
        }
        Err(Refused { status: got, body }) => {
            assert_eq!(got, status, "{path_query} {headers:?}: {body}");
            assert!(!body.contains(&gate.token), "{body}");
            body.trim().to_string()
        }
    }
}

/// The connection works: it lists the workspace.
fn works(mut c: WsClient) {
    let entries = c.ok("list", serde_json::json!({"path": "/"}))["entries"].clone();
    let names: Vec<_> = entries
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert_eq!(names, ["readme.md"], "{entries}");
    c.close();
}

#[test]
fn tokens_and_origins_are_checked_on_the_upgrade() {
    let gate = gate();
    assert_eq!(
        gate.token.len(),
        64,
        "a 32-byte hex token is printed at start"
    );
    let token = gate.token.clone();
    let bearer = |t: &str| ("Authorization", format!("Bearer {t}"));
    let origin = |o: &str| ("Origin", o.to_string());
    let no_token = refused(&gate, 401, "", &[]);
    assert!(no_token.contains("missing token"), "{no_token}");
    refused(&gate, 401, "", &[bearer(&"0".repeat(64))]);
    refused(&gate, 401, "", &[bearer(&token[..63])]);
    refused(&gate, 401, "?token=nope", &[]);
    refused(
        &gate,
        401,
        "",
        &[("Authorization", format!("Basic {token}"))],
    );
    let foreign = refused(
        &gate,
        403,
        "",
        &[bearer(&token), origin("https://evil.example")],
    );
    assert!(foreign.contains("Origin"), "{foreign}");
    refused(&gate, 403, "", &[bearer(&token), origin("null")]);
    refused(
        &gate,
        403,
        "",
        &[bearer(&token), origin("http://localhost:3000")],
    );
    // The token in the URL is refused too when the Origin is foreign.
    refused(
        &gate,
        403,
        &format!("?token={token}"),
        &[origin("https://evil.example")],
    );

    works(gate.client());
    works(
        WsClient::connect_with(&gate.addr, &gate.addr, &format!("?token={token}"), &[])
            .expect("query token"),
    );
    let lower = [("Authorization", format!("bearer {token}"))];
    works(WsClient::connect_with(&gate.addr, &gate.addr, "", &lower).expect("lower-case bearer"));
    let port = gate.addr.rsplit(':').next().unwrap_or_default();
    let localhost = format!("localhost:{port}");
    works(
        WsClient::connect_with(&gate.addr, &localhost, "", &[bearer(&token)]).expect("localhost"),
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
            ["ws-host", "ws-origin", "ws-token"].contains(&r["rule"].as_str().unwrap_or("")),
            "the refusing check is the rule: {r}"
        );
        assert!(
            r["reason"]
                .as_str()
                .is_some_and(|m| m.starts_with("HTTP 40")),
            "{r}"
        );
        assert!(!r.to_string().contains(&"0".repeat(64)), "{r}");
        assert!(!r.to_string().contains(&gate.token), "{r}");
    }
    // `audit show` reads them with the refusing check and why, not a bare -32003.
    let log = gate.state.join("audit").join("audit.jsonl");
    let out = crate::common::run_cli(&[
        "audit",
        "show",
        "--op",
        "ws-upgrade",
        "--width",
        "0",
        &log.display().to_string(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 9, "{table}");
    assert!(
        rows.iter()
            .all(|r| r.contains(" refused ") && r.contains("HTTP 40")),
        "{table}"
    );
    assert!(rows.iter().any(|r| r.contains("ws-token")), "{table}");
    assert!(rows.iter().any(|r| r.contains("ws-origin")), "{table}");
    assert!(!table.contains("-32003"), "{table}");
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

/// A request a server and a proxy could read two ways is refused: a repeated Host,
/// Origin or Authorization (a server reading the first and a proxy the last would
/// disagree on which was checked), or an absolute target, whose host is the URI's.
#[test]
fn repeated_headers_and_absolute_targets_are_refused() {
    let gate = gate();
    let auth = format!("Authorization: Bearer {}", gate.token);
    let host = format!("Host: {}", gate.addr);
    let own = format!("Origin: http://{}", gate.addr);
    let cases: [Vec<String>; 3] = [
        vec![host.clone(), "Host: evil.example".into(), auth.clone()],
        vec![
            host.clone(),
            own,
            "Origin: http://evil.example".into(),
            auth.clone(),
        ],
        vec![
            host.clone(),
            auth.clone(),
            "Authorization: Bearer wrong".into(),
        ],
    ];
    for extra in cases {
        let answer = gate.raw_http(&gate.upgrade_request(&extra));
        assert!(answer.starts_with("HTTP/1.1 400"), "{extra:?}: {answer}");
        assert!(answer.contains("repeated"), "{answer}");
    }
    let absolute = gate
        .upgrade_request(&[host.clone(), auth.clone()])
        .replacen("GET / ", "GET http://evil.example/ ", 1);
    let answer = gate.raw_http(&absolute);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let ok = gate.raw_http(&gate.upgrade_request(&[host, auth]));
    assert!(ok.starts_with("HTTP/1.1 101"), "{ok}");
}
