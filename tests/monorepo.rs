//! Issue 34, monorepos and huge directories: a directory too large for one answer is
//! listed in pages (`cursor` / `nextCursor`) on every door that lists; the WebSocket
//! watcher says at start which kernel limit it reached and what it does not watch.
//! (The monorepo's answers are checked by the benchmark driver's quick mode, in
//! `bench_driver`.)

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Gate, skip_or_fail};
use crate::mcp_harness::{McpGate, text_of};
use crate::ws_harness::WsGate;

/// More than a page (10,000) and more than the gateway reads whole (16,384): the
/// streamed path.
const WIDE: usize = 25_000;
/// The most entries one page may hold.
const PAGE: usize = 10_000;

fn wide_name(i: usize) -> String {
    format!("e-{i:06}")
}

/// `wide/` under `root`: WIDE files and three secrets the default policy hides.
fn make_wide(root: &Path) -> Vec<String> {
    let dir = root.join("wide");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for i in 0..WIDE {
        std::fs::File::create(dir.join(wide_name(i))).expect("create");
    }
    for secret in [".env", "id_rsa", "tls.pem"] {
        std::fs::write(dir.join(secret), "K=v\n").expect("write");
    }
    (0..WIDE).map(wide_name).collect()
}

/// Pages of names from `page(cursor)` (names, nextCursor) until none is left.
fn all_pages(mut page: impl FnMut(Option<&str>) -> (Vec<String>, Option<String>)) -> Vec<String> {
    let (mut all, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let (names, next) = page(cursor.as_deref());
        assert!(names.len() <= PAGE, "a page of {} entries", names.len());
        pages += 1;
        assert!(pages <= WIDE / PAGE + 2, "the pages never end");
        if let Some(c) = &next {
            assert_eq!(Some(c), names.last(), "the cursor is the last name shown");
        }
        all.extend(names);
        match next {
            Some(c) => cursor = Some(c),
            None => return all,
        }
    }
}

fn entry_names(v: &Value) -> Vec<String> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].as_str().expect("name").to_string())
        .collect()
}

fn next_cursor(v: &Value) -> Option<String> {
    let next = v["nextCursor"].as_str().map(str::to_string);
    assert_eq!(next.is_some(), v["truncated"] == true, "{}", v["truncated"]);
    next
}

#[test]
fn mcp_ls_and_list_directory_page_a_wide_directory() {
    let mut g = McpGate::start(None);
    let want = make_wide(&g.dirs.root);
    g.initialize("2025-06-18");
    let abs = g.dirs.abs("wide");
    let mut id = 10;
    let got = all_pages(|cursor| {
        id += 1;
        let mut args = json!({ "path": abs });
        if let Some(c) = cursor {
            args["cursor"] = c.into();
        }
        let r = g.tool(id, "ls", args);
        assert_ne!(r["isError"], true, "{r}");
        let s = &r["structuredContent"];
        (entry_names(s), next_cursor(s))
    });
    assert_eq!(got, want, "every name once, in order, no secret");
    // The reference server's text shape: its last line says how to go on.
    let got = all_pages(|cursor| {
        id += 1;
        let mut args = json!({ "path": abs });
        if let Some(c) = cursor {
            args["cursor"] = c.into();
        }
        let text = text_of(&g.tool(id, "list_directory", args));
        let mut names = Vec::new();
        let mut next = None;
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("[FILE] ") {
                names.push(name.to_string());
            } else {
                let quoted = line.split("\"cursor\": ").nth(1).expect("a cursor line");
                let quoted = quoted
                    .split(" for the next page")
                    .next()
                    .unwrap_or_default();
                next = Some(serde_json::from_str::<String>(quoted).expect("a JSON string"));
            }
        }
        (names, next)
    });
    assert_eq!(got, want);
}

#[test]
fn acp_ls_pages_a_wide_directory() {
    let g = Gate::start();
    let want = make_wide(&g.path(""));
    let abs = g.abs("wide");
    let got = all_pages(|cursor| {
        let mut params = json!({"sessionId": "s", "path": abs});
        if let Some(c) = cursor {
            params["cursor"] = c.into();
        }
        let r = g.ok("_fsgate/ls", params);
        (entry_names(&r), next_cursor(&r))
    });
    assert_eq!(got, want);
    // A cursor is a name: one with a slash is refused as invalid.
    let bad = g.call(
        "_fsgate/ls",
        json!({"sessionId": "s", "path": abs, "cursor": "a/b"}),
    );
    assert_eq!(bad.expect_err("refused").code, -32602);
}

#[test]
fn websocket_list_pages_a_wide_directory() {
    let gate = WsGate::start(None, |root| {
        make_wide(root);
    });
    let want: Vec<String> = (0..WIDE).map(wide_name).collect();
    let mut c = gate.client();
    let got = all_pages(|cursor| {
        let mut fields = json!({"path": "/wide"});
        if let Some(cur) = cursor {
            fields["cursor"] = cur.into();
        }
        let d = c.ok("list", fields);
        (entry_names(&d), next_cursor(&d))
    });
    assert_eq!(got, want);
}

/// `unshare` can give fsgate a user namespace whose inotify watch limit is `limit`.
fn limited(limit: u32) -> Option<Vec<String>> {
    let ok = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| {
        let script =
            format!("echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\"");
        ["unshare", "--user", "--map-root-user", "sh", "-c", &script]
            .map(str::to_string)
            .to_vec()
    })
}

/// With room for one watch (the root's) and 12 directories beneath it (one hidden by
/// the policy), the gateway says at start, on stderr and to each client, which limit it
/// reached, how many directories are not watched and the first of them, never naming
/// the hidden one; and the directory it does watch still reports its changes.
#[test]
fn the_watcher_names_the_inotify_limit_and_what_it_does_not_watch() {
    let Some(wrapper) = limited(1) else {
        skip_or_fail(
            "the_watcher_names_the_inotify_limit_and_what_it_does_not_watch",
            "no user namespaces (unshare --user) to lower the inotify watch limit in",
        );
        return;
    };
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let gate = WsGate::start_wrapped(&wrapper, None, |root| {
        for d in (0..11)
            .map(|i| format!("d{i:02}"))
            .chain(["a-secret".into()])
        {
            std::fs::create_dir_all(root.join(&d)).expect("mkdir");
            std::fs::write(root.join(&d).join("f.txt"), "x\n").expect("write");
        }
    });
    let mut c = gate.client();
    let u = c.wait_event("unwatched", |e| e["type"] == "unwatched");
    assert_eq!(u["limit"], "user.max_inotify_watches", "{u}");
    assert_eq!(u["limitValue"], 1, "{u}");
    assert_eq!(
        (&u["watched"], &u["unwatched"]),
        (&json!(1), &json!(12)),
        "{u}"
    );
    let paths: Vec<&str> = u["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let first: Vec<String> = (0..8).map(|i| format!("/d{i:02}")).collect();
    assert_eq!(
        paths, first,
        "the first eight, the hidden one not named: {u}"
    );
    let message = u["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("user.max_inotify_watches = 1"),
        "{message}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    assert!(
        gate.wait_stderr("directories are not watched", deadline)
            .is_some(),
        "{}",
        gate.stderr()
    );
    let log = gate.stderr();
    assert!(
        log.contains("user.max_inotify_watches = 1") && log.contains("/d00"),
        "{log}"
    );
    assert!(!log.contains("a-secret"), "{log}");
    // The root is watched: a file made there is reported.
    std::fs::write(gate.root.join("new.txt"), "x\n").expect("write");
    c.wait_change("create", "/new.txt", Some("file"));
}

/// Several workspaces under a watch limit that leaves directories of each unwatched:
/// a client that connects after both were said is told each workspace's notice, each
/// naming its workspace.
#[test]
fn a_new_client_is_told_what_every_workspace_leaves_unwatched() {
    let test = "a_new_client_is_told_what_every_workspace_leaves_unwatched";
    let Some(wrapper) = limited(1) else {
        skip_or_fail(
            test,
            "no user namespaces (unshare --user) to lower the inotify watch limit in",
        );
        return;
    };
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let (_dir, second) = crate::common::canonical_tempdir("fsgate-second-");
    let dirs = |root: &Path| {
        for i in 0..4 {
            std::fs::create_dir_all(root.join(format!("d{i}"))).expect("mkdir");
        }
    };
    dirs(&second);
    let gate = WsGate::start_several(&wrapper, None, &[&second], dirs);
    // One watch for both: each workspace leaves directories unwatched and says so.
    let said = "directories are not watched";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while gate.stderr().matches(said).count() < 2 {
        assert!(std::time::Instant::now() < deadline, "{}", gate.stderr());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut c = gate.client();
    for root in [&gate.root, &second] {
        let name = root
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let u = c.wait_event(&name, |e| {
            e["type"] == "unwatched" && e["workspace"] == name
        });
        assert!(u["unwatched"].as_u64().unwrap_or(0) >= 4, "{u}");
        let paths = u["paths"].to_string();
        assert!(paths.contains(&format!("/{name}/d")), "{u}");
    }
}
