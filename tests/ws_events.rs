//! Pushed change events: through the gateway and from outside it, debounced, ignored
//! directories silent, hidden paths never reported, per-connection subscriptions; and
//! a client that does not read its events gets one `overflow`, not unbounded memory.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::ws_harness::{WsClient, WsGate, is_change};

const IGNORED: [&str; 6] = [
    "node_modules",
    ".git",
    ".next",
    "dist",
    "build",
    "__pycache__",
];

fn put(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("parents");
    std::fs::write(p, content).expect("write");
}

fn through_the_gateway(a: &mut WsClient, b: &mut WsClient) {
    a.ok("write", json!({"path": "/src/app.ts", "content": "v1"}));
    for c in [&mut *a, &mut *b] {
        // b, another connection, sees a's changes too.
        c.wait_change("create", "/src/app.ts", Some("file"));
    }
    a.ok(
        "write",
        json!({"path": "/src/existing.txt", "content": "replaced atomically"}),
    );
    a.wait_change("modify", "/src/existing.txt", Some("file"));
    a.ok("mkdir", json!({"path": "/src/lib"}));
    a.wait_change("create", "/src/lib", Some("directory"));
    a.ok(
        "rename",
        json!({"oldPath": "/src/app.ts", "newPath": "/src/lib/main.ts"}),
    );
    a.wait_change("delete", "/src/app.ts", Some("file"));
    a.wait_change("create", "/src/lib/main.ts", Some("file"));
    a.ok("delete", json!({"path": "/src/lib", "recursive": true}));
    a.wait_change("delete", "/src/lib", Some("directory"));
    a.wait_change("delete", "/src/lib/main.ts", Some("file"));
    // An atomic replace is one event, not a create/delete of a temporary file.
    let paths = a.change_paths();
    assert!(
        !paths.iter().any(|p| p.contains(".fsgate-tmp")),
        "{paths:?}"
    );
    let existing: Vec<_> = a
        .events
        .iter()
        .filter(|e| e["path"] == "/src/existing.txt")
        .map(|e| e["event"].clone())
        .collect();
    assert_eq!(existing, [json!("modify")]);
}

fn from_outside(a: &mut WsClient, root: &Path) {
    put(root, "src/outside.txt", "one");
    a.wait_change("create", "/src/outside.txt", Some("file"));
    put(root, "src/outside.txt", "one two");
    a.wait_change("modify", "/src/outside.txt", Some("file"));
    std::fs::remove_file(root.join("src/outside.txt")).expect("rm");
    a.wait_change("delete", "/src/outside.txt", Some("file"));
    // A new tree made at once: the directories are watched as they appear, and what
    // was created inside before that is reported too.
    std::fs::create_dir_all(root.join("src/new/deeper")).expect("mkdir");
    put(root, "src/new/deeper/leaf.txt", "leaf");
    a.wait_change("create", "/src/new", Some("directory"));
    a.wait_change("create", "/src/new/deeper", Some("directory"));
    a.wait_change("create", "/src/new/deeper/leaf.txt", Some("file"));
    // ... and a file written later in it is seen through its new watch.
    put(root, "src/new/deeper/later.txt", "later");
    a.wait_change("create", "/src/new/deeper/later.txt", Some("file"));
    // A directory moved within the workspace is re-watched under its new name.
    std::fs::rename(root.join("src/new"), root.join("src/moved")).expect("mv");
    a.wait_change("delete", "/src/new", Some("directory"));
    a.wait_change("create", "/src/moved", Some("directory"));
    put(root, "src/moved/deeper/after-move.txt", "m");
    a.wait_change("create", "/src/moved/deeper/after-move.txt", Some("file"));
    let paths = a.change_paths();
    assert!(
        !paths.contains(&"/src/new/deeper/after-move.txt".to_string()),
        "{paths:?}"
    );
}

fn debounced(a: &mut WsClient, root: &Path) -> usize {
    // A burst of writes to one file is one create (plus at most one modify if the
    // burst outlasts the maximum delay), not twenty events.
    for i in 0..20 {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("src/burst.log"))
            .expect("open");
        writeln!(f, "line {i}").expect("append");
    }
    a.wait_change("create", "/src/burst.log", Some("file"));
    a.settle(Duration::from_millis(500));
    let burst: Vec<_> = a
        .events
        .iter()
        .filter(|e| e["path"] == "/src/burst.log")
        .map(|e| e["event"].clone())
        .collect();
    assert!(burst[0] == "create" && burst.len() <= 2, "{burst:?}");
    burst.len()
}

fn ignored_and_hidden(a: &mut WsClient, root: &Path) {
    for d in IGNORED {
        put(root, &format!("{d}/pkg/index.js"), "x");
        put(root, &format!("src/{d}/nested.js"), "x");
    }
    put(root, ".env", "SECRET=1");
    put(root, "src/.env.local", "SECRET=2");
    put(root, ".ssh/id_rsa", "KEY");
    put(root, "config/credentials.json", "{}");
    a.fail(
        "write",
        -32003,
        json!({"path": "/.env", "content": "through the gateway"}),
    );
    // A sentinel written last: once it is reported, the others would have been too.
    put(root, "src/sentinel-1.txt", "x");
    a.wait_change("create", "/src/sentinel-1.txt", None);
    a.settle(Duration::from_millis(300));
    let seen = a.change_paths();
    for p in &seen {
        let parts: Vec<&str> = p.trim_matches('/').split('/').collect();
        assert!(
            !parts.iter().any(|x| IGNORED.contains(x)),
            "ignored path reported: {p}"
        );
        assert!(
            !p.contains(".env") && !p.contains(".ssh") && !p.contains("credentials"),
            "hidden path reported: {p}"
        );
    }
    assert!(
        seen.contains(&"/config".to_string()),
        "the visible parent of a hidden file is reported: {seen:?}"
    );
}

fn subscriptions(a: &mut WsClient, b: &mut WsClient, c: &mut WsClient, root: &Path) {
    // b subscribed to /src with ?subscribe=; c to /docs with a message.
    put(root, "docs/readme.md", "# docs");
    put(root, "src/sentinel-2.txt", "x");
    c.wait_change("create", "/docs/readme.md", None);
    b.wait_change("create", "/src/sentinel-2.txt", None);
    a.wait_change("create", "/docs/readme.md", None);
    a.wait_change("create", "/src/sentinel-2.txt", None);
    b.settle(Duration::from_millis(300));
    c.settle(Duration::from_millis(10));
    let (pb, pc) = (b.change_paths(), c.change_paths());
    assert!(pb.iter().all(|p| p.starts_with("/src/")), "{pb:?}");
    assert!(
        pc.iter().all(|p| p == "/docs" || p.starts_with("/docs/")),
        "{pc:?}"
    );
    // After unsubscribing, c gets nothing more.
    assert_eq!(c.ok("unsubscribe", json!({})), json!({}));
    let count = c.events.len();
    put(root, "docs/again.md", "x");
    a.wait_change("create", "/docs/again.md", None);
    c.settle(Duration::from_millis(300));
    assert_eq!(c.events.len(), count, "{:?}", &c.events[count..]);
    // A subscription path that escapes the workspace is refused.
    c.fail("subscribe", -32602, json!({"path": "/../etc"}));
}

#[test]
fn change_events_follow_the_policy_and_the_subscription() {
    let gate = WsGate::start(None, |root| {
        std::fs::create_dir_all(root.join("src")).expect("src");
        std::fs::create_dir_all(root.join("docs")).expect("docs");
        std::fs::write(root.join("src/existing.txt"), "old").expect("existing");
    });
    let root = gate.root.clone();
    let mut a = gate.client();
    let mut b = WsClient::open_at(&gate.addr, &gate.token, "?subscribe=%2Fsrc");
    let mut c = gate.client();
    assert_eq!(
        c.ok("subscribe", json!({"path": "/docs"})),
        json!({"path": "/docs"})
    );
    through_the_gateway(&mut a, &mut b);
    from_outside(&mut a, &root);
    let burst = debounced(&mut a, &root);
    assert!((1..=2).contains(&burst), "{burst}");
    ignored_and_hidden(&mut a, &root);
    subscriptions(&mut a, &mut b, &mut c, &root);
    assert!(a.events.len() > 15, "{} events", a.events.len());
    for x in [a, b, c] {
        x.close();
    }
    // The gateway's writes happened; the refused one did not.
    assert_eq!(
        std::fs::read_to_string(root.join("src/existing.txt")).expect("existing"),
        "replaced atomically"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".env")).expect(".env"),
        "SECRET=1"
    );
}

#[test]
fn a_client_that_does_not_read_its_events_gets_one_overflow() {
    // Deep paths make big events (~3 KB each), so that the socket buffers fill quickly.
    let deep: String = (0..12)
        .map(|i| format!("/{i:02}{}", "d".repeat(240)))
        .collect();
    let dir = format!("many{deep}");
    // `slow` reads nothing while the burst lasts, which under load can outlast the
    // default write stall limit (30 s, after which it would be closed, not overflowed):
    // this test is about the overflow, so the limit is set far beyond the burst.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let default = std::fs::read_to_string(repo.join("policies/default.toml")).expect("policy");
    let policy = format!("{default}\n[ws]\nwrite_stall_ms = 600000\n");
    let gate = WsGate::start(Some(&policy), |root| {
        std::fs::create_dir_all(root.join(&dir)).expect("many");
    });
    let mut slow = gate.client();
    let mut fast = gate.client();
    // Make sure both are served before the burst.
    slow.ok("stat", json!({"path": "/many"}));
    fast.ok("stat", json!({"path": "/many"}));
    // 4000 files, each a change event; `slow` reads nothing meanwhile. The events fill
    // its socket buffers, then its mailbox, which is discarded for one overflow.
    let n = 4000;
    for i in 0..n {
        std::fs::write(gate.root.join(format!("{dir}/f{i:05}.txt")), "x").expect("write");
    }
    std::fs::write(gate.root.join("sentinel.txt"), "x").expect("sentinel");
    // The reading client sees the burst through (or is told it lost some).
    fast.wait_event_for("the sentinel", Duration::from_secs(120), |e| {
        is_change(e, "create", "/sentinel.txt", None)
    });
    // `slow` now reads: first what its socket buffers hold (a few MB of events, slow
    // to parse under load), then the overflow. Waiting a fixed time for it is a race
    // with the machine's load; waiting for the event is not.
    slow.wait_event_for("overflow", Duration::from_secs(120), |e| e["type"] == "overflow");
    slow.settle(Duration::from_secs(1));
    let overflows: Vec<_> = slow
        .events
        .iter()
        .filter(|e| e["type"] == "overflow")
        .collect();
    let changes = slow.events.len() - overflows.len();
    assert!(!overflows.is_empty(), "no overflow after {changes} changes");
    assert!(
        overflows.iter().all(|o| o["message"].is_string()),
        "{overflows:?}"
    );
    assert!(changes < n, "{changes} changes and an overflow");
    // The connection still works.
    slow.ok("stat", json!({"path": "/many"}));
}

/// A size-conditioned list deny hides large files from events as from listings: the
/// file's name never reaches the client.
#[test]
fn a_file_hidden_by_its_size_is_not_named_in_an_event() {
    let policy = r#"version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
[[rule]]
id = "hide-big"
effect = "deny"
ops = ["list"]
paths = ["**"]
min_size = 101
"#;
    let gate = WsGate::start(Some(policy), |root| {
        std::fs::create_dir_all(root.join("src")).expect("src");
    });
    let root = gate.root.clone();
    let mut a = gate.client();
    put(&root, "src/big-blob.bin", &"x".repeat(4096));
    put(&root, "src/sentinel.txt", "x");
    a.wait_change("create", "/src/sentinel.txt", None);
    a.settle(Duration::from_millis(300));
    let seen = a.change_paths();
    assert!(!seen.iter().any(|p| p.contains("big-blob")), "{seen:?}");
}
