//! The same checks for each real SDK agent behind `fsgate acp`: reading, writing,
//! refusals, capability flags, sessions, ids, and the process lifecycle.

use std::ffi::OsString;
use std::time::Duration;

use serde_json::{Value, json};

use super::editor::{Editor, Options, Peer, err, methods_of, ok, repo};

const REFUSED: i64 = -32003;

/// Starts fsgate hosting `peer`, or prints SKIPPED and returns `None`.
fn launch(peer: Peer, test: &str, opts: Options) -> Option<Editor> {
    let cmd = peer.command_or_skip(test)?;
    Some(Editor::launch(&cmd, opts))
}

fn code(report: &Value) -> i64 {
    err(report)["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no numeric code in {report}"))
}

fn rule(report: &Value) -> String {
    err(report)["data"]["rule"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn assert_refused(report: &Value, want_rule: Option<&str>) {
    assert_eq!(code(report), REFUSED, "{report}");
    if let Some(r) = want_rule {
        assert_eq!(rule(report), r, "{report}");
    }
}

pub fn capabilities_follow_the_default_policy(peer: Peer) {
    let Some(mut ed) = launch(
        peer,
        "capabilities_follow_the_default_policy",
        Options::default(),
    ) else {
        return;
    };
    // The editor claims no fs support at all; the agent must see the policy's answer.
    let init = ed.initialize(false, false);
    let want = json!({"readTextFile": true, "writeTextFile": true});
    assert_eq!(init["_meta"]["clientCapabilities"]["fs"], want, "{init}");
    assert_eq!(
        init["protocolVersion"], 1,
        "protocol version relayed unchanged: {init}"
    );
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let reports = ed.prompt(&sid, "caps");
    assert_eq!(ok(&reports[0])["fs"], want, "{reports:?}");
}

pub fn capabilities_follow_the_readonly_policy(peer: Peer) {
    let opts = Options {
        policy: Some(repo().join("policies/readonly.toml")),
        ..Default::default()
    };
    let Some(mut ed) = launch(peer, "capabilities_follow_the_readonly_policy", opts) else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "alpha\n").expect("seed");
    // Wrong the other way round: the editor offers writing and denies reading.
    let init = ed.initialize(false, true);
    let want = json!({"readTextFile": true, "writeTextFile": false});
    assert_eq!(init["_meta"]["clientCapabilities"]["fs"], want, "{init}");
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let r = root.display();
    let reports = ed.prompt(&sid, &format!("caps\nread {r}/a.txt\nwrite {r}/x.txt hi"));
    assert_eq!(ok(&reports[0])["fs"], want);
    assert_eq!(ok(&reports[1])["content"], "alpha\n");
    assert_refused(&reports[2], None);
    assert!(
        !root.join("x.txt").exists(),
        "a refused write created the file"
    );
}

pub fn reads_with_line_and_limit(peer: Peer) {
    let Some(mut ed) = launch(peer, "reads_with_line_and_limit", Options::default()) else {
        return;
    };
    std::fs::write(ed.root.join("f.txt"), "one\ntwo\nthree\nfour\nfive\n").expect("seed");
    let sid = ed.open_session();
    let p = ed.root.join("f.txt").display().to_string();
    let text = [
        format!("read {p}"),
        format!("read {p} 2 2"),
        format!("read {p} 4"),
        format!("read {p} 9 3"),
        format!("read {p} - 2"),
        format!("ext fsgate/read_file {}", json!({"path": p})),
        format!("ext fsgate/ls {}", json!({"path": ed.root})),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 7, "{reports:?}");
    assert_eq!(ok(&reports[0])["content"], "one\ntwo\nthree\nfour\nfive\n");
    assert_eq!(ok(&reports[1])["content"], "two\nthree\n");
    assert_eq!(ok(&reports[2])["content"], "four\nfive\n");
    assert_eq!(
        ok(&reports[3])["content"],
        "",
        "a window past the end is empty"
    );
    assert_eq!(ok(&reports[4])["content"], "one\ntwo\n");
    assert_eq!(ok(&reports[5])["content"], "one\ntwo\nthree\nfour\nfive\n");
    assert_eq!(ok(&reports[5])["encoding"], "utf-8");
    let entries = ok(&reports[6])["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["name"] == "f.txt" && e["path"] == p.as_str()),
        "{entries:?}"
    );
}

pub fn writes_create_files_on_disk(peer: Peer) {
    let Some(mut ed) = launch(peer, "writes_create_files_on_disk", Options::default()) else {
        return;
    };
    std::fs::write(ed.root.join("old.txt"), "v1\n").expect("seed");
    let sid = ed.open_session();
    let r = ed.root.display().to_string();
    let text = [
        format!("write {r}/new.txt \"hello\\nworld\\n\""),
        format!("write {r}/sub/dir/deep.txt deep"),
        format!("write {r}/old.txt v2"),
        format!("read {r}/new.txt"),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    for rep in &reports[..3] {
        ok(rep);
    }
    assert_eq!(
        std::fs::read_to_string(ed.root.join("new.txt")).expect("new.txt"),
        "hello\nworld\n"
    );
    assert_eq!(
        std::fs::read_to_string(ed.root.join("sub/dir/deep.txt")).expect("deep.txt"),
        "deep"
    );
    assert_eq!(
        std::fs::read_to_string(ed.root.join("old.txt")).expect("old.txt"),
        "v2"
    );
    assert_eq!(ok(&reports[3])["content"], "hello\nworld\n");
}

pub fn secret_is_refused(peer: Peer) {
    let Some(mut ed) = launch(peer, "secret_is_refused", Options::default()) else {
        return;
    };
    std::fs::write(ed.root.join(".env"), "API_KEY=hunter2\n").expect("seed");
    std::fs::write(ed.root.join("visible.txt"), "v\n").expect("seed");
    let sid = ed.open_session();
    let r = ed.root.display().to_string();
    let text = [
        format!("read {r}/.env"),
        format!("write {r}/.env API_KEY=changed"),
        format!("ext fsgate/ls {}", json!({"path": r})),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    for rep in &reports[..2] {
        assert_refused(rep, Some("secrets:dotenv"));
        let e = err(rep);
        let msg = e["message"].as_str().unwrap_or_default();
        assert!(
            !msg.contains("hunter2") && !e.to_string().contains("hunter2"),
            "content leaked: {e}"
        );
        assert!(
            msg.contains("secrets:dotenv") && !msg.contains('\n'),
            "one line naming the rule: {msg}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ed.root.join(".env")).expect(".env"),
        "API_KEY=hunter2\n"
    );
    let listing = ok(&reports[2]).to_string();
    assert!(
        listing.contains("visible.txt") && !listing.contains(".env"),
        "{listing}"
    );
}

pub fn path_outside_is_refused(peer: Peer) {
    let Some(mut ed) = launch(peer, "path_outside_is_refused", Options::default()) else {
        return;
    };
    std::fs::write(ed.outside.join("secret.txt"), "OUTSIDE-DATA\n").expect("seed");
    std::os::unix::fs::symlink(ed.outside.join("secret.txt"), ed.root.join("link.txt"))
        .expect("symlink");
    let sid = ed.open_session();
    let (r, o) = (
        ed.root.display().to_string(),
        ed.outside.display().to_string(),
    );
    let name = ed
        .outside
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let text = [
        format!("read {o}/secret.txt"),
        format!("read {r}/../{name}/secret.txt"),
        format!("read {r}/link.txt"),
        format!("write {o}/planted.txt x"),
        "read /etc/passwd".to_string(),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 5, "{reports:?}");
    for rep in &reports {
        assert_refused(rep, None);
        assert!(
            !rep.to_string().contains("OUTSIDE-DATA"),
            "content leaked: {rep}"
        );
    }
    assert!(
        !ed.outside.join("planted.txt").exists(),
        "a write escaped the workspace"
    );
}

pub fn unknown_session_is_refused(peer: Peer) {
    let Some(mut ed) = launch(peer, "unknown_session_is_refused", Options::default()) else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "a\n").expect("seed");
    let sid = ed.open_session();
    let r = ed.root.display().to_string();
    let text = [
        "session no-such-session".to_string(),
        format!("read {r}/a.txt"),
        format!("write {r}/b.txt x"),
        format!("ext fsgate/ls {}", json!({"path": r})),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 3, "{reports:?}");
    for rep in &reports {
        assert_refused(rep, Some("acp-session"));
        assert!(
            err(rep)["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no-such-session"),
            "{rep}"
        );
    }
    assert!(!ed.root.join("b.txt").exists());
    // The real session still works afterwards.
    let again = ed.prompt(&sid, &format!("read {r}/a.txt"));
    assert_eq!(ok(&again[0])["content"], "a\n");
}

pub fn session_with_cwd_outside_gets_no_file_access(peer: Peer) {
    let Some(mut ed) = launch(
        peer,
        "session_with_cwd_outside_gets_no_file_access",
        Options::default(),
    ) else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "a\n").expect("seed");
    ed.initialize(true, true);
    let outside = ed.outside.clone();
    let sid = ed.new_session_in(&outside);
    let reports = ed.prompt(&sid, &format!("read {}/a.txt", ed.root.display()));
    assert_refused(&reports[0], Some("acp-session-cwd"));
}

/// Every message the editor received: none is a file or terminal request, and all the
/// agent's requests it did get (permission) were real ones, so the check is not vacuous.
pub fn editor_never_receives_file_requests(peer: Peer) {
    let Some(mut ed) = launch(
        peer,
        "editor_never_receives_file_requests",
        Options::default(),
    ) else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "needle here\n").expect("seed");
    std::fs::write(ed.root.join(".env"), "K=V\n").expect("seed");
    let sid = ed.open_session();
    let r = ed.root.display().to_string();
    let p = |v: Value| v.to_string();
    let text = [
        format!("read {r}/a.txt 1 1"),
        format!("write {r}/w.txt written"),
        format!("read {r}/.env"),
        "read /etc/hostname".to_string(),
        format!(
            "ext fsgate/stat {}",
            p(json!({"path": format!("{r}/a.txt")}))
        ),
        format!("ext fsgate/glob {}", p(json!({"pattern": "**/*.txt"}))),
        format!("ext fsgate/grep {}", p(json!({"pattern": "needle"}))),
        format!("ext fsgate/mkdir {}", p(json!({"path": format!("{r}/d")}))),
        format!(
            "ext fsgate/edit_text_file {}",
            p(json!({"path": format!("{r}/w.txt"), "oldText": "written", "newText": "edited"}))
        ),
        format!(
            "ext fsgate/rename {}",
            p(json!({"oldPath": format!("{r}/w.txt"), "newPath": format!("{r}/d/w.txt")}))
        ),
        format!(
            "ext fsgate/rm {}",
            p(json!({"path": format!("{r}/d"), "recursive": true}))
        ),
        "terminal".to_string(),
        "permission".to_string(),
        "session other".to_string(),
        format!("read {r}/a.txt"),
    ]
    .join("\n");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 14, "{reports:?}");
    assert_eq!(ok(&reports[0])["content"], "needle here\n");
    ok(&reports[1]);
    assert_refused(&reports[2], Some("secrets:dotenv"));
    assert_refused(&reports[3], None);
    assert_eq!(ok(&reports[4])["stat"]["type"], "file");
    assert!(ok(&reports[5]).to_string().contains("a.txt"));
    assert_eq!(ok(&reports[6])["matches"][0]["lineNumber"], 1);
    for rep in &reports[7..11] {
        ok(rep);
    }
    assert!(
        !ed.root.join("d").exists() && !ed.root.join("w.txt").exists(),
        "mkdir/rename/rm ran"
    );
    assert_refused(&reports[11], Some("acp.allow_terminal"));
    assert_eq!(
        ok(&reports[12])["outcome"]["outcome"],
        "selected",
        "{:?}",
        reports[12]
    );
    assert_refused(&reports[13], Some("acp-session"));

    let lines = ed.lines();
    let mut permission_requests = 0;
    for line in &lines {
        assert!(
            line.is_object(),
            "editor got a line that is not a JSON object: {line}"
        );
        for m in methods_of(line) {
            assert!(
                !(m.starts_with("fs/") || m.starts_with("_fsgate/") || m.starts_with("terminal/")),
                "the editor received {m}: {line}"
            );
            permission_requests += usize::from(m == "session/request_permission");
        }
    }
    assert_eq!(
        permission_requests, 1,
        "the agent's other requests must pass through"
    );
}

/// The agent's first request (id 0) is in flight while the editor's `initialize` (id 0)
/// is, and the agent's later ids overlap the editor's `session/new` and prompt ids.
pub fn equal_ids_in_flight_both_ways(peer: Peer) {
    let Some(cmd) = peer.command_or_skip("equal_ids_in_flight_both_ways") else {
        return;
    };
    let probe = tempfile::NamedTempFile::new().expect("tempfile");
    let opts = Options {
        env: vec![(
            "FSGATE_PEER_INIT_PROBE".into(),
            OsString::from(probe.path()),
        )],
        ..Default::default()
    };
    let mut ed = Editor::launch(&cmd, opts);
    std::fs::write(ed.root.join("a.txt"), "l1\nl2\n").expect("seed");
    let init = ed.initialize(false, false);
    // The agent's id-0 request got fsgate's answer (no session yet), not the editor's.
    let probe = &init["_meta"]["probe"];
    assert_eq!(probe["error"]["code"], REFUSED, "{init}");
    assert_eq!(probe["error"]["data"]["rule"], "acp-session", "{init}");
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let p = root.join("a.txt").display().to_string();
    let reports = ed.prompt(&sid, &format!("parallel 6 {p}\npermission\nread {p} 2 1"));
    let contents = ok(&reports[0]).as_array().cloned().unwrap_or_default();
    assert_eq!(contents.len(), 6);
    assert!(
        contents.iter().all(|c| c["content"] == "l1\nl2\n"),
        "{contents:?}"
    );
    assert_eq!(ok(&reports[1])["outcome"]["optionId"], "allow");
    assert_eq!(ok(&reports[2])["content"], "l2\n");

    // The editor got exactly one response per request it sent (ids 0, 1, 2), and the
    // only request it got was the permission request.
    let lines = ed.lines();
    for id in 0..3 {
        let answers = lines
            .iter()
            .filter(|v| v.get("method").is_none() && v.get("id") == Some(&json!(id)))
            .count();
        assert_eq!(answers, 1, "responses with id {id}: {lines:?}");
    }
    let stray: Vec<&Value> = lines
        .iter()
        .filter(|v| v.get("method").is_none() && v["id"].as_u64().is_none_or(|i| i > 2))
        .collect();
    assert!(
        stray.is_empty(),
        "responses the editor never asked for: {stray:?}"
    );
    let requests: Vec<&Value> = lines
        .iter()
        .filter(|v| v.get("method").is_some() && v.get("id").is_some())
        .collect();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["method"], "session/request_permission");
}

pub fn stdin_eof_ends_agent_and_fsgate(peer: Peer) {
    let Some(mut ed) = launch(peer, "stdin_eof_ends_agent_and_fsgate", Options::default()) else {
        return;
    };
    let sid = ed.open_session();
    ed.prompt(&sid, "caps");
    ed.close_stdin();
    // Well inside the proxy's 5 s grace: the agent ended on EOF, it was not killed.
    let status = ed.wait_exit(Duration::from_secs(4));
    let Some(status) = status else {
        panic!(
            "fsgate still running 4 s after stdin EOF\nstderr:\n{}",
            ed.stderr()
        );
    };
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?}\nstderr:\n{}",
        ed.stderr()
    );
}

pub fn agent_exit_status_becomes_fsgates(peer: Peer) {
    let Some(mut ed) = launch(
        peer,
        "agent_exit_status_becomes_fsgates",
        Options::default(),
    ) else {
        return;
    };
    let sid = ed.open_session();
    // The agent exits mid-turn; the editor keeps its end open, as a real editor does.
    ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "exit 7"}]}),
    );
    let Some(status) = ed.wait_exit(Duration::from_secs(4)) else {
        panic!(
            "fsgate still running 4 s after its agent exited (editor stdin still open)\nstderr:\n{}",
            ed.stderr()
        );
    };
    assert_eq!(
        status.code(),
        Some(7),
        "{status:?}\nstderr:\n{}",
        ed.stderr()
    );
}

/// Issue 5, item 6: every fs request (allowed or refused), the refusals fsgate makes
/// itself (terminal, unknown session) and the lifecycle are audit records, with no
/// file content in them, and the log verifies.
pub fn audit_records_requests_and_lifecycle(peer: Peer) {
    let Some(mut ed) = launch(
        peer,
        "audit_records_requests_and_lifecycle",
        Options::default(),
    ) else {
        return;
    };
    std::fs::write(ed.root.join("a.txt"), "AUDIT-CONTENT\n").expect("seed");
    std::fs::write(ed.root.join(".env"), "K=AUDIT-SECRET\n").expect("seed");
    let sid = ed.open_session();
    let r = ed.root.display().to_string();
    let text =
        format!("read {r}/a.txt 1 1\nread {r}/.env\nterminal\nsession bogus\nread {r}/a.txt");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 4, "{reports:?}");
    ed.close_stdin();
    let status = ed.wait_exit(Duration::from_secs(4));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "stderr:\n{}",
        ed.stderr()
    );

    let records = ed.audit_records();
    let all = serde_json::to_string(&records).unwrap_or_default();
    assert!(
        !all.contains("AUDIT-CONTENT") && !all.contains("AUDIT-SECRET"),
        "file content in the audit log"
    );
    let find = |what: &str, pred: &dyn Fn(&Value) -> bool| {
        records
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no audit record for {what} in {records:#?}"))
    };
    let start = find("agent-start", &|v| {
        v["kind"] == "agent-start" && v["details"]["pid"].is_u64()
    });
    let session = find("session created", &|v| {
        v["kind"] == "session" && v["details"]["sessionId"] == sid.as_str()
    });
    let read = find("allowed read", &|v| {
        v["kind"] == "request"
            && v["op"] == "read_text_file"
            && v["path"] == "a.txt"
            && v["decision"] == "allow"
    });
    let secret = find("refused secret", &|v| {
        v["kind"] == "request" && v["path"] == ".env" && v["rule"] == "secrets:dotenv"
    });
    let terminal = find("terminal refusal", &|v| {
        v["kind"] == "request" && v["op"].as_str().is_some_and(|o| o.starts_with("terminal/"))
    });
    let bogus = find("unknown-session refusal", &|v| {
        v["kind"] == "request" && v["session"] == "bogus"
    });
    let exit = find("agent-exit", &|v| {
        v["kind"] == "agent-exit" && v["details"]["code"] == 0
    });
    let order = [start, session, read, secret, terminal, bogus, exit];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "audit records out of order: {order:?}"
    );

    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["audit", "verify"])
        .arg(ed.state.join("audit.jsonl"))
        .output()
        .expect("run fsgate audit verify");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// One `#[test]` per check for the SDK peer `$peer`.
macro_rules! sdk_tests {
    ($peer:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                super::$name($peer);
            }
        )*
    };
}

macro_rules! all_sdk_tests {
    ($peer:expr) => {
        sdk_tests!($peer;
            capabilities_follow_the_default_policy,
            capabilities_follow_the_readonly_policy,
            reads_with_line_and_limit,
            writes_create_files_on_disk,
            secret_is_refused,
            path_outside_is_refused,
            unknown_session_is_refused,
            session_with_cwd_outside_gets_no_file_access,
            editor_never_receives_file_requests,
            equal_ids_in_flight_both_ways,
            stdin_eof_ends_agent_and_fsgate,
            agent_exit_status_becomes_fsgates,
            audit_records_requests_and_lifecycle,
        );
    };
}

/// tests/peers/acp/agent.py on PyPI `agent-client-protocol`.
mod python {
    use super::super::editor::Peer;
    all_sdk_tests!(Peer::Python);
}

/// tests/peers/acp/agent.mjs on npm `@agentclientprotocol/sdk`.
mod typescript {
    use super::super::editor::Peer;
    all_sdk_tests!(Peer::TypeScript);
}
