//! MCP roots (issue 14, point 10): a client's roots narrow what fsgate serves, on both
//! paths into the server, and never widen it; the reference server next to it, for the
//! same calls. The differences kept on purpose (roots outside the workspace, calls
//! before the roots arrive) are asserted on both sides and documented in
//! docs/mcp-differences.md.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_harness::{Dirs, McpGate, TIMEOUT, modern_meta, text_of};
use crate::mcp_reference::reference_js;

fn uri(path: &str) -> String {
    format!("file://{path}")
}

fn is_error(r: &Value) -> bool {
    r["isError"] == json!(true) || r.get("code").is_some()
}

/// A tools/call answer (result or error object) on one server.
fn call(gate: &mut McpGate, id: u64, tool: &str, args: Value) -> Value {
    gate.request(id, "tools/call", json!({"name": tool, "arguments": args}));
    let r = gate.response(id);
    r.get("result")
        .or_else(|| r.get("error"))
        .cloned()
        .unwrap_or(r)
}

/// The same, through the SDK's path: a `_meta` member keeps it off the direct path.
fn call_sdk(gate: &mut McpGate, id: u64, tool: &str, args: Value) -> Value {
    let params = json!({"name": tool, "arguments": args, "_meta": {"progressToken": id}});
    gate.request(id, "tools/call", params);
    let r = gate.response(id);
    r.get("result")
        .or_else(|| r.get("error"))
        .cloned()
        .unwrap_or(r)
}

fn allowed(gate: &mut McpGate, id: u64) -> String {
    text_of(&call(gate, id, "list_allowed_directories", json!({})))
}

/// The reference applies roots asynchronously: wait until its directory list says `want`.
fn wait_for_allowed(gate: &mut McpGate, mut id: u64, want: &str) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        id += 1;
        let got = allowed(gate, id);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "allowed directories stayed {got:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn seed(d: &Dirs) {
    d.put("src/a.txt", "in src\n");
    d.put("docs/b.txt", "in docs\n");
    d.put("top.txt", "at the top\n");
    std::fs::write(d.outside.join("o.txt"), "outside\n").expect("outside file");
}

/// fsgate and the reference, both initialized with the `roots` capability.
fn twins(test: &str) -> Option<(McpGate, McpGate)> {
    let js = match reference_js() {
        Ok(js) => js,
        Err(why) => {
            crate::common::skip_or_fail(test, &why);
            return None;
        }
    };
    let mut fsgate = McpGate::start(None);
    let dirs = Dirs::new();
    let mut cmd = std::process::Command::new("node");
    cmd.arg(js).arg(&dirs.root).current_dir(&dirs.state);
    let mut reference = McpGate::spawn(cmd, dirs);
    for g in [&mut fsgate, &mut reference] {
        seed(&g.dirs);
        g.initialize_with("2025-06-18", json!({"roots": {"listChanged": true}}));
    }
    Some((fsgate, reference))
}

/// Roots inside the workspace narrow both servers alike; a root outside it widens the
/// reference and is ignored by fsgate; a change of roots is followed by both.
#[test]
fn roots_narrow_and_never_widen() {
    let Some((mut f, mut r)) = twins("roots_narrow_and_never_widen") else {
        return;
    };
    for g in [&mut f, &mut r] {
        let roots = [
            uri(&g.dirs.abs("src")),
            uri(&g.dirs.outside.to_string_lossy()),
        ];
        g.answer_roots(&roots);
    }
    let (froot, rroot) = (
        f.dirs.root.display().to_string(),
        r.dirs.root.display().to_string(),
    );
    let (fout, rout) = (
        f.dirs.outside.display().to_string(),
        r.dirs.outside.display().to_string(),
    );
    wait_for_allowed(
        &mut r,
        100,
        &format!("Allowed directories:\n{rroot}/src\n{rout}"),
    );
    assert_eq!(
        allowed(&mut f, 1),
        format!("Allowed directories:\n{froot}/src")
    );

    // Inside a root: served by both; elsewhere in the workspace: refused by both.
    for (g, id) in [(&mut f, 2), (&mut r, 2)] {
        let ok = call(
            g,
            id,
            "read_text_file",
            json!({"path": g.dirs.abs("src/a.txt")}),
        );
        assert_eq!(text_of(&ok), "in src\n", "{ok}");
        let no = call(
            g,
            id + 1,
            "read_text_file",
            json!({"path": g.dirs.abs("top.txt")}),
        );
        assert!(is_error(&no), "outside the roots yet served: {no}");
        let no = call(g, id + 2, "list_directory", json!({"path": g.dirs.abs("")}));
        assert!(
            is_error(&no),
            "the workspace root is outside the roots: {no}"
        );
    }
    // The root outside the workspace: the reference serves it, fsgate does not.
    let served = call(
        &mut r,
        10,
        "read_text_file",
        json!({"path": format!("{rout}/o.txt")}),
    );
    assert_eq!(text_of(&served), "outside\n", "{served}");
    let refused = call(
        &mut f,
        10,
        "read_text_file",
        json!({"path": format!("{fout}/o.txt")}),
    );
    assert!(is_error(&refused), "{refused}");

    // The client's roots change: both ask again and follow.
    for g in [&mut f, &mut r] {
        g.notify("notifications/roots/list_changed");
        let roots = [uri(&g.dirs.abs("docs"))];
        g.answer_roots(&roots);
    }
    wait_for_allowed(&mut r, 200, &format!("Allowed directories:\n{rroot}/docs"));
    assert_eq!(
        allowed(&mut f, 20),
        format!("Allowed directories:\n{froot}/docs")
    );
    for (g, id) in [(&mut f, 30), (&mut r, 30)] {
        let ok = call(
            g,
            id,
            "read_text_file",
            json!({"path": g.dirs.abs("docs/b.txt")}),
        );
        assert_eq!(text_of(&ok), "in docs\n", "{ok}");
        let no = call(
            g,
            id + 1,
            "read_text_file",
            json!({"path": g.dirs.abs("src/a.txt")}),
        );
        assert!(is_error(&no), "the old root still served: {no}");
    }
}

/// Both paths into fsgate (the direct one and the SDK's) hold the narrowing, for every
/// kind of path a tool takes; refusals name the rule and are recorded, and each change
/// of roots has its `roots` record; the log still verifies.
#[test]
fn fsgate_roots_hold_on_both_paths_and_are_recorded() {
    let mut g = McpGate::start(None);
    seed(&g.dirs);
    g.dirs.put("src/sub/c.txt", "c\n");
    std::os::unix::fs::symlink("../docs", g.dirs.root.join("src/link")).expect("symlink");
    g.initialize_with("2025-06-18", json!({"roots": {}}));
    let roots = [
        uri(&g.dirs.abs("src")),
        uri(&g.dirs.abs("missing")),
        uri(&g.dirs.abs("top.txt")),
        uri(&g.dirs.outside.to_string_lossy()),
        "https://example.com/x".to_string(),
    ];
    g.answer_roots(&roots);
    let base = g.dirs.root.clone();
    let abs = |p: &str| base.join(p).to_string_lossy().into_owned();
    let refused: Vec<(&str, Value)> = vec![
        ("read_text_file", json!({"path": abs("top.txt")})),
        ("read_text_file", json!({"path": "docs/b.txt"})),
        ("read_text_file", json!({"path": abs("src/link/b.txt")})),
        (
            "write_file",
            json!({"path": abs("docs/new.txt"), "content": "x"}),
        ),
        (
            "move_file",
            json!({"source": abs("src/a.txt"), "destination": abs("a.txt")}),
        ),
        ("search_files", json!({"path": abs(""), "pattern": "*.txt"})),
        ("directory_tree", json!({"path": abs("")})),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("grep", json!({"pattern": "in"})),
        ("get_file_info", json!({"path": abs("docs")})),
    ];
    let mut id = 100;
    for (tool, args) in &refused {
        for sdk in [false, true] {
            id += 1;
            let r = if sdk {
                call_sdk(&mut g, id, tool, args.clone())
            } else {
                call(&mut g, id, tool, args.clone())
            };
            assert_eq!(
                r["isError"],
                json!(true),
                "{tool} {args} (sdk path: {sdk}): {r}"
            );
            assert!(text_of(&r).contains("client-roots"), "{tool}: {r}");
        }
    }
    for sdk in [false, true] {
        let args = json!({"path": abs("src/sub/c.txt")});
        let r = if sdk {
            call_sdk(&mut g, 200, "read_text_file", args)
        } else {
            call(&mut g, 201, "read_text_file", args)
        };
        assert_eq!(text_of(&r), "c\n", "{r}");
    }
    let r = call(&mut g, 202, "glob", json!({"pattern": "src/**/*.txt"}));
    assert_ne!(r["isError"], json!(true), "{r}");
    assert_eq!(
        r["structuredContent"]["matches"],
        json!([abs("src/a.txt"), abs("src/sub/c.txt")]),
        "a glob inside the root, not following the link out of it: {r}"
    );
    assert!(!g.dirs.root.join("a.txt").exists() && g.dirs.root.join("src/a.txt").exists());

    let recs = g.dirs.audit_records();
    let roots: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "roots").collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
    let d = &roots[0]["details"];
    assert_eq!(d["accepted"], json!([abs("src")]), "{d}");
    assert_eq!(d["scope"], json!("roots"));
    assert_eq!(d["ignored"].as_array().map(Vec::len), Some(4), "{d}");
    assert_eq!(roots[0]["transport"], json!("mcp"));
    let denied = recs
        .iter()
        .filter(|r| {
            r["kind"] == "request" && r["rule"] == "client-roots" && r["decision"] == "deny"
        })
        .count();
    assert!(denied >= refused.len() * 2, "{denied} refusals recorded");
    assert!(g.finish().success());
    let log = g.dirs.audit_log();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["audit", "verify"])
        .arg(&log)
        .output()
        .expect("fsgate audit verify");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The format's own verifier, written from audit/FORMAT.md, agrees.
    let py = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/audit/verify.py"))
        .arg(&log)
        .output()
        .expect("python3 audit/verify.py");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stdout)
    );
}

/// A call sent before the client answered roots/list waits for the answer on fsgate
/// (the reference serves it with its command-line directories meanwhile).
#[test]
fn fsgate_calls_wait_for_the_roots_the_client_was_asked_for() {
    let mut g = McpGate::start(None);
    seed(&g.dirs);
    g.initialize_with("2025-06-18", json!({"roots": {"listChanged": true}}));
    g.request(
        1,
        "tools/call",
        json!({"name": "read_text_file", "arguments": {"path": g.dirs.abs("top.txt")}}),
    );
    let roots = [uri(&g.dirs.abs("src"))];
    g.answer_roots(&roots);
    let r = g.response(1);
    assert_eq!(
        r["result"]["isError"],
        json!(true),
        "served before the roots: {r}"
    );
}

/// No usable roots (all outside, or none), no capability, or stateless (2026-07-28)
/// requests: the whole workspace.
#[test]
fn without_usable_roots_the_whole_workspace() {
    let mut g = McpGate::start(None);
    seed(&g.dirs);
    g.initialize_with("2025-06-18", json!({"roots": {}}));
    g.answer_roots(&[uri(&g.dirs.outside.to_string_lossy())]);
    let text = allowed(&mut g, 1);
    assert_eq!(
        text,
        format!("Allowed directories:\n{}", g.dirs.root.display())
    );
    let top = json!({"path": g.dirs.abs("top.txt")});
    let r = call(&mut g, 2, "read_text_file", top.clone());
    assert_eq!(text_of(&r), "at the top\n", "{r}");
    // A root that holds the workspace narrows nothing.
    g.notify("notifications/roots/list_changed");
    g.answer_roots(&[uri("/")]);
    let r = call(&mut g, 3, "read_text_file", top);
    assert_eq!(text_of(&r), "at the top\n", "{r}");
    assert!(g.finish().success());

    let mut s = McpGate::start(None);
    seed(&s.dirs);
    let args = json!({"path": s.dirs.abs("top.txt")});
    let r = s.call(
        1,
        "tools/call",
        json!({"name": "read_text_file", "arguments": args, "_meta": modern_meta()}),
    );
    assert_eq!(text_of(&r), "at the top\n", "{r}");
    assert!(
        s.server_request("roots/list", Duration::from_millis(200))
            .is_none(),
        "a stateless client was asked for roots"
    );
}

/// The official MCP Python SDK 1.x as a client with roots (tests/peers/mcp/roots_v1.py):
/// its roots narrow the session, and a change it announces holds for the very next call.
#[test]
fn a_python_sdk_client_with_roots() {
    let py = std::env::var_os("FSGATE_MCP1_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/mcp1/bin/python"));
    if !py.exists() {
        let why = "no Python for it: set FSGATE_MCP1_PYTHON or run ./scripts/install-peers.sh";
        crate::common::skip_or_fail("a_python_sdk_client_with_roots", why);
        return;
    }
    let dirs = Dirs::new();
    seed(&dirs);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/mcp/roots_v1.py");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let out = std::process::Command::new(&py)
        .arg(script)
        .args(["--bin", env!("CARGO_BIN_EXE_fsgate")])
        .args([
            "--workspace",
            &s(&dirs.root),
            "--outside",
            &s(&dirs.outside),
        ])
        .args(["--state", &s(&dirs.state)])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run the Python driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(77) {
        crate::common::skip_or_fail("a_python_sdk_client_with_roots", stdout.trim());
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{err}");
    let last = stdout.lines().last().unwrap_or_default();
    let r: Value = serde_json::from_str(last).expect("summary");
    let root = dirs.root.display();
    assert_eq!(
        r["allowed"],
        format!("Allowed directories:\n{root}/src"),
        "{r}"
    );
    assert_eq!(
        r["inRoot"],
        json!({"error": false, "text": "in src\n"}),
        "{r}"
    );
    assert_eq!(r["outsideRoot"]["error"], json!(true), "{r}");
    assert_eq!(
        r["allowedAfter"],
        format!("Allowed directories:\n{root}/docs"),
        "{r}"
    );
    assert_eq!(
        r["docs"],
        json!({"error": false, "text": "in docs\n"}),
        "{r}"
    );
    assert_eq!(r["srcAfter"]["error"], json!(true), "{r}");
}

/// A client's roots make a `roots` record of at most about 24 KiB however many and
/// however long they are (audit/FORMAT.md): 256 accepted roots whose paths are each
/// about 1,000 bytes, and 300 ignored ones each about 200 bytes of control characters,
/// are recorded in part, with the whole counts.
#[test]
fn a_roots_record_is_bounded_however_many_and_long_the_roots() {
    let mut g = McpGate::start(None);
    let mut deep = String::new();
    for i in 0..4 {
        deep.push_str(&format!("{}{i}/", "d".repeat(240)));
    }
    let mut roots = Vec::new();
    for i in 0..256 {
        let rel = format!("{deep}leaf{i:03}");
        std::fs::create_dir_all(g.dirs.root.join(&rel)).expect("mkdir");
        roots.push(uri(&g.dirs.abs(&rel)));
    }
    let control: String = "\u{1}".repeat(200);
    roots.extend((0..300).map(|i| format!("file:///nowhere/{i}{control}")));
    g.initialize_with("2025-06-18", json!({"roots": {}}));
    g.answer_roots(&roots);
    let r = call(&mut g, 2, "list_allowed_directories", json!({}));
    assert_ne!(r["isError"], json!(true), "{r}");
    assert!(g.finish().success());
    let log = std::fs::read_to_string(g.dirs.audit_log()).expect("log");
    let line = log
        .lines()
        .find(|l| l.contains("\"kind\":\"roots\""))
        .expect("a roots record");
    assert!(
        line.len() <= 32 * 1024,
        "a roots record of {} bytes",
        line.len()
    );
    let rec: Value = serde_json::from_str(line).expect("record");
    let d = &rec["details"];
    assert_eq!(d["acceptedCount"], json!(256), "{d}");
    assert_eq!(d["ignoredCount"], json!(300), "{d}");
    let kept = d["accepted"].as_array().map_or(0, Vec::len);
    assert!((1..256).contains(&kept), "{kept} accepted roots kept");
}
