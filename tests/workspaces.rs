//! Several workspaces behind one gateway (docs/workspaces.md): two siblings whose names
//! share a prefix (`proj`, `proj-evil`), with a directory beside them (`other`) that is
//! not served, driven over every door; rules scoped to one workspace; start-up with a
//! missing directory, a file, and none usable.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Gate, REFUSED, assert_refused_any, bin, canonical_tempdir, run_cli};

/// `P/proj`, `P/proj-evil` (served), `P/other` (not), `P/state`, each seeded.
struct Pair {
    parent: PathBuf,
    proj: PathBuf,
    evil: PathBuf,
    other: PathBuf,
    state: PathBuf,
    dir: Option<TempDir>,
}

impl Pair {
    fn new() -> Pair {
        let (dir, parent) = canonical_tempdir("fsgate-multi-");
        let at = |n: &str| parent.join(n);
        for d in ["proj", "proj-evil", "other", "state"] {
            std::fs::create_dir(at(d)).expect("mkdir");
        }
        std::fs::write(at("proj/a.txt"), "in proj\n").expect("seed");
        std::fs::write(at("proj-evil/b.txt"), "in proj-evil\n").expect("seed");
        std::fs::write(at("other/secret.txt"), "OUTSIDE\n").expect("seed");
        std::fs::write(at("top.txt"), "OUTSIDE\n").expect("seed");
        Pair {
            proj: at("proj"),
            evil: at("proj-evil"),
            other: at("other"),
            state: at("state"),
            parent,
            dir: Some(dir),
        }
    }

    /// `fsgate serve` (ACP) on both, `policy` if given.
    fn serve(mut self, policy: Option<&str>) -> (Gate, Pair) {
        let dirs = self.dir.take().into_iter().collect();
        let g = Gate::with_workspaces(
            self.proj.clone(),
            &[self.evil.clone().into()],
            policy,
            (self.other.clone(), self.state.clone()),
            dirs,
        );
        (g, self)
    }

    fn records(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.state.join("audit/audit.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[test]
fn each_workspace_is_reached_through_its_own_root_and_nothing_between_or_beside() {
    let (g, ws) = Pair::new().serve(None);
    let read = |path: &Path| {
        g.call(
            "fs/read_text_file",
            json!({"sessionId": "s", "path": p(path)}),
        )
    };
    assert_eq!(
        read(&ws.proj.join("a.txt")).expect("proj")["content"],
        "in proj\n"
    );
    assert_eq!(
        read(&ws.evil.join("b.txt")).expect("evil")["content"],
        "in proj-evil\n"
    );
    // Lexically inside the other workspace: served by it.
    let via = ws.proj.join("../proj-evil/b.txt");
    assert_eq!(read(&via).expect("normalised")["content"], "in proj-evil\n");
    // Above, beside and between: refused, by every operation, nothing touched.
    for target in [ws.parent.join("top.txt"), ws.other.join("secret.txt")] {
        let e = assert_refused_any(read(&target));
        assert_eq!(
            e.data.as_ref().map(|d| d["rule"].clone()),
            Some(json!("workspace-boundary"))
        );
    }
    std::fs::write(ws.proj.join("inside.txt"), "inside").expect("seed");
    crate::escape_paths::assert_every_op_refused(
        &g,
        &p(&ws.other.join("secret.txt")),
        &p(&ws.other),
        b"OUTSIDE\n",
    );
    assert_refused_any(read(&ws.parent.join("proj-evilx/b.txt")));
    assert_refused_any(g.call(
        "_fsgate/ls",
        json!({"sessionId": "s", "path": p(&ws.parent)}),
    ));
    // A rename from one workspace to the other is refused, both sides left as they are.
    let e = assert_refused_any(g.call(
        "_fsgate/rename",
        json!({"sessionId": "s", "oldPath": p(&ws.proj.join("a.txt")), "newPath": p(&ws.evil.join("a.txt"))}),
    ));
    assert_eq!(
        e.data.as_ref().map(|d| d["rule"].clone()),
        Some(json!("workspace-cross"))
    );
    assert!(e.message.contains("across workspaces"), "{e:?}");
    assert!(ws.proj.join("a.txt").exists() && !ws.evil.join("a.txt").exists());
    // Writes land in their own workspace; the backup of what they replace in its own store.
    g.ok(
        "fs/write_text_file",
        json!({"sessionId": "s", "path": p(&ws.evil.join("b.txt")), "content": "new"}),
    );
    assert_eq!(
        std::fs::read_to_string(ws.evil.join("b.txt")).expect("b"),
        "new"
    );
    let backups = |name: &str| {
        let out = run_cli(&[
            "backup",
            "list",
            "--backup-dir",
            &p(&ws.state.join("backups").join(name)),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        backups("proj-evil").contains("b.txt"),
        "{}",
        backups("proj-evil")
    );
    assert!(!backups("proj").contains("b.txt"), "{}", backups("proj"));
    // Every record of a path names its workspace; the log verifies.
    let recs = ws.records();
    let named = |path: &str| {
        recs.iter()
            .filter(|r| r["kind"] == "request" && r["path"] == path)
            .map(|r| r["args"]["workspace"].clone())
            .collect::<Vec<_>>()
    };
    assert!(named("a.txt").iter().all(|w| w == "proj") && !named("a.txt").is_empty());
    assert!(named("b.txt").iter().all(|w| w == "proj-evil") && !named("b.txt").is_empty());
    let cross = recs
        .iter()
        .find(|r| r["rule"] == "workspace-cross")
        .expect("the refused rename is recorded");
    assert!(cross["args"].get("workspace").is_none(), "{cross}");
    assert!(
        cross["args"]["workspaces"]
            .as_str()
            .is_some_and(|w| w.contains("proj-evil=")),
        "{cross}"
    );
    let start = recs
        .iter()
        .find(|r| r["kind"] == "start" && r["details"]["transport"] == "acp")
        .expect("start");
    assert_eq!(
        start["details"]["workspaces"][1]["name"], "proj-evil",
        "{start}"
    );
    let verify = run_cli(&["audit", "verify", &p(&ws.state.join("audit/audit.jsonl"))]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn no_listing_or_search_crosses_into_the_other_workspace_through_a_symlink() {
    let ws = Pair::new();
    std::os::unix::fs::symlink("../proj-evil", ws.proj.join("dlink")).expect("symlink");
    std::os::unix::fs::symlink("../proj-evil/b.txt", ws.proj.join("flink")).expect("symlink");
    let (g, ws) = ws.serve(None);
    for (method, params) in [
        (
            "fs/read_text_file",
            json!({"path": p(&ws.proj.join("flink"))}),
        ),
        (
            "fs/read_text_file",
            json!({"path": p(&ws.proj.join("dlink/b.txt"))}),
        ),
        ("_fsgate/ls", json!({"path": p(&ws.proj.join("dlink"))})),
        (
            "_fsgate/grep",
            json!({"pattern": "evil", "path": p(&ws.proj.join("dlink"))}),
        ),
    ] {
        let mut params = params;
        params["sessionId"] = json!("s");
        assert_refused_any(g.call(method, params));
    }
    // A relative glob and a pathless grep search both workspaces, each once, in itself.
    let globbed = g.ok(
        "_fsgate/glob",
        json!({"sessionId": "s", "pattern": "**/*.txt"}),
    );
    let mut paths: Vec<String> = crate::common::glob_paths(&globbed);
    let mut want = [p(&ws.proj.join("a.txt")), p(&ws.evil.join("b.txt"))];
    paths.sort();
    want.sort();
    assert_eq!(paths, want, "each file once, none through the link");
    let hits = crate::common::grep_hits(&g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "in proj"}),
    ));
    let mut files: Vec<String> = hits.into_iter().map(|h| h.0).collect();
    let mut want = [p(&ws.proj.join("a.txt")), p(&ws.evil.join("b.txt"))];
    files.sort();
    want.sort();
    assert_eq!(files, want);
}

const SCOPED: &str = r#"
version = 1
[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
[[rule]]
id = "write-proj"
effect = "allow"
ops = ["write", "delete"]
paths = ["**"]
workspaces = ["proj"]
[[test]]
op = "write"
path = "x.txt"
workspace = "proj"
expect = "allow"
[[test]]
op = "write"
path = "x.txt"
workspace = "proj-evil"
expect = "deny"
rule = "default-deny"
"#;

#[test]
fn rules_scoped_to_a_workspace_apply_there_only_and_the_policy_tools_say_so() {
    let (g, ws) = Pair::new().serve(Some(SCOPED));
    let write = |dir: &Path| {
        g.call(
            "fs/write_text_file",
            json!({"sessionId": "s", "path": p(&dir.join("x.txt")), "content": "x"}),
        )
    };
    write(&ws.proj).expect("proj is writable");
    let e = assert_refused_any(write(&ws.evil));
    assert_eq!(
        e.data.as_ref().map(|d| d["rule"].clone()),
        Some(json!("default-deny"))
    );
    assert!(!ws.evil.join("x.txt").exists());
    let policy = p(&ws.state.join("policy.toml"));
    let explain = |name: &str| {
        let out = run_cli(&[
            "policy",
            "explain",
            &policy,
            "--op",
            "write",
            "--workspace-name",
            name,
            "x.txt",
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        explain("proj").contains("write-proj"),
        "{}",
        explain("proj")
    );
    assert!(
        explain("proj-evil").contains("default-deny"),
        "{}",
        explain("proj-evil")
    );
    // Widening the rule to proj-evil loosens proj-evil, and nothing in proj.
    let wider = ws.state.join("wider.toml");
    let text = SCOPED.replace(
        r#"workspaces = ["proj"]"#,
        r#"workspaces = ["proj", "proj-evil"]"#,
    );
    std::fs::write(&wider, text).expect("policy");
    let diff = |name: &str| {
        let args = [
            "policy",
            "diff",
            &policy,
            &p(&wider),
            "--workspace-name",
            name,
        ];
        run_cli(&args).status.code()
    };
    assert_eq!(diff("proj-evil"), Some(1), "proj-evil loosens");
    assert_eq!(diff("proj"), Some(0), "proj is as it was");
    let tested = run_cli(&["policy", "test", &policy]);
    assert!(
        tested.status.success(),
        "{}",
        String::from_utf8_lossy(&tested.stdout)
    );
    let check = run_cli(&["policy", "check", &policy]);
    assert_ne!(
        check.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[test]
fn mcp_on_stdio_lists_every_root_and_reads_each_workspace() {
    let ws = Pair::new();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--transport", "mcp", "--workspace"])
        .arg(&ws.proj)
        .arg("--workspace")
        .arg(format!("evil={}", p(&ws.evil)))
        .arg("--audit-log")
        .arg(ws.state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("backups"));
    let dirs = crate::mcp_harness::Dirs::new();
    let mut m = crate::mcp_harness::McpGate::spawn(cmd, dirs);
    m.initialize("2025-11-25");
    let text = crate::mcp_harness::text_of;
    let allowed = m.tool(2, "list_allowed_directories", json!({}));
    assert_eq!(
        text(&allowed),
        format!("Allowed directories:\n{}\n{}", p(&ws.proj), p(&ws.evil))
    );
    let b = m.tool(
        3,
        "read_text_file",
        json!({"path": p(&ws.evil.join("b.txt"))}),
    );
    assert_eq!(text(&b), "in proj-evil\n", "{b}");
    // A relative path is the first workspace's.
    let a = m.tool(4, "read_text_file", json!({"path": "a.txt"}));
    assert_eq!(text(&a), "in proj\n", "{a}");
    let out = m.tool(
        5,
        "read_text_file",
        json!({"path": p(&ws.other.join("secret.txt"))}),
    );
    assert_eq!(out["isError"], true, "{out}");
    assert!(!text(&out).contains("OUTSIDE"));
    let found = m.tool(
        6,
        "search_files",
        json!({"path": p(&ws.evil), "pattern": "*.txt"}),
    );
    assert_eq!(text(&found), p(&ws.evil.join("b.txt")), "{found}");
    let recs = ws.records();
    assert!(
        recs.iter()
            .any(|r| r["op"] == "read_text_file" && r["args"]["workspace"] == "evil")
    );
    m.finish();
}

/// Starts `fsgate serve --transport T --listen 127.0.0.1:0` on the pair; returns the
/// child, the address and the token.
fn listen(ws: &Pair, transport: &str) -> (std::process::Child, String, String) {
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--transport",
            transport,
            "--listen",
            "127.0.0.1:0",
            "--workspace",
        ])
        .arg(&ws.proj)
        .arg("--workspace")
        .arg(&ws.evil)
        .arg("--audit-log")
        .arg(ws.state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("backups"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fsgate");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let (mut token, mut addr, mut told) = (None, None, String::new());
    while addr.is_none() {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap_or(0) > 0,
            "fsgate ended:\n{told}"
        );
        told.push_str(&line);
        let line = line.trim();
        if let Some(t) = line.strip_prefix(&format!("fsgate: {transport} token: ")) {
            token = Some(t.to_string());
        }
        let listening = format!("fsgate: {transport} listening on ");
        if let Some(u) = line.strip_prefix(&listening) {
            let u = u.trim_start_matches("ws://").trim_start_matches("http://");
            addr = Some(u.trim_end_matches("/mcp").trim_end_matches('/').to_string());
        }
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (
        child,
        addr.unwrap_or_default(),
        token.expect("token printed"),
    )
}

#[test]
fn websocket_paths_name_the_workspace_first() {
    let ws = Pair::new();
    let (mut child, addr, token) = listen(&ws, "ws");
    let mut c = crate::ws_harness::WsClient::open(&addr, &token);
    let top = c.ok("list", json!({"path": "/"}));
    let names: Vec<String> = crate::common::entry_names(&top);
    assert_eq!(names, ["proj", "proj-evil"], "{top}");
    assert_eq!(
        c.ok("read", json!({"path": "/proj-evil/b.txt"}))["content"],
        "in proj-evil\n"
    );
    assert_eq!(
        c.ok("read", json!({"path": "/proj/a.txt"}))["content"],
        "in proj\n"
    );
    let listed = c.ok("list", json!({"path": "/proj"}));
    assert!(listed.to_string().contains("/proj/a.txt"), "{listed}");
    c.ok("write", json!({"path": "/proj-evil/w.txt", "content": "w"}));
    assert_eq!(
        std::fs::read_to_string(ws.evil.join("w.txt")).expect("w"),
        "w"
    );
    // Change events name the workspace first too, whoever made the change.
    c.wait_change("create", "/proj-evil/w.txt", Some("file"));
    std::fs::write(ws.proj.join("disk.txt"), "d").expect("write on disk");
    c.wait_change("create", "/proj/disk.txt", Some("file"));
    for path in ["/other/secret.txt", "/proj/../other/secret.txt", "/x.txt"] {
        let e = c.fail("read", REFUSED, json!({"path": path}));
        assert!(!e.to_string().contains("OUTSIDE"), "{e}");
    }
    let e = c.fail(
        "rename",
        REFUSED,
        json!({"oldPath": "/proj/a.txt", "newPath": "/proj-evil/a.txt"}),
    );
    assert_eq!(e["rule"], "workspace-cross", "{e}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn mcp_over_http_reads_each_workspace() {
    let ws = Pair::new();
    let (mut child, addr, token) = listen(&ws, "http");
    let call = |id: u64, path: &Path| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": p(path)},
            "_meta": crate::mcp_harness::modern_meta()}});
        http_post(&addr, &token, &body)
    };
    let b = call(1, &ws.evil.join("b.txt"));
    assert_eq!(b["result"]["content"][0]["text"], "in proj-evil\n", "{b}");
    let a = call(2, &ws.proj.join("a.txt"));
    assert_eq!(a["result"]["content"][0]["text"], "in proj\n", "{a}");
    let out = call(3, &ws.other.join("secret.txt"));
    assert_eq!(out["result"]["isError"], true, "{out}");
    let _ = child.kill();
    let _ = child.wait();
}

/// One stateless (2026-07-28) MCP request over HTTP; its JSON answer.
fn http_post(addr: &str, token: &str, body: &Value) -> Value {
    use std::io::{Read, Write};
    let text = body.to_string();
    let method = body["method"].as_str().unwrap_or_default();
    let name = match body["params"]["name"].as_str() {
        Some(n) => format!("Mcp-Name: {n}\r\n"),
        None => String::new(),
    };
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{text}",
        text.len()
    );
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    tcp.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    let _ = tcp.read_to_string(&mut raw);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|_| json!({"raw": raw}))
}

#[test]
fn a_missing_directory_and_a_file_are_skipped_with_a_warning_and_none_usable_exits_1() {
    let ws = Pair::new();
    let missing = ws.parent.join("missing");
    let file = ws.parent.join("top.txt");
    let serve = |dirs: &[&Path]| {
        let mut cmd = Command::new(bin());
        cmd.args(["serve", "--check-sandbox"]);
        for d in dirs {
            cmd.arg("--workspace").arg(d);
        }
        cmd.arg("--audit-log")
            .arg(ws.state.join("audit/audit.jsonl"));
        cmd.arg("--backup-dir").arg(ws.state.join("backups"));
        cmd.stdin(Stdio::null()).output().expect("run fsgate")
    };
    let out = serve(&[&missing, &ws.proj, &file, &ws.evil]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("Warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains("missing") && warnings[0].contains("no such directory"),
        "{err}"
    );
    assert!(
        warnings[1].contains("top.txt") && warnings[1].contains("not a directory"),
        "{err}"
    );
    let out = serve(&[&missing, &file]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("none of the 2 workspaces given is a usable directory"),
        "{err}"
    );
    // Nested workspaces and two of one name are mistakes, refused with exit 2.
    let sub = ws.proj.join("sub");
    std::fs::create_dir(&sub).expect("mkdir");
    let out = serve(&[&ws.proj, &sub]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("must not nest"));
    let named = PathBuf::from(format!("proj={}", p(&ws.evil)));
    let out = serve(&[&ws.proj, &named]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_acp_session_uses_the_workspaces_of_its_cwd_and_additional_directories_only() {
    let test =
        "workspaces::an_acp_session_uses_the_workspaces_of_its_cwd_and_additional_directories_only";
    let Some(agent) = crate::acp_proxy::editor::bin_agent(test, &["--mcp", "http"]) else {
        return;
    };
    let ws = Pair::new();
    let opts = crate::acp_proxy::editor::Options {
        workspaces: vec![OsString::from(&ws.evil)],
        ..Default::default()
    };
    let mut ed = crate::acp_proxy::editor::Editor::launch(&agent, opts);
    // The editor's own workspace (`ed.root`) is the first; proj-evil the second.
    std::fs::write(ed.root.join("a.txt"), "in root\n").expect("seed");
    ed.initialize(true, true);
    let root = ed.root.clone();
    let open = |ed: &mut crate::acp_proxy::editor::Editor, extra: Value| {
        let id = ed.request(
            "session/new",
            json!({"cwd": root, "mcpServers": [], "additionalDirectories": extra}),
        );
        ed.response(&id)
    };
    let refused = open(&mut ed, json!([p(&ws.other)]));
    assert_eq!(refused["error"]["code"], REFUSED, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not a directory fsgate serves")
    );
    let both = open(&mut ed, json!([p(&ws.evil)]));
    let both = both["result"]["sessionId"]
        .as_str()
        .expect("session")
        .to_string();
    let only = open(&mut ed, json!([]));
    let only = only["result"]["sessionId"]
        .as_str()
        .expect("session")
        .to_string();
    let evil = p(&ws.evil.join("b.txt"));
    let reports = ed.prompt(&both, &format!("read {evil}\nmcp-read {evil}"));
    assert!(
        reports.iter().all(|r| r.get("ok").is_some()),
        "{reports:?}\n{}",
        ed.stderr()
    );
    let reports = ed.prompt(
        &only,
        &format!("read {evil}\nmcp-read {evil}\nread {}/a.txt", p(&root)),
    );
    assert!(reports[0].get("error").is_some(), "{reports:?}");
    assert!(
        !reports[1].to_string().contains("in proj-evil"),
        "{reports:?}"
    );
    assert!(reports[2].get("ok").is_some(), "{reports:?}");
}

/// Only the workspaces, each as its policy allows: the kernel alone (fsgate-wallprobe
/// opens paths with plain `std::fs` once confined as `fsgate serve` is).
#[test]
fn the_kernel_wall_holds_each_workspace_and_nothing_between_them() {
    let test = "workspaces::the_kernel_wall_holds_each_workspace_and_nothing_between_them";
    let bin = option_env!("CARGO_BIN_EXE_fsgate-wallprobe").unwrap_or_default();
    if bin.is_empty() || !Path::new(bin).exists() {
        crate::common::skip_or_fail(test, "built without `--features test-bins`");
        return;
    }
    let ws = Pair::new();
    std::fs::write(ws.state.join("policy.toml"), SCOPED).expect("policy");
    let mut child = Command::new(bin)
        .arg("--workspace")
        .arg(&ws.proj)
        .arg("--workspace")
        .arg(&ws.evil)
        .arg("--policy")
        .arg(ws.state.join("policy.toml"))
        .arg("--audit-log")
        .arg(ws.state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("backups"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn fsgate-wallprobe");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut next = || {
        let mut line = String::new();
        out.read_line(&mut line).expect("line");
        serde_json::from_str::<Value>(&line).expect("JSON")
    };
    let first = next();
    if first["sandbox"]["enforcement"] == "not" {
        drop(stdin);
        let _ = child.wait();
        crate::common::skip_or_fail(test, &format!("no Landlock here: {first}"));
        return;
    }
    let mut ask = |op: &str, path: &Path| {
        use std::io::Write;
        let req = json!({"op": op, "path": p(path), "content": "x"});
        writeln!(stdin, "{req}")
            .and_then(|()| stdin.flush())
            .expect("send");
        next()["ok"] == true
    };
    assert!(ask("read", &ws.proj.join("a.txt")), "proj readable");
    assert!(ask("read", &ws.evil.join("b.txt")), "proj-evil readable");
    assert!(
        ask("write", &ws.proj.join("k.txt")),
        "proj writable (its policy writes)"
    );
    assert!(
        !ask("write", &ws.evil.join("k.txt")),
        "proj-evil read-only in the kernel"
    );
    assert!(
        !ask("read", &ws.other.join("secret.txt")),
        "the directory beside them"
    );
    assert!(
        !ask("read", &ws.parent.join("top.txt")),
        "the directory above them"
    );
    drop(stdin);
    let _ = child.wait();
}

/// MCP roots narrow within the workspaces: one above both keeps each, one inside a
/// workspace narrows to it, and the other workspace is then refused.
#[test]
fn mcp_roots_narrow_within_the_workspaces() {
    let ws = Pair::new();
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--transport", "mcp", "--workspace"])
        .arg(&ws.proj)
        .arg("--workspace")
        .arg(&ws.evil)
        .arg("--audit-log")
        .arg(ws.state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("backups"));
    let mut m = crate::mcp_harness::McpGate::spawn(cmd, crate::mcp_harness::Dirs::new());
    m.initialize_with("2025-06-18", json!({"roots": {"listChanged": true}}));
    let text = crate::mcp_harness::text_of;
    m.answer_roots(&[format!("file://{}", p(&ws.parent))]);
    let allowed = m.tool(2, "list_allowed_directories", json!({}));
    assert_eq!(
        text(&allowed),
        format!("Allowed directories:\n{}\n{}", p(&ws.proj), p(&ws.evil))
    );
    m.notify("notifications/roots/list_changed");
    m.answer_roots(&[format!("file://{}", p(&ws.evil))]);
    let allowed = m.tool(3, "list_allowed_directories", json!({}));
    assert_eq!(
        text(&allowed),
        format!("Allowed directories:\n{}", p(&ws.evil))
    );
    let b = m.tool(
        4,
        "read_text_file",
        json!({"path": p(&ws.evil.join("b.txt"))}),
    );
    assert_eq!(text(&b), "in proj-evil\n", "{b}");
    let a = m.tool(
        5,
        "read_text_file",
        json!({"path": p(&ws.proj.join("a.txt"))}),
    );
    assert_eq!(a["isError"], true, "{a}");
    m.finish();
}

/// A session narrowed to one workspace (MCP roots) searches that workspace whole, and
/// never another one's entries that happen to be named like its root: the roots are
/// compared in each workspace's own paths wherever a search starts (a relative glob, an
/// absolute one, a grep without a path).
#[test]
fn a_search_narrowed_to_one_workspace_never_lists_another() {
    let ws = Pair::new();
    // In proj-evil, a directory named like the other workspace (`proj`).
    std::fs::create_dir(ws.evil.join("proj")).expect("mkdir");
    std::fs::write(ws.evil.join("proj/inner.txt"), "in proj\n").expect("seed");
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--transport", "mcp", "--workspace"])
        .arg(&ws.proj)
        .arg("--workspace")
        .arg(&ws.evil)
        .arg("--audit-log")
        .arg(ws.state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("backups"));
    let mut m = crate::mcp_harness::McpGate::spawn(cmd, crate::mcp_harness::Dirs::new());
    m.initialize_with("2025-06-18", json!({"roots": {}}));
    m.answer_roots(&[format!("file://{}", p(&ws.proj))]);
    let inner = "inner.txt";
    let searches = [
        ("glob", json!({"pattern": "proj/**"})),
        (
            "glob",
            json!({"pattern": format!("{}/proj/**", p(&ws.evil))}),
        ),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("grep", json!({"pattern": "in proj"})),
    ];
    for (i, (tool, args)) in searches.iter().enumerate() {
        let r = m.tool(10 + i as u64, tool, args.clone());
        assert!(!r.to_string().contains(inner), "{tool} {args}: {r}");
    }
    // Its own workspace, searched without a place: served, and only it.
    let own = p(&ws.proj.join("a.txt"));
    for (i, (tool, args)) in searches[2..].iter().enumerate() {
        let r = m.tool(20 + i as u64, tool, args.clone());
        assert_ne!(r["isError"], json!(true), "{tool} {args}: {r}");
        assert!(r.to_string().contains(&own), "{tool} {args}: {r}");
    }
    let r = m.tool(30, "glob", searches[1].1.clone());
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(r.to_string().contains("client-roots"), "{r}");
    m.finish();
}

/// The same through an ACP session (`fsgate acp`): the MCP server hosted for a session
/// in one workspace searches that workspace, and nothing of another's that is named
/// like it.
#[test]
fn an_acp_sessions_searches_stay_in_its_workspace() {
    let test = "workspaces::an_acp_sessions_searches_stay_in_its_workspace";
    let Some(agent) = crate::acp_proxy::editor::bin_agent(test, &["--mcp", "http"]) else {
        return;
    };
    let ws = Pair::new();
    let opts = crate::acp_proxy::editor::Options {
        workspaces: vec![OsString::from(&ws.evil)],
        ..Default::default()
    };
    let mut ed = crate::acp_proxy::editor::Editor::launch(&agent, opts);
    std::fs::write(ed.root.join("a.txt"), "in root\n").expect("seed");
    let name = ed
        .root
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    std::fs::create_dir(ws.evil.join(&name)).expect("mkdir");
    std::fs::write(ws.evil.join(&name).join("inner.txt"), "in root\n").expect("seed");
    ed.initialize(true, true);
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let searches = [
        json!({"pattern": format!("{name}/**")}),
        json!({"pattern": format!("{}/{name}/**", p(&ws.evil))}),
        json!({"pattern": "**/*.txt"}),
    ];
    let mut lines: Vec<String> = searches.iter().map(|a| format!("mcp-x glob {a}")).collect();
    lines.push(format!("mcp-x grep {}", json!({"pattern": "in root"})));
    let reports = ed.prompt(&sid, &lines.join("\n"));
    assert_eq!(reports.len(), 4, "{reports:?}");
    for r in &reports {
        assert!(!r.to_string().contains("inner.txt"), "{r}");
    }
    let own = p(&root.join("a.txt"));
    for r in &reports[2..] {
        assert!(r.to_string().contains(&own), "{r}");
    }
}
