//! The WebSocket files channel's shapes (issue 14, points 11 and 12): `error` is the
//! channel's string with the structured details in `errorInfo`; stat and list entries
//! carry `name`, `type`, `size`, `modified` (ISO 8601) and `permissions` (`rw-r--r--`),
//! extras beside them; change events carry `fileType`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::ws_harness::{WsClient, WsGate};

/// The fields the channel defines for a stat answer or a list entry.
const CHANNEL_FIELDS: [&str; 5] = ["name", "type", "size", "modified", "permissions"];

fn fixture(root: &Path) {
    std::fs::create_dir_all(root.join("src")).expect("src");
    let file = root.join("src/app.ts");
    std::fs::write(&file, "let x = 1;\n").expect("app.ts");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    std::fs::write(root.join(".env"), "SECRET=1\n").expect(".env");
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn is_iso_millis(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

fn assert_channel_entry(e: &Value, name: &str, kind: &str, permissions: &str) {
    for f in CHANNEL_FIELDS {
        assert!(e.get(f).is_some(), "{f} missing: {e}");
    }
    assert_eq!(e["name"], name, "{e}");
    assert_eq!(e["type"], kind, "{e}");
    assert!(e["size"].is_u64(), "{e}");
    assert!(is_iso_millis(&e["modified"]), "{e}");
    assert_eq!(e["permissions"], permissions, "{e}");
}

fn entries_and_stat(c: &mut WsClient) {
    let listed = c.ok("list", json!({"path": "/src"}));
    let entries = listed["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 1, "{listed}");
    assert_channel_entry(&entries[0], "app.ts", "file", "rw-r-----");
    assert_eq!(entries[0]["size"], 11);
    assert_eq!(entries[0]["path"], "/src/app.ts", "extras stay: {listed}");
    let st = c.ok("stat", json!({"path": "/src/app.ts"}));
    assert_channel_entry(&st, "app.ts", "file", "rw-r-----");
    assert_eq!(st["path"], "/src/app.ts");
    assert_eq!(st["modified"], entries[0]["modified"]);
    let dir = c.ok("stat", json!({"path": "/src"}));
    assert_eq!(
        (&dir["name"], &dir["type"]),
        (&json!("src"), &json!("directory"))
    );
}

fn errors(c: &mut WsClient) {
    let r = c.request("read", json!({"path": "/src/missing.ts"}));
    assert_eq!(r["error"], "File not found: /src/missing.ts", "{r}");
    assert_eq!(r["errorInfo"]["code"], -32002, "{r}");
    assert_eq!(r["errorInfo"]["path"], "/src/missing.ts", "{r}");
    assert!(r["errorInfo"]["message"].is_string(), "{r}");

    let r = c.request("read", json!({"path": "/.env"}));
    let text = r["error"].as_str().unwrap_or_default();
    assert!(text.starts_with("Access denied: /.env: "), "{r}");
    let info = &r["errorInfo"];
    assert_eq!(info["code"], -32003, "{r}");
    assert_eq!(info["path"], "/.env");
    let rule = info["rule"].as_str().unwrap_or_default();
    assert!(!rule.is_empty() && info["reason"].is_string(), "{r}");
    assert!(
        text.ends_with(info["reason"].as_str().unwrap_or("?")),
        "{r}"
    );

    let r = c.request("read", json!({}));
    assert_eq!(r["error"], "Invalid request: missing \"path\"", "{r}");
    assert_eq!(r["errorInfo"]["code"], -32602);

    let r = c.request("frobnicate", json!({}));
    let text = r["error"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Unknown request type \"frobnicate\""),
        "{r}"
    );

    c.send_text("not json");
    let r = c.next_other();
    let text = r["error"].as_str().unwrap_or_default();
    assert!(text.starts_with("Invalid JSON: "), "{r}");
    assert_eq!(r["errorInfo"]["code"], -32700, "{r}");
}

fn change_events(c: &mut WsClient) {
    c.ok("mkdir", json!({"path": "/lib"}));
    let e = c.wait_change("create", "/lib", Some("directory"));
    assert_eq!(e["fileType"], "directory", "{e}");
    c.ok("write", json!({"path": "/lib/a.ts", "content": "x"}));
    let e = c.wait_change("create", "/lib/a.ts", Some("file"));
    assert_eq!(e["fileType"], "file", "{e}");
}

#[test]
fn ws_errors_fields_and_events_as_the_channel_defines_them() {
    let gate = WsGate::start(None, fixture);
    let mut c = gate.client();
    entries_and_stat(&mut c);
    errors(&mut c);
    change_events(&mut c);
    // The records keep the codes: errorInfo is what the audit outcome comes from.
    let outcomes: Vec<Value> = gate
        .audit_requests()
        .iter()
        .filter(|r| r["op"] == "read_file")
        .map(|r| r["outcome"].clone())
        .collect();
    assert!(outcomes.contains(&json!("-32002")), "{outcomes:?}");
    assert!(outcomes.contains(&json!("-32003")), "{outcomes:?}");
}
