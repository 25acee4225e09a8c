//! What the kernel keeps of the view (docs/run.md, "What the kernel keeps") never hides
//! a change: under `fsgate acp --confine-agent` a file the agent's file tools (ACP
//! `fs/write_text_file`) changed or created is seen by its shell at once, names and
//! listings included; in `fsgate run` a name that is not there is remembered as such
//! until the view creates it, a hidden name is refused and recorded every time, and a
//! listing follows each change made through the view while each listing is recorded.

use std::ffi::OsString;
use std::process::Output;

use serde_json::{Value, json};

use crate::acp_proxy::editor::{Editor, Options};
use crate::common::canonical_tempdir;
use crate::common::view::{ViewWs, finished, view_ws};

/// A scripted ACP agent (standard library only): each prompt's text is a JSON array of
/// steps, `{"sh": COMMAND}` (run in the session's directory, a process of the agent's
/// own, so through the view) or `{"write": RELATIVE, "content": TEXT}` (ACP
/// `fs/write_text_file`, answered by fsgate) or `{"call": METHOD, "params": {...}}` (any
/// other request to fsgate, `{root}` in a string the session's directory). It reports every step's result, in
/// order, as one `agent_message_chunk` `{"results": [...]}`, then ends the turn.
const AGENT: &str = r#"
import json, subprocess, sys, os
cwd = None
ids = iter(range(1000, 10**9))
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def ask(method, params):
    i = next(ids)
    send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    for raw in sys.stdin:
        m = json.loads(raw)
        if m.get("id") == i and "method" not in m:
            return m
    sys.exit(3)
for raw in sys.stdin:
    m = json.loads(raw)
    method, mid, p = m.get("method"), m.get("id"), m.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        cwd = p["cwd"]
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "cache-session"}})
    elif method == "session/prompt":
        sid = p["sessionId"]
        steps = json.loads("".join(b.get("text", "") for b in p["prompt"]))
        results = []
        for s in steps:
            if "sh" in s:
                r = subprocess.run(["sh", "-c", s["sh"]], cwd=cwd, capture_output=True, text=True)
                results.append({"out": r.stdout, "err": r.stderr, "rc": r.returncode})
            elif "write" in s:
                path = os.path.join(cwd, s["write"])
                results.append(ask("fs/write_text_file", {"sessionId": sid, "path": path, "content": s["content"]}))
            else:
                params = json.loads(json.dumps(s["params"]).replace("{root}", cwd))
                params["sessionId"] = sid
                results.append(ask(s["call"], params))
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps({"results": results})}}
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": chunk}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "not found"}})
"#;

/// Starts the scripted agent confined under `fsgate acp`, seeds the workspace with
/// `files`, opens a session in it and runs `steps` as one prompt; the results, one per
/// step, and the editor.
fn confined_steps(files: &[(&str, &str)], steps: &Value) -> (Vec<Value>, Editor) {
    let (_cwd_dir, cwd) = canonical_tempdir("fsgate-view-cache-cwd");
    let agent: Vec<OsString> = vec!["/usr/bin/python3".into(), "-c".into(), AGENT.into()];
    let opts = Options {
        confine: true,
        cwd: Some(cwd),
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    for (name, text) in files {
        std::fs::write(ed.root.join(name), text).expect("seed");
    }
    let sid = ed.open_session();
    let reports = ed.prompt(&sid, &steps.to_string());
    let results = reports
        .iter()
        .find_map(|r| r["results"].as_array().cloned())
        .unwrap_or_else(|| panic!("no results in {reports:?}\nstderr:\n{}", ed.stderr()));
    assert_eq!(results.len(), steps.as_array().map_or(0, Vec::len));
    for r in &results {
        assert!(r.get("error").is_none(), "{r}\nstderr:\n{}", ed.stderr());
    }
    (results, ed)
}

/// The core agent loop: the shell reads a file and stats it (the kernel now holds its
/// name, fresh attributes and pages: the next `cat`'s `fstat` is not asked again), the
/// agent's file tool rewrites it longer, and the shell's next read, at once, is the
/// whole new content, not the old size's worth of it.
#[test]
fn view_cache_a_file_the_agents_file_tool_rewrote_is_read_whole_by_its_shell_at_once() {
    let new = "version two: longer than the first, by far\n";
    let steps = json!([
        {"sh": "cat app.txt; stat app.txt >/dev/null"},
        {"write": "app.txt", "content": new},
        {"sh": "cat app.txt"},
    ]);
    let (results, ed) = confined_steps(&[("app.txt", "v1\n")], &steps);
    assert_eq!(results[0]["out"], "v1\n", "{}", ed.stderr());
    assert_eq!(
        std::fs::read_to_string(ed.root.join("app.txt"))
            .ok()
            .as_deref(),
        Some(new)
    );
    assert_eq!(results[2]["out"], new, "{}\n{}", results[2], ed.stderr());
}

/// A name the shell found absent (the kernel keeps "not there" for its TTL) and the
/// agent's file tool then created is there for the shell at once.
#[test]
fn view_cache_a_file_the_agents_file_tool_created_is_there_for_its_shell_at_once() {
    let steps = json!([
        {"sh": "test -e new.txt && echo present || echo absent"},
        {"write": "new.txt", "content": "fresh\n"},
        {"sh": "cat new.txt"},
    ]);
    let (results, ed) = confined_steps(&[("a.txt", "alpha\n")], &steps);
    let err = ed.stderr();
    assert_eq!(results[0]["out"], "absent\n", "{err}");
    assert_eq!(results[2]["out"], "fresh\n", "{}\n{err}", results[2]);
}

/// A listing the shell made (the kernel keeps it across opens) lists, made again, the
/// file the agent's file tool created since.
#[test]
fn view_cache_a_file_the_agents_file_tool_created_is_listed_by_its_shell_at_once() {
    let steps = json!([
        {"sh": "ls; ls -l >/dev/null"},
        {"write": "new.txt", "content": "fresh\n"},
        {"sh": "ls"},
    ]);
    let (results, ed) = confined_steps(&[("a.txt", "alpha\n")], &steps);
    let err = ed.stderr();
    assert_eq!(results[0]["out"], "a.txt\n", "{err}");
    assert_eq!(
        results[2]["out"], "a.txt\nnew.txt\n",
        "{}\n{err}",
        results[2]
    );
}

/// The agent's other file tools (`_fsgate/edit_text_file`, `_fsgate/rename`,
/// `_fsgate/rm`) on names and files the shell holds: an edit that lengthens a file is
/// read whole, a rename's old name is gone and its new one (probed absent before)
/// there, a removed file is gone, each at once.
#[test]
fn view_cache_the_agents_edit_rename_and_rm_are_seen_by_its_shell_at_once() {
    let call = |method: &str, params: Value| json!({"call": method, "params": params});
    let steps = json!([
        {"sh": "cat e.txt r.txt d.txt; stat e.txt r.txt d.txt >/dev/null; test -e moved.txt || echo absent"},
        call("_fsgate/edit_text_file", json!({"path": "{root}/e.txt", "oldText": "e", "newText": "edited at length"})),
        call("_fsgate/rename", json!({"oldPath": "{root}/r.txt", "newPath": "{root}/moved.txt"})),
        call("_fsgate/rm", json!({"path": "{root}/d.txt"})),
        {"sh": "cat e.txt; cat moved.txt; test -e r.txt || echo r-gone; test -e d.txt || echo d-gone"},
    ]);
    let files = [("e.txt", "e\n"), ("r.txt", "r\n"), ("d.txt", "d\n")];
    let (results, ed) = confined_steps(&files, &steps);
    let err = ed.stderr();
    assert_eq!(
        results[0]["out"], "e\nr\nd\nabsent\n",
        "{}\n{err}",
        results[0]
    );
    assert_eq!(
        results[4]["out"], "edited at length\nr\nr-gone\nd-gone\n",
        "{}\n{err}",
        results[4]
    );
}

view_ws! {
    /// A workspace with `.env` (a secret) and `d/` holding `one.txt`, its state beside it.
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-view-cache-ws", "fsgate-view-cache-state");
        std::fs::write(ws.root.join(".env"), "TOKEN=view-cache-secret\n").expect("seed");
        std::fs::create_dir(ws.root.join("d")).expect("seed");
        std::fs::write(ws.root.join("d/one.txt"), "one\n").expect("seed");
        Ws(ws)
    }

    /// `fsgate run -- sh -c SCRIPT` in the workspace, to its end.
    fn sh(&self, script: &str) -> Output {
        let mut cmd = self.fsgate_run();
        cmd.args(["--", "sh", "-c", script]);
        finished(cmd)
    }
}

/// How many times the `reads` records count `path` under `op` (`stat`, `ls`, `open`).
fn counted(records: &[Value], op: &str, path: &str) -> u64 {
    records
        .iter()
        .filter(|r| r["op"] == "reads")
        .filter_map(|r| r["details"]["reads"][op].as_array())
        .flatten()
        .filter(|e| e[0] == path)
        .filter_map(|e| e[1].as_u64())
        .sum()
}

/// A hidden name is never remembered by the kernel: each `cat .env` is refused and
/// recorded.
#[test]
fn view_cache_each_read_of_a_hidden_name_is_refused_and_recorded() {
    let ws = Ws::new();
    let out = ws.sh("cat .env; cat .env; echo done");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "done\n", "{}", String::from_utf8_lossy(&out.stderr));
    let refusals = ws
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["path"] == ".env" && r["decision"] == "deny")
        .count();
    assert_eq!(refusals, 2, "each cat .env must be refused and recorded");
}

/// A name found absent is remembered as absent (the same process's second probe is
/// answered by the kernel), and is there at once when the view creates it.
#[test]
fn view_cache_a_name_found_absent_is_remembered_until_the_view_creates_it() {
    let ws = Ws::new();
    let out = ws.sh("test -e n || echo absent; test -e n || echo absent; echo x > n; cat n");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout, "absent\nabsent\nx\n", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("n")).ok().as_deref(),
        Some("x\n")
    );
    // Two probes, one lookup: the kernel kept "not there" (a lookup of a name that is
    // not there is counted in its process's `reads` as not found). The create looks
    // once more, as the name may have appeared meanwhile: two in all.
    let absent: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["outcome"] == "-32002")
        .collect();
    assert_eq!(counted(&absent, "stat", "n"), 2, "{absent:#?}");
}

/// A listing follows each change the view makes in its directory (the kernel keeps a
/// listing across opens), and each `ls` of it is still decided and recorded.
#[test]
fn view_cache_a_listing_follows_each_change_and_each_listing_is_recorded() {
    let ws = Ws::new();
    let out = ws
        .sh("ls d; echo two > d/two.txt; ls d; rm d/one.txt; ls d; mv d/two.txt d/three.txt; ls d");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        stdout, "one.txt\none.txt\ntwo.txt\ntwo.txt\nthree.txt\n",
        "{stderr}"
    );
    assert_eq!(counted(&ws.records(), "ls", "d"), 4, "each ls d recorded");
}

/// A listing through the view gives each entry its kind and its real inode number, as
/// the directory does: in a small directory and in one large enough for the gateway
/// to keep its names (listed twice: the gateway's second listing is from the names it
/// kept; the workspace crate's own test checks those), the secret's name left out of
/// both.
#[test]
fn view_cache_a_listing_gives_each_entry_its_kind_and_inode_number() {
    use std::os::unix::fs::MetadataExt;
    let ws = Ws::new();
    let big = ws.root.join("big");
    std::fs::create_dir(&big).expect("seed");
    for i in 0..100 {
        std::fs::write(big.join(format!("f{i:03}")), "x").expect("seed");
    }
    std::fs::create_dir(big.join("sub")).expect("seed");
    std::os::unix::fs::symlink("f000", big.join("link")).expect("seed");
    std::fs::write(big.join(".env"), "TOKEN=x\n").expect("seed");
    // Settled well before it is listed, so that its names may be kept.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let script = "import os, json\n\
        print(json.dumps([sorted([e.name, e.inode(), e.is_dir(follow_symlinks=False), \
        e.is_symlink()] for e in os.scandir(d)) for d in ('d', 'big', 'big')]))";
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "python3", "-c", script]);
    let out = finished(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let seen: Vec<Vec<(String, u64, bool, bool)>> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let real = |dir: &str| {
        let mut v: Vec<(String, u64, bool, bool)> = std::fs::read_dir(ws.root.join(dir))
            .expect("read_dir")
            .map(|e| {
                let e = e.expect("entry");
                let m = e.path().symlink_metadata().expect("lstat");
                let name = e.file_name().to_string_lossy().into_owned();
                (name, m.ino(), m.is_dir(), m.file_type().is_symlink())
            })
            .filter(|e| e.0 != ".env")
            .collect();
        v.sort();
        v
    };
    assert_eq!(seen.len(), 3, "{stderr}");
    assert_eq!(seen[0], real("d"), "{stderr}");
    assert_eq!(real("big").len(), 102);
    assert_eq!(seen[1], real("big"), "{stderr}");
    assert_eq!(seen[2], real("big"), "listed again: {stderr}");
}

/// A shell holds the file open for writing (nothing written) while the agent's file
/// tool rewrites it, then appends to it through its own descriptor's /proc entry (the
/// file it opened, as the kernel still names it): the append lands on the file tool's
/// content, not on the old content the held copy was filled with. Another process's
/// append by name gets the same.
#[test]
fn view_cache_an_append_after_the_agents_file_tool_keeps_the_file_tools_content() {
    let held = "( exec 3<>app.txt; while [ ! -e go ]; do sleep 0.05; done; \
                echo more >> /proc/self/fd/3; exec 3>&-; touch done ) >/dev/null 2>&1 &";
    let steps = json!([
        {"sh": format!("{held} sleep 0.5")},
        {"write": "app.txt", "content": "v2\n"},
        {"sh": "touch go; while [ ! -e done ]; do sleep 0.05; done; echo by-name >> app.txt; cat app.txt"},
    ]);
    let (results, ed) = confined_steps(&[("app.txt", "v1\n")], &steps);
    let want = "v2\nmore\nby-name\n";
    assert_eq!(results[2]["out"], want, "{}\n{}", results[2], ed.stderr());
    assert_eq!(
        std::fs::read_to_string(ed.root.join("app.txt"))
            .ok()
            .as_deref(),
        Some(want)
    );
}

/// A name the kernel remembers as absent may be created outside the view meanwhile (by
/// the person at the host, say); an `open(O_CREAT)` of it then reaches the view as a
/// create, which opens the file there as it is, as on a disk: `>>` appends to the
/// host's content, it never empties the file first.
#[test]
fn view_cache_a_create_of_a_name_made_outside_meanwhile_keeps_its_content() {
    use std::io::Write as _;
    use std::process::Stdio;
    let ws = Ws::new();
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "sh", "-c"]);
    cmd.arg("test -e n || echo absent; echo > ready; read go; echo appended >> n; cat n");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("fsgate run");
    let ready = ws.root.join("ready");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < until,
            "the command never got ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(ws.root.join("n"), "from the host\n").expect("write outside the view");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("go");
    drop(stdin);
    let out = crate::common::view::waited(child, "fsgate run", std::time::Duration::from_secs(60));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout, "absent\nfrom the host\nappended\n", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("n")).ok().as_deref(),
        Some("from the host\nappended\n")
    );
}

/// The same for an `open(O_RDONLY | O_CREAT)` (as util-linux `flock` opens its lock
/// file): the file made meanwhile is opened for reading, which a policy that allows no
/// writes allows. Before, it was opened for writing, and refused.
#[test]
fn view_cache_a_read_only_create_of_a_name_made_outside_meanwhile_reads_it() {
    use std::io::{BufRead as _, Write as _};
    use std::process::Stdio;
    let ws = Ws::new();
    let readonly = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/readonly.toml");
    let mut cmd = ws.fsgate_run();
    cmd.arg("--policy")
        .arg(&readonly)
        .args(["--", "python3", "-c"]);
    cmd.arg(
        "import os, sys\n\
         print('absent' if not os.path.exists('m') else 'there', flush=True)\n\
         sys.stdin.readline()\n\
         fd = os.open('m', os.O_RDONLY | os.O_CREAT)\n\
         print(os.read(fd, 100).decode(), end='')\n",
    );
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("fsgate run");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("first line");
    assert_eq!(first, "absent\n");
    std::fs::write(ws.root.join("m"), "made outside\n").expect("write outside the view");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").expect("go");
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("rest");
    let out = crate::common::view::waited(child, "fsgate run", std::time::Duration::from_secs(60));
    assert_eq!(
        rest,
        "made outside\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success());
}
