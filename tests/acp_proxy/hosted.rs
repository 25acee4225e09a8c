//! The MCP server `fsgate acp` hosts for its agent: added to each session the agent
//! opens (the editor's own entries relayed unchanged), over the ACP connection itself
//! when the agent takes the draft MCP-over-ACP transport, else over Streamable HTTP when
//! it takes that, else as a command (`fsgate mcp-connect`); served by the gateway, so
//! the policy applies and every call is recorded under the ACP session's id, also when
//! the agent connects before it has named the session. Under `--confine-agent` it is
//! the agent's only way in. The agent is `fsgate-test-acp-agent` (feature test-bins),
//! which connects during `session/new` as Gemini CLI does.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{Value, json};

use super::editor::{Editor, Options, ok, repo};

/// The test agent, with `args`; None (a failure under CI) if it was not built.
fn agent(test: &str, args: &[&str]) -> Option<Vec<OsString>> {
    let bin = option_env!("CARGO_BIN_EXE_fsgate-test-acp-agent").unwrap_or_default();
    if bin.is_empty() || !Path::new(bin).exists() {
        crate::common::skip_or_fail(test, "built without `--features test-bins`");
        return None;
    }
    Some(
        std::iter::once(OsString::from(bin))
            .chain(args.iter().map(OsString::from))
            .collect(),
    )
}

/// The default policy with `extra` appended.
fn policy(extra: &str) -> String {
    let text = std::fs::read_to_string(repo().join("policies/default.toml")).expect("default.toml");
    format!("{text}\n{extra}\n")
}

/// Opens a session listing one MCP server of the editor's own; its id.
fn open(ed: &mut Editor) -> String {
    ed.initialize(false, false);
    let root = ed.root.clone();
    let own = json!({"name": "editor-own", "command": "/bin/true", "args": ["x"], "env": [{"name": "K", "value": "v"}]});
    let r = ed.call("session/new", json!({"cwd": root, "mcpServers": [own]}));
    r["sessionId"].as_str().expect("sessionId").to_string()
}

/// The records of the hosted server.
fn hosted_records(ed: &Editor) -> Vec<Value> {
    ed.audit_records()
        .into_iter()
        .filter(|r| r["transport"] == "acp-mcp")
        .collect()
}

/// Reads, writes and a refused secret through the hosted server; checks the entry the
/// agent got, the files, and the records. `reach`: "acp", "http" or "stdio".
fn reads_and_writes_through_the_gateway(ed: &mut Editor, reach: &str) {
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    std::fs::write(ed.root.join(".env"), "TOKEN=hunter2\n").expect("seed");
    let sid = open(ed);
    let env = ed.root.join(".env").display().to_string();
    let text = [
        "mcp-servers".to_string(),
        "mcp-entry".into(),
        "mcp-read a.txt".into(),
        format!("mcp-read {env}"),
        "mcp-write made.txt written by the agent".into(),
    ];
    let reports = ed.prompt(&sid, &text.join("\n"));
    assert_eq!(
        reports.len(),
        text.len(),
        "{reports:?}\nstderr:\n{}",
        ed.stderr()
    );
    // The editor's entry reached the agent unchanged, the gateway's beside it.
    let servers = ok(&reports[0]).as_array().expect("servers").clone();
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert_eq!(servers[0]["name"], "editor-own");
    assert_eq!(servers[0]["command"], "/bin/true");
    assert_eq!(servers[0]["envNames"], json!(["K"]));
    let entry = ok(&reports[1]);
    assert_eq!(entry["name"], "fsgate");
    assert_eq!(entry["type"], reach, "{entry}");
    match reach {
        "acp" => {
            assert_eq!(entry["hasServerId"], true, "{entry}");
            assert!(
                entry["url"].is_null() && entry["command"].is_null(),
                "{entry}"
            );
        }
        "http" => {
            let url = entry["url"].as_str().expect("url");
            assert!(
                url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
                "{url}"
            );
            assert_eq!(entry["headerNames"], json!(["Authorization"]));
        }
        _ => {
            assert_eq!(entry["command"], env!("CARGO_BIN_EXE_fsgate"), "{entry}");
            assert_eq!(entry["args"][0], "mcp-connect");
            assert_eq!(entry["envNames"], json!(["FSGATE_MCP_TOKEN"]));
        }
    }
    let read = ok(&reports[2]);
    assert_eq!(read["isError"], Value::Bool(false), "{read}");
    assert_eq!(read["content"][0]["text"], "inside\n");
    let secret = ok(&reports[3]);
    assert_eq!(secret["isError"], true, "{secret}");
    let said = secret["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("secrets:dotenv") && !said.contains("hunter2"),
        "{said}"
    );
    assert_eq!(
        ok(&reports[4])["isError"],
        Value::Bool(false),
        "{:?}",
        reports[4]
    );
    let made = std::fs::read_to_string(ed.root.join("made.txt")).expect("written");
    assert_eq!(made, "written by the agent");
    check_records(ed, &sid, reach);
}

/// Every tool call is recorded under the ACP session's id with its decision; what came
/// before the agent named the session carries the provisional name its `session`
/// record gives.
fn check_records(ed: &Editor, sid: &str, reach: &str) {
    let records = hosted_records(ed);
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["path"].is_string())
        .collect();
    let find = |op: &str, path: &str| {
        calls
            .iter()
            .find(|r| r["op"] == op && r["path"] == path)
            .unwrap_or_else(|| panic!("no {op} {path} record in {records:#?}"))
    };
    let read = find("read_text_file", "a.txt");
    assert_eq!(
        (&read["session"], &read["decision"]),
        (&json!(sid), &json!("allow"))
    );
    let env = find("read_text_file", ".env");
    assert_eq!(
        (&env["session"], &env["decision"]),
        (&json!(sid), &json!("deny"))
    );
    assert_eq!(env["rule"], "secrets:dotenv");
    let write = find("write_text_file", "made.txt");
    assert_eq!(write["session"], sid);
    assert!(calls.iter().all(|r| r["session"] == sid), "{calls:#?}");
    let session = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "session" && r["details"]["sessionId"] == sid)
        .expect("session record");
    let mcp = &session["details"]["mcpServer"];
    assert_eq!(
        (&mcp["name"], &mcp["transport"]),
        (&json!("fsgate"), &json!(reach))
    );
    // The agent connected before it answered session/new: its handshake carries the
    // provisional name the session record names.
    let provisional = mcp["provisionalSession"]
        .as_str()
        .expect("provisional name");
    let init = records
        .iter()
        .find(|r| r["op"] == "initialize")
        .expect("initialize record");
    assert_eq!(init["session"], provisional, "{records:#?}");
    let raw = std::fs::read_to_string(ed.state.join("audit.jsonl")).expect("log");
    assert!(!raw.contains("Bearer "), "a secret reached the log");
}

#[test]
fn an_agent_that_takes_http_gets_the_gateway_over_http() {
    let test = "an_agent_that_takes_http_gets_the_gateway_over_http";
    let Some(cmd) = agent(test, &["--mcp", "http"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    reads_and_writes_through_the_gateway(&mut ed, "http");
}

#[test]
fn an_agent_that_takes_mcp_over_acp_gets_the_gateway_on_its_acp_connection() {
    let test = "an_agent_that_takes_mcp_over_acp_gets_the_gateway_on_its_acp_connection";
    let Some(cmd) = agent(test, &["--mcp", "acp"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    reads_and_writes_through_the_gateway(&mut ed, "acp");
    // The editor never saw the agent's MCP messages: fsgate took them.
    let seen: Vec<Value> = ed
        .lines()
        .into_iter()
        .filter(|l| l["method"].as_str().is_some_and(|m| m.starts_with("mcp/")))
        .collect();
    assert!(seen.is_empty(), "{seen:?}");
    let sid = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "session")
        .and_then(|r| r["details"]["sessionId"].as_str().map(str::to_string))
        .expect("session");
    let reports = ed.prompt(
        &sid,
        "mcp-disconnect
mcp-read a.txt",
    );
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(ok(&reports[0]), &json!({}), "{:?}", reports[0]);
    // A connection ended is no connection of fsgate's any more: relayed to the editor,
    // which knows nothing of it.
    assert!(reports[1].get("error").is_some(), "{:?}", reports[1]);
}

/// The hosted server's own requests travel to the agent as `mcp/message` from fsgate and
/// their answers come back: the roots the agent gives over ACP narrow its calls.
#[test]
fn the_gateway_asks_an_agent_over_acp_for_its_roots() {
    let test = "the_gateway_asks_an_agent_over_acp_for_its_roots";
    let Some(cmd) = agent(test, &["--mcp", "acp", "--mcp-roots", "src"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    std::fs::create_dir(ed.root.join("src")).expect("mkdir");
    std::fs::write(ed.root.join("src/in.txt"), "in src\n").expect("seed");
    std::fs::write(ed.root.join("top.txt"), "at the top\n").expect("seed");
    let sid = open(&mut ed);
    let reports = ed.prompt(&sid, "mcp-read src/in.txt\nmcp-read top.txt");
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert_eq!(
        ok(&reports[0])["content"][0]["text"],
        "in src\n",
        "{reports:?}"
    );
    assert_eq!(
        ok(&reports[1])["isError"],
        true,
        "outside the roots: {reports:?}"
    );
    let roots = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "roots" && r["transport"] == "acp-mcp")
        .expect("a roots record");
    assert!(roots.to_string().contains("/src"), "{roots}");
}

#[test]
fn an_editors_own_acp_server_is_left_to_the_editor() {
    let test = "an_editors_own_acp_server_is_left_to_the_editor";
    let Some(cmd) = agent(test, &["--mcp", "acp"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    ed.initialize(false, false);
    let root = ed.root.clone();
    let own = json!({"type": "acp", "name": "editor-tools", "serverId": "11111111-2222-4333-8444-555555555555"});
    let r = ed.call("session/new", json!({"cwd": root, "mcpServers": [own]}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let reports = ed.prompt(
        &sid,
        "mcp-servers
acp-connect 11111111-2222-4333-8444-555555555555",
    );
    assert_eq!(reports.len(), 2, "{reports:?}");
    let servers = ok(&reports[0]).as_array().expect("servers").clone();
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert_eq!(
        (&servers[0]["name"], &servers[0]["type"]),
        (&json!("editor-tools"), &json!("acp"))
    );
    assert_eq!(
        (&servers[1]["name"], &servers[1]["type"]),
        (&json!("fsgate"), &json!("acp"))
    );
    // The editor got the agent's mcp/connect for its own server (and, being this test's
    // editor, answered "method not found").
    let asked: Vec<Value> = ed
        .lines()
        .into_iter()
        .filter(|l| l["method"] == "mcp/connect")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["params"]["serverId"],
        "11111111-2222-4333-8444-555555555555"
    );
    assert_eq!(reports[1]["error"]["code"], -32601, "{:?}", reports[1]);
}

#[test]
fn an_agent_without_http_gets_the_bridge_command() {
    let test = "an_agent_without_http_gets_the_bridge_command";
    let Some(cmd) = agent(test, &[]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    reads_and_writes_through_the_gateway(&mut ed, "stdio");
}

/// Under --confine-agent with no network but the gateway's port: the workspace is shut
/// to the agent's own calls, the hosted server works, and no other port is reachable.
fn confined(reach: &str, args: &[&str], test: &str) {
    let Some(cmd) = agent(test, args) else {
        return;
    };
    let mut doc: toml::Table = policy("").parse().expect("default.toml parses");
    let agent = doc
        .get_mut("agent")
        .and_then(toml::Value::as_table_mut)
        .expect("[agent]");
    agent.insert("network".into(), "none".into());
    let opts = Options {
        policy_text: Some(toml::to_string(&doc).expect("policy text")),
        confine: true,
        ..Default::default()
    };
    let mut ed = Editor::launch(&cmd, opts);
    reads_and_writes_through_the_gateway(&mut ed, reach);
    // A port that listens, other than the gateway's.
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = other.local_addr().expect("addr").port();
    let sid = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "session")
        .and_then(|r| r["details"]["sessionId"].as_str().map(str::to_string))
        .expect("session");
    let a = ed.root.join("a.txt").display().to_string();
    let text = format!("open {a}\ntcp 127.0.0.1 {port}\nmcp-read {a}");
    let reports = ed.prompt(&sid, &text);
    assert_eq!(reports.len(), 3, "{reports:?}\nstderr:\n{}", ed.stderr());
    // The workspace through fsgate's view (docs/run.md).
    assert_eq!(ok(&reports[0])["opened"], true, "{:?}", reports[0]);
    assert_eq!(ok(&reports[1])["connected"], false, "{:?}", reports[1]);
    assert_eq!(ok(&reports[2])["content"][0]["text"], "inside\n");
    let start = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "agent-start")
        .expect("agent-start");
    let gateway_port = start["details"]["mcpServer"]["port"]
        .as_u64()
        .expect("port");
    assert_eq!(
        start["details"]["agentPlan"]["network"],
        json!({"ports": [gateway_port]}),
        "{start}"
    );
}

#[test]
fn a_confined_agent_reaches_the_gateway_over_http_and_nothing_else() {
    let test = "a_confined_agent_reaches_the_gateway_over_http_and_nothing_else";
    confined("http", &["--mcp", "http"], test);
}

#[test]
fn a_confined_agent_runs_the_bridge_command() {
    confined("stdio", &[], "a_confined_agent_runs_the_bridge_command");
}

#[test]
fn a_confined_agent_reaches_the_gateway_over_its_acp_connection() {
    let test = "a_confined_agent_reaches_the_gateway_over_its_acp_connection";
    confined("acp", &["--mcp", "acp"], test);
}

#[test]
fn an_ask_rule_met_through_the_hosted_server_asks_the_editor_for_the_session() {
    let test = "an_ask_rule_met_through_the_hosted_server_asks_the_editor_for_the_session";
    ask_rule_asks_the_editor(test, "http");
}

#[test]
fn an_ask_rule_met_over_the_acp_connection_asks_the_editor_for_the_session() {
    let test = "an_ask_rule_met_over_the_acp_connection_asks_the_editor_for_the_session";
    ask_rule_asks_the_editor(test, "acp");
}

fn ask_rule_asks_the_editor(test: &str, reach: &str) {
    let Some(cmd) = agent(test, &["--mcp", reach]) else {
        return;
    };
    let rule =
        "[[rule]]\nid = \"ask-notes\"\neffect = \"ask\"\nops = [\"write\"]\npaths = [\"notes/**\"]";
    let opts = Options {
        policy_text: Some(policy(rule)),
        ..Default::default()
    };
    let mut ed = Editor::launch(&cmd, opts);
    let sid = open(&mut ed);
    let reports = ed.prompt(&sid, "mcp-write notes/n.txt asked first");
    assert_eq!(
        ok(&reports[0])["isError"],
        Value::Bool(false),
        "{reports:?}"
    );
    let asked: Vec<Value> = ed
        .lines()
        .into_iter()
        .filter(|l| l["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["params"]["sessionId"], sid);
    assert_eq!(
        asked[0]["params"]["toolCall"]["_meta"]["fsgate"]["rule"],
        "ask-notes"
    );
    let written = std::fs::read_to_string(ed.root.join("notes/n.txt")).expect("written");
    assert_eq!(written, "asked first");
    if reach == "acp" {
        stateless_ask_asks_the_editor(&mut ed, &sid);
    }
}

/// A stateless (2026-07-28) call of the hosted server asks the editor too, for the ACP
/// session, and is recorded under it.
fn stateless_ask_asks_the_editor(ed: &mut Editor, sid: &str) {
    let reports = ed.prompt(sid, "mcp-write26 notes/m.txt stateless too");
    assert_eq!(
        ok(&reports[0])["isError"],
        Value::Bool(false),
        "{reports:?}"
    );
    let asked: Vec<Value> = ed
        .lines()
        .into_iter()
        .filter(|l| l["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[1]["params"]["sessionId"], sid);
    let written = std::fs::read_to_string(ed.root.join("notes/m.txt")).expect("written");
    assert_eq!(written, "stateless too");
    let record = ed
        .audit_records()
        .into_iter()
        .rfind(|r| r["kind"] == "request" && r["path"] == "notes/m.txt")
        .expect("record");
    assert_eq!(record["session"], sid, "{record}");
}

#[test]
fn check_sandbox_names_the_gateway_port() {
    let test = "check_sandbox_names_the_gateway_port";
    let Some(cmd) = agent(test, &[]) else {
        return;
    };
    let ws = tempfile::tempdir().expect("tempdir");
    let state = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .arg("acp")
        .arg("--workspace")
        .arg(ws.path())
        .arg("--audit-log")
        .arg(state.path().join("audit.jsonl"))
        .args(["--confine-agent", "--check-sandbox", "--"])
        .args(&cmd)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("fsgate's MCP server for the agent: 127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fsgate mcp-connect: the agent's bridge to fsgate's MCP server"),
        "{stdout}"
    );
}

#[test]
fn acp_v2_where_the_agent_offers_it_and_the_hosted_server_is_the_door() {
    let test = "acp_v2_where_the_agent_offers_it_and_the_hosted_server_is_the_door";
    let Some(cmd) = agent(test, &["--mcp", "http", "--acp-version", "2"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    let init = ed.call(
        "initialize",
        json!({"protocolVersion": 2, "clientCapabilities": {}, "clientInfo": {"name": "v2-editor", "version": "0"}}),
    );
    assert_eq!(init["protocolVersion"], 2, "{init}");
    assert_eq!(init["_meta"]["fsgate"]["acpProtocolVersion"], 2, "{init}");
    let root = ed.root.clone();
    let r = ed.call("session/new", json!({"cwd": root, "mcpServers": []}));
    let sid = r["sessionId"].as_str().expect("sessionId").to_string();
    let a = ed.root.join("a.txt").display().to_string();
    let reports = ed.prompt(&sid, &format!("init-params\nread {a}\nmcp-read {a}"));
    assert_eq!(reports.len(), 3, "{reports:?}");
    // v2 has no fs capability: nothing was added to the editor's initialize.
    assert_eq!(
        ok(&reports[0])["clientCapabilities"],
        json!({}),
        "{:?}",
        reports[0]
    );
    assert_eq!(
        reports[1]["error"]["code"], -32601,
        "fs/* is not v2: {:?}",
        reports[1]
    );
    assert_eq!(ok(&reports[2])["content"][0]["text"], "inside\n");
    let session = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "session")
        .expect("session record");
    assert_eq!(session["details"]["acpProtocolVersion"], 2);
}

#[test]
fn an_editor_on_v1_keeps_v1_with_an_agent_that_speaks_v2() {
    let test = "an_editor_on_v1_keeps_v1_with_an_agent_that_speaks_v2";
    let Some(cmd) = agent(test, &["--acp-version", "2"]) else {
        return;
    };
    let mut ed = Editor::launch(&cmd, Options::default());
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    let init = ed.initialize(true, true);
    assert_eq!(init["protocolVersion"], 1, "{init}");
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let a = ed.root.join("a.txt").display().to_string();
    let reports = ed.prompt(&sid, &format!("init-params\nread {a}"));
    assert_eq!(
        ok(&reports[0])["clientCapabilities"]["fs"]["readTextFile"],
        true
    );
    assert_eq!(ok(&reports[1])["content"], "inside\n");
}

/// A session whose `cwd` lies outside every workspace has no file access: its `fs/*`
/// requests and its calls to the MCP server hosted for it are refused alike (rule
/// `acp-session-cwd`), with one workspace and with several, also when its
/// `additionalDirectories` name a workspace; nothing is read or written.
#[test]
fn a_session_without_file_access_gets_none_through_the_hosted_server() {
    let test = "a_session_without_file_access_gets_none_through_the_hosted_server";
    for (reach, several) in [("http", false), ("acp", true), ("http", true)] {
        let Some(cmd) = agent(test, &["--mcp", reach]) else {
            return;
        };
        let dir = tempfile::Builder::new()
            .prefix("fsgate-second-")
            .tempdir()
            .expect("tempdir");
        let second = dir.path().canonicalize().expect("canonical");
        std::fs::write(second.join("c.txt"), "in the second\n").expect("seed");
        let opts = Options {
            workspaces: several.then(|| second.clone().into()).into_iter().collect(),
            ..Default::default()
        };
        let mut ed = Editor::launch(&cmd, opts);
        std::fs::write(ed.root.join("a.txt"), "in the first\n").expect("seed");
        ed.initialize(true, true);
        let extra = match several {
            true => json!([second]),
            false => json!([ed.root]),
        };
        let r = ed.call(
            "session/new",
            json!({"cwd": ed.outside, "mcpServers": [], "additionalDirectories": extra}),
        );
        let sid = r["sessionId"].as_str().expect("sessionId").to_string();
        let (a, c) = (ed.root.join("a.txt"), second.join("c.txt"));
        let b = ed.root.join("b.txt");
        let reports = ed.prompt(
            &sid,
            &format!(
                "read {a}\nmcp-read {a}\nmcp-read {c}\nmcp-write {b} x\nmcp-x list_allowed_directories {{}}",
                a = a.display(),
                b = b.display(),
                c = c.display()
            ),
        );
        assert_eq!(reports.len(), 5, "{reports:?}");
        for r in &reports {
            let text = r.to_string();
            assert!(
                text.contains("acp-session-cwd") && !text.contains("in the "),
                "{reach} several={several}: {r}\n{}",
                ed.stderr()
            );
        }
        assert!(!b.exists());
    }
}
