//! The files channel's request types, errors, binary round trip and message limits,
//! driven by the Rust WebSocket client of the harness; and one audit record for every
//! message, whatever it is.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};

use crate::ws_harness::{WsClient, WsGate, policy};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const NOT_FOUND: i64 = -32002;
const REFUSED: i64 = -32003;
const LIMIT: i64 = -32004;

const BLOB_LEN: usize = 1024;

fn blob() -> Vec<u8> {
    (0..BLOB_LEN).map(|i| (i % 256) as u8).collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn fixture(root: &Path) {
    std::fs::write(root.join("hello.txt"), "hello\n").expect("hello");
    std::fs::create_dir(root.join("sub")).expect("sub");
    std::fs::write(root.join("sub/inner.txt"), "inner").expect("inner");
    std::fs::write(root.join(".env"), "SECRET=1\n").expect(".env");
    std::fs::write(root.join("blob.bin"), blob()).expect("blob");
}

fn listing_and_reading(c: &mut WsClient) {
    let entries = c.ok("list", json!({"path": "/"}))["entries"].clone();
    let list = entries.as_array().expect("entries");
    let by_name = |n: &str| list.iter().find(|e| e["name"] == n).cloned();
    for n in ["hello.txt", "sub", "blob.bin"] {
        assert!(by_name(n).is_some(), "{n} in {entries}");
    }
    assert!(by_name(".env").is_none(), "a secret must not be listed");
    let hello = by_name("hello.txt").expect("hello");
    assert_eq!(hello["path"], "/hello.txt");
    assert_eq!(hello["type"], "file");
    assert_eq!(hello["size"], 6);
    assert!(hello["modified"].is_string(), "{hello}");
    let sub = by_name("sub").expect("sub");
    assert_eq!(
        (sub["type"].as_str(), sub["path"].as_str()),
        (Some("directory"), Some("/sub"))
    );
    let inner = c.ok("list", json!({"path": "/sub"}))["entries"].clone();
    let paths: Vec<&str> = inner
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert_eq!(paths, ["/sub/inner.txt"]);
    // The root's listing is the default.
    assert_eq!(c.ok("list", json!({}))["entries"], entries);

    assert_eq!(
        c.ok("read", json!({"path": "/hello.txt"})),
        json!({"content": "hello\n", "encoding": "utf-8"})
    );
    assert_eq!(
        c.ok("read", json!({"path": "/hello.txt", "encoding": "base64"})),
        json!({"content": b64(b"hello\n"), "encoding": "base64"})
    );
    let st = c.ok("stat", json!({"path": "/hello.txt"}));
    assert_eq!(
        (
            st["path"].as_str(),
            st["type"].as_str(),
            st["size"].as_u64()
        ),
        (Some("/hello.txt"), Some("file"), Some(6))
    );
    assert!(st["modified"].is_string(), "{st}");
    assert_eq!(st["permissions"].as_str().map(str::len), Some(9), "{st}");
    assert_eq!(c.ok("stat", json!({"path": "/sub"}))["type"], "directory");
}

fn writing(c: &mut WsClient) {
    let text = "ünïcödé ✓\nline 2\n";
    assert_eq!(
        c.ok("write", json!({"path": "/notes.txt", "content": text})),
        json!({})
    );
    assert_eq!(c.ok("read", json!({"path": "/notes.txt"}))["content"], text);
    assert_eq!(
        c.ok(
            "write",
            json!({"path": "/notes.txt", "content": "replaced"})
        ),
        json!({})
    );
    assert_eq!(
        c.ok("read", json!({"path": "/notes.txt"}))["content"],
        "replaced"
    );
    // Parents are created.
    assert_eq!(
        c.ok(
            "write",
            json!({"path": "/new/dir/file.txt", "content": "deep"})
        ),
        json!({})
    );
    assert_eq!(
        c.ok("stat", json!({"path": "/new/dir"}))["type"],
        "directory"
    );
}

fn decode(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("base64 text"))
        .expect("base64")
}

fn binary(c: &mut WsClient, mode: &str) {
    let data = b64(&blob());
    assert_eq!(
        c.ok(
            "write",
            json!({"path": "/out.bin", "content": data, "encoding": "base64"})
        ),
        json!({})
    );
    if mode == "base64" {
        let got = c.ok("read", json!({"path": "/out.bin"}));
        assert_eq!(got["encoding"], "base64", "{got}");
        assert_eq!(decode(&got["content"]), blob());
        let pre = c.ok("read", json!({"path": "/blob.bin"}));
        assert_eq!(decode(&pre["content"]), blob());
    } else {
        let err = c.fail("read", LIMIT, json!({"path": "/out.bin"}));
        assert_eq!(err["rule"], "limits.binary", "{err}");
        let err = c.fail(
            "read",
            LIMIT,
            json!({"path": "/blob.bin", "encoding": "base64"}),
        );
        assert_eq!(err["rule"], "limits.binary", "{err}");
    }
}

fn mutating(c: &mut WsClient) {
    assert_eq!(c.ok("mkdir", json!({"path": "/made"})), json!({}));
    assert_eq!(c.ok("stat", json!({"path": "/made"}))["type"], "directory");
    assert_eq!(
        c.ok("mkdir", json!({"path": "/a/b/c", "recursive": true})),
        json!({})
    );
    assert_eq!(c.ok("stat", json!({"path": "/a/b/c"}))["type"], "directory");
    let err = c.request("mkdir", json!({"path": "/x/y"}));
    assert!(
        err.get("error").is_some(),
        "mkdir without recursive must not create parents"
    );

    let mv = json!({"oldPath": "/notes.txt", "newPath": "/made/renamed.txt"});
    assert_eq!(c.ok("rename", mv), json!({}));
    c.fail("read", NOT_FOUND, json!({"path": "/notes.txt"}));
    assert_eq!(
        c.ok("read", json!({"path": "/made/renamed.txt"}))["content"],
        "replaced"
    );

    assert_eq!(
        c.ok("delete", json!({"path": "/made/renamed.txt"})),
        json!({})
    );
    c.fail("stat", NOT_FOUND, json!({"path": "/made/renamed.txt"}));
    c.fail("delete", INVALID_PARAMS, json!({"path": "/a"})); // not empty, not recursive
    assert_eq!(
        c.ok("delete", json!({"path": "/a", "recursive": true})),
        json!({})
    );
    c.fail("stat", NOT_FOUND, json!({"path": "/a"}));
}

fn errors(c: &mut WsClient) {
    let err = c.fail("read", REFUSED, json!({"path": "/.env"}));
    assert!(
        err["rule"]
            .as_str()
            .is_some_and(|r| r.starts_with("secrets:")),
        "{err}"
    );
    assert!(
        err["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{err}"
    );
    assert!(
        !err.to_string().contains("SECRET"),
        "no file content in a refusal"
    );
    c.fail("write", REFUSED, json!({"path": "/.env", "content": "x"}));
    let err = c.fail("read", REFUSED, json!({"path": "/../../etc/passwd"}));
    assert_eq!(err["rule"], "workspace-boundary", "{err}");
    c.fail("read", NOT_FOUND, json!({"path": "/missing.txt"}));
    c.fail("frobnicate", METHOD_NOT_FOUND, json!({"path": "/"}));
    c.fail("read", INVALID_PARAMS, json!({}));
    c.fail("write", INVALID_PARAMS, json!({"path": "/x.txt"}));
    let bad64 = json!({"path": "/x.txt", "content": "!!!", "encoding": "base64"});
    c.fail("write", INVALID_PARAMS, bad64);
    c.fail(
        "read",
        INVALID_PARAMS,
        json!({"path": "/hello.txt", "encoding": "latin-1"}),
    );
    c.fail("rename", INVALID_PARAMS, json!({"oldPath": "/hello.txt"}));

    // requestId keeps its JSON type.
    let resp = c.request("stat", json!({"path": "/hello.txt", "requestId": 42}));
    assert!(
        resp["requestId"] == 42 && resp.get("data").is_some(),
        "{resp}"
    );

    // Messages that cannot be matched to a request still get a clear error.
    let wrong_channel = json!({"channel": "terminal", "type": "read", "requestId": "t1"});
    c.send_text("not json");
    assert_eq!(c.next_other()["errorInfo"]["code"], PARSE_ERROR);
    c.send_text("[1,2]");
    assert_eq!(c.next_other()["errorInfo"]["code"], INVALID_REQUEST);
    let id = json!("t1");
    c.send_text(&wrong_channel.to_string());
    let got = c.answer(&id);
    assert_eq!(got["errorInfo"]["code"], INVALID_REQUEST, "{got}");
    c.send_text(r#"{"channel":"files","type":"read","path":"/hello.txt"}"#);
    assert_eq!(c.next_other()["errorInfo"]["code"], INVALID_PARAMS);
    c.send_binary(br#"{"channel":"files","type":"list","requestId":"bin"}"#);
    let got = c.next_other();
    assert_eq!(got["errorInfo"]["code"], INVALID_REQUEST, "{got}");
    assert!(
        got["errorInfo"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("binary")),
        "{got}"
    );
}

fn pipelined(c: &mut WsClient) {
    // 40 requests sent before any answer is read; all answered, matched by requestId.
    let ids: Vec<Value> = (0..40)
        .map(|_| c.send("read", json!({"path": "/hello.txt"})))
        .collect();
    for id in ids {
        assert_eq!(c.answer(&id)["data"]["content"], "hello\n");
    }
    // Writes and reads sent together: each read sees the write sent just before it,
    // whichever way the reads are served.
    let sent: Vec<(Value, Value)> = (0..20)
        .map(|i| {
            let (path, content) = (format!("/seq{i}.txt"), format!("version {i}"));
            let write = c.send("write", json!({"path": path, "content": content}));
            (write, c.send("read", json!({"path": path})))
        })
        .collect();
    for (i, (write, read)) in sent.iter().enumerate() {
        let got = c.answer(write);
        assert_eq!(got["data"], json!({}), "{got}");
        assert_eq!(c.answer(read)["data"]["content"], format!("version {i}"));
    }
    // Then one at a time again, each answered before the next is sent.
    for _ in 0..5 {
        let got = c.ok("read", json!({"path": "/seq19.txt"}));
        assert_eq!(got["content"], "version 19");
    }
}

fn oversized(gate: &WsGate) -> String {
    let mut ws = gate.client();
    let big = json!({"path": "/big.txt", "content": "x".repeat(70000), "requestId": "big"});
    ws.send("write", big);
    let first = ws.next_other();
    assert_eq!(first["errorInfo"]["code"], LIMIT, "{first}");
    let message = first["errorInfo"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("65536"), "{first}");
    ws.settle(std::time::Duration::from_secs(10));
    assert!(
        ws.others.is_empty(),
        "connection should be closed: {:?}",
        ws.others
    );
    assert_eq!(
        ws.closed.clone().flatten().map(|c| c.0),
        Some(1009),
        "close 1009"
    );
    // A message just under the limit is fine.
    let mut c = gate.client();
    let fits = json!({"path": "/fits.txt", "content": "y".repeat(60000)});
    assert_eq!(c.ok("write", fits), json!({}));
    c.close();
    message
}

fn every_message_type(mode: &str) -> WsGate {
    let gate = WsGate::start(Some(&policy(mode)), fixture);
    let mut c = gate.client();
    listing_and_reading(&mut c);
    writing(&mut c);
    binary(&mut c, mode);
    mutating(&mut c);
    errors(&mut c);
    pipelined(&mut c);
    assert!(
        c.events.iter().all(|e| e["type"] == "change"),
        "{:?}",
        c.events
    );
    c.close();
    let limit_message = oversized(&gate);
    assert!(
        limit_message.contains("exceeds the limit"),
        "{limit_message}"
    );
    assert_eq!(
        std::fs::read(gate.root.join("out.bin")).expect("out.bin"),
        blob()
    );
    gate
}

#[test]
fn every_message_type_with_base64_binary() {
    let gate = every_message_type("base64");
    // What the client saw is what is on disk.
    assert_eq!(
        std::fs::read_to_string(gate.root.join("new/dir/file.txt")).expect("deep"),
        "deep"
    );
    assert!(gate.root.join("made").is_dir());
    assert!(!gate.root.join("a").exists());
    assert!(!gate.root.join("notes.txt").exists());
    assert!(
        !gate.root.join("big.txt").exists(),
        "the oversized write must not happen"
    );
    assert_eq!(
        std::fs::read(gate.root.join("fits.txt"))
            .expect("fits")
            .len(),
        60000
    );
    assert_eq!(
        std::fs::read_to_string(gate.root.join(".env")).expect(".env"),
        "SECRET=1\n"
    );
    // Every request is audited under its connection's session, with the ws transport.
    let records = gate.audit_requests();
    assert!(records.len() > 50, "{} records", records.len());
    for r in &records {
        assert_eq!(r["transport"], "ws", "{r}");
        assert!(
            r["session"].as_str().is_some_and(|s| s.starts_with("ws-")),
            "{r}"
        );
        assert!(
            r["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.1:")),
            "{r}"
        );
    }
    assert!(
        records
            .iter()
            .any(|r| r["path"] == ".env" && r["decision"] == "deny"),
        "the refused .env read is audited"
    );
}

#[test]
fn binary_reads_are_refused_under_the_deny_mode() {
    every_message_type("deny");
}

/// A rename of a symbolic link moves the link (never what it leads to), replacing a link
/// at the destination, whose target is recorded as `args.oldTarget`; one that would make
/// the link lead out of the workspace is refused (`workspace-link-target`), unchanged.
#[test]
fn rename_of_a_symlink_replaces_a_link_and_one_leading_out_is_refused() {
    let gate = WsGate::start(Some(&policy("base64")), |root| {
        fixture(root);
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, root.join(at)).expect("symlink");
        };
        link("hello.txt", "link.txt");
        link("sub/inner.txt", "old.txt");
        link("../hello.txt", "sub/up");
    });
    let mut c = gate.client();
    let read_link = |rel: &str| std::fs::read_link(gate.root.join(rel)).ok();
    let mv = json!({"oldPath": "/link.txt", "newPath": "/old.txt"});
    assert_eq!(c.ok("rename", mv), json!({}));
    assert_eq!(read_link("old.txt"), Some("hello.txt".into()));
    assert_eq!(read_link("link.txt"), None);
    assert!(std::fs::symlink_metadata(gate.root.join("link.txt")).is_err());
    let inner = std::fs::read_to_string(gate.root.join("sub/inner.txt"));
    assert_eq!(inner.ok().as_deref(), Some("inner"));

    let mv = json!({"oldPath": "/sub/up", "newPath": "/up"});
    let err = c.fail("rename", REFUSED, mv);
    assert_eq!(err["rule"], "workspace-link-target", "{err}");
    assert_eq!(read_link("sub/up"), Some("../hello.txt".into()));
    assert!(std::fs::symlink_metadata(gate.root.join("up")).is_err());

    let renames: Vec<Value> = gate
        .audit_requests()
        .into_iter()
        .filter(|r| r["op"] == "rename")
        .collect();
    assert_eq!(renames.len(), 2, "{renames:#?}");
    assert_eq!(renames[0]["decision"], "allow", "{}", renames[0]);
    assert_eq!(renames[0]["args"]["target"], "hello.txt", "{}", renames[0]);
    assert_eq!(
        renames[0]["args"]["oldTarget"], "sub/inner.txt",
        "{}",
        renames[0]
    );
    assert_eq!(renames[1]["decision"], "deny", "{}", renames[1]);
    assert_eq!(
        renames[1]["rule"], "workspace-link-target",
        "{}",
        renames[1]
    );
}

/// The audit records of one session, in order.
fn session_records(gate: &WsGate, session: &str) -> Vec<Value> {
    gate.audit_requests()
        .into_iter()
        .filter(|r| r["session"] == session)
        .collect()
}

#[test]
fn every_odd_message_has_exactly_one_record() {
    let gate = WsGate::start(Some(&policy("base64")), fixture);
    let mut c = gate.client();
    // One plain request first, to learn the session.
    c.ok("stat", json!({"path": "/hello.txt", "requestId": "first"}));
    let session = gate.audit_requests()[0]["session"]
        .as_str()
        .expect("session")
        .to_string();
    for (bytes, binary, name, code) in odd_messages() {
        one_record(&gate, &session, &mut c, &bytes, binary, name, code);
    }
    c.close();
    // An oversized message: one record, and the connection closes.
    let mut big = gate.client();
    big.send_text(&"x".repeat(70000));
    assert_eq!(big.next_other()["errorInfo"]["code"], LIMIT);
    big.settle(std::time::Duration::from_secs(5));
    let all = gate.audit_requests();
    let over: Vec<_> = all
        .iter()
        .filter(|r| r["op"] == "invalid-message" && r["outcome"] == "-32004")
        .collect();
    assert_eq!(over.len(), 1, "{over:?}");
    assert_eq!(over[0]["outcome"], LIMIT.to_string());
    assert_eq!(
        all.iter()
            .filter(|r| r["session"] == over[0]["session"])
            .count(),
        1
    );
}

/// (what to send, as a binary frame?, the name it is recorded under, the code it is
/// answered with)
type Odd = (Vec<u8>, bool, &'static str, Option<i64>);

fn odd_messages() -> Vec<Odd> {
    vec![
        (
            b"not json".to_vec(),
            false,
            "invalid-message",
            Some(PARSE_ERROR),
        ),
        (
            b"[1,2]".to_vec(),
            false,
            "invalid-message",
            Some(INVALID_REQUEST),
        ),
        (
            b"{}".to_vec(),
            false,
            "invalid-message",
            Some(INVALID_REQUEST),
        ),
        (
            br#"{"channel":"files"}"#.to_vec(),
            false,
            "invalid-message",
            Some(INVALID_REQUEST),
        ),
        (
            br#"{"channel":"tty","type":"read","requestId":1}"#.to_vec(),
            false,
            "read",
            Some(INVALID_REQUEST),
        ),
        (
            br#"{"channel":"files","type":"read","requestId":2}"#.to_vec(),
            false,
            "read",
            Some(INVALID_PARAMS),
        ),
        (
            br#"{"channel":"files","type":"read","path":"/hello.txt"}"#.to_vec(),
            false,
            "read",
            Some(INVALID_PARAMS),
        ),
        (
            br#"{"channel":"files","type":"write","requestId":3,"path":"/w","content":5}"#.to_vec(),
            false,
            "write",
            Some(INVALID_PARAMS),
        ),
        (
            br#"{"channel":"files","type":"frob","requestId":4}"#.to_vec(),
            false,
            "frob",
            Some(METHOD_NOT_FOUND),
        ),
        (
            br#"{"channel":"files","type":"list","requestId":"b"}"#.to_vec(),
            true,
            "invalid-message",
            Some(INVALID_REQUEST),
        ),
        (
            br#"{"channel":"files","type":"subscribe","path":"/sub","requestId":5}"#.to_vec(),
            false,
            "subscribe",
            None,
        ),
        (
            br#"{"channel":"files","type":"subscribe","path":"/../x","requestId":6}"#.to_vec(),
            false,
            "subscribe",
            Some(INVALID_PARAMS),
        ),
        (
            br#"{"channel":"files","type":"subscribe"}"#.to_vec(),
            false,
            "subscribe",
            None,
        ),
        (
            br#"{"channel":"files","type":"unsubscribe","requestId":7}"#.to_vec(),
            false,
            "unsubscribe",
            None,
        ),
        (
            br#"{"channel":"files","type":"unsubscribe"}"#.to_vec(),
            false,
            "unsubscribe",
            None,
        ),
    ]
}

/// Sends one odd message and checks it got exactly one record, named `name`, with the
/// outcome its answer carries.
fn one_record(
    gate: &WsGate,
    session: &str,
    c: &mut WsClient,
    bytes: &[u8],
    binary: bool,
    name: &str,
    code: Option<i64>,
) {
    let before = session_records(gate, session).len();
    if binary {
        c.send_binary(bytes);
    } else {
        c.send_text(std::str::from_utf8(bytes).expect("utf-8"));
    }
    let answered = serde_json::from_slice::<Value>(bytes).ok().is_none_or(|v| {
        v.get("requestId").is_some() || v["type"] != "subscribe" && v["type"] != "unsubscribe"
    });
    if answered {
        let got = match serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|v| v.get("requestId").cloned())
        {
            Some(id) if !binary => c.answer(&id),
            _ => c.next_other(),
        };
        assert_eq!(got["errorInfo"]["code"].as_i64(), code, "{got}");
    } else {
        // No answer: a plain request after it proves it was taken.
        c.ok("stat", json!({"path": "/hello.txt"}));
    }
    let after = session_records(gate, session);
    let extra = usize::from(!answered);
    assert_eq!(
        after.len(),
        before + 1 + extra,
        "one record for {:?}: {after:?}",
        String::from_utf8_lossy(bytes)
    );
    let r = &after[before];
    assert_eq!(r["op"], name, "{r}");
    let want = code.map_or("ok".to_string(), |c| c.to_string());
    assert_eq!(r["outcome"], want, "{r}");
}
