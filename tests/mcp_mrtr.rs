//! `ask` rules on the stateless (2026-07-28) wire, over stdio and Streamable HTTP: a
//! client whose request declares elicitation gets an `InputRequiredResult` (the question
//! as a form, a `requestState`), and its retry with the person's answer is decided by
//! it; a state serves one retry; a client that declared nothing is refused as before.
//! Stateless list results carry `ttlMs` and `cacheScope`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp_harness::{Dirs, McpGate, modern_meta};
use crate::mcp_http::{HttpGate, post};

/// Writes under ci/ ask; everything else is allowed.
const POLICY: &str = r#"version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "list", "write", "delete"]
paths = ["**"]
reason = "the workspace"

[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write"]
paths = ["ci/**"]
reason = "CI configuration needs a look"
"#;

/// The stateless `_meta`, declaring form elicitation if `asks`.
fn meta(asks: bool) -> Value {
    let mut m = modern_meta();
    if asks {
        m["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"form": {}}});
    }
    m
}

/// A stateless `tools/call` of write_text_file.
fn write(id: u64, path: &str, content: &str, asks: bool) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "_meta": meta(asks), "name": "write_text_file",
        "arguments": {"path": path, "content": content}}})
}

/// `call` retried with `state` and the person's `decision`.
fn retry(mut call: Value, id: u64, state: &Value, decision: &str) -> Value {
    call["id"] = id.into();
    call["params"]["requestState"] = state.clone();
    call["params"]["inputResponses"] =
        json!({"fsgate_ask": {"action": "accept", "content": {"decision": decision}}});
    call
}

/// The `InputRequiredResult` in `answer`: its form's message, and its state.
fn input_required(answer: &Value) -> (String, Value) {
    let r = &answer["result"];
    assert_eq!(r["resultType"], "input_required", "{answer}");
    let ask = &r["inputRequests"]["fsgate_ask"];
    assert_eq!(ask["method"], "elicitation/create", "{answer}");
    assert_eq!(ask["params"]["mode"], "form", "{answer}");
    assert_eq!(
        ask["params"]["requestedSchema"]["required"][0], "decision",
        "{answer}"
    );
    let message = ask["params"]["message"].as_str().unwrap_or_default();
    assert!(r["requestState"].is_string(), "{answer}");
    (message.to_string(), r["requestState"].clone())
}

/// The rounds, the same on either transport, on the workspace `root` whose audit log
/// is `log`; `send` sends one message and returns its answer.
fn rounds((root, log): (&Path, &Path), send: &mut dyn FnMut(&Value) -> Value) {
    // A list result on this wire says how long it may be cached, and by whom.
    let list =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta(true)}});
    let tools = send(&list);
    assert!(tools["result"]["ttlMs"].is_u64(), "{tools}");
    assert_eq!(tools["result"]["cacheScope"], "private", "{tools}");
    // Round one: the question, nothing written.
    let call = write(2, "ci/a.yml", "on: push\n", true);
    let (message, state) = input_required(&send(&call));
    assert!(
        message.contains("ci/a.yml") && message.contains("ask-ci"),
        "{message}"
    );
    assert!(!root.join("ci/a.yml").exists());
    // Round two: allowed once, written.
    let done = send(&retry(call.clone(), 3, &state, "allow_once"));
    assert_eq!(done["result"]["isError"], false, "{done}");
    let written = std::fs::read_to_string(root.join("ci/a.yml")).expect("written");
    assert_eq!(written, "on: push\n");
    // The same state again: one "allow once" allows one call.
    let replay = send(&retry(call, 4, &state, "allow_once"));
    assert_eq!(replay["error"]["code"], -32602, "{replay}");
    // A state for another call is refused; a "reject" refuses.
    let other = write(5, "ci/b.yml", "x", true);
    let (_, state_b) = input_required(&send(&other));
    let forged = send(&retry(
        write(6, "ci/c.yml", "x", true),
        6,
        &state_b,
        "allow_once",
    ));
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    let rejected = send(&retry(other, 7, &state_b, "reject_once"));
    assert_eq!(rejected["result"]["isError"], true, "{rejected}");
    assert!(!root.join("ci/b.yml").exists());
    // A client that declared no elicitation is not asked: refused, naming the rule.
    let plain = send(&write(8, "ci/d.yml", "x", false));
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert!(
        plain["result"]
            .get("resultType")
            .is_none_or(|t| t == "complete"),
        "{plain}"
    );
    check_records(log);
}

/// The first round is a refusal whose record says the question went back to the
/// client; the retry's record has the person's answer.
fn check_records(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let writes: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["path"] == "ci/a.yml")
        .collect();
    assert_eq!(writes.len(), 2, "{writes:#?}");
    let first = &writes[0]["details"]["asked"][0];
    assert_eq!(first["answer"], "unanswered", "{:#?}", writes[0]);
    assert!(
        first["note"]
            .as_str()
            .unwrap_or_default()
            .contains("InputRequiredResult"),
        "{first}"
    );
    assert_eq!(writes[1]["decision"], "allow", "{:#?}", writes[1]);
    assert_eq!(
        writes[1]["details"]["asked"][0]["answer"], "allow_once",
        "{:#?}",
        writes[1]
    );
    let b = records
        .iter()
        .rfind(|r| r["kind"] == "request" && r["path"] == "ci/b.yml")
        .expect("ci/b.yml record");
    assert_eq!(b["details"]["asked"][0]["answer"], "reject_once", "{b:#?}");
}

#[test]
fn a_stateless_ask_goes_back_to_the_client_as_input_required_over_stdio() {
    let mut g = McpGate::start(Some(POLICY));
    let (root, log): (PathBuf, PathBuf) = (g.dirs.root.clone(), g.dirs.audit_log());
    let mut send = |msg: &Value| {
        let id = msg["id"].as_u64().expect("id");
        g.send_line(&msg.to_string());
        g.response(id)
    };
    rounds((&root, &log), &mut send);
    assert!(g.finish().success());
}

#[test]
fn a_stateless_ask_goes_back_to_the_client_as_input_required_over_http() {
    let dirs = Dirs::new();
    let g = HttpGate::start(&dirs, Some(POLICY));
    let bearer = g.bearer();
    let mut send = |msg: &Value| stateless_post(&g, &bearer, msg);
    rounds((&dirs.root, &dirs.audit_log()), &mut send);
}

/// The official MCP Python SDK 2.x (`Client`, which drives the rounds itself with its
/// elicitation callback) writes one file the callback allows and none it rejects.
fn sdk_rounds(test: &str, over_http: bool) {
    let dirs = Dirs::new();
    let policy = dirs.state.join("mrtr-policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let policy = policy.to_string_lossy().into_owned();
    let gate = over_http.then(|| HttpGate::start(&dirs, Some(POLICY)));
    let (url, token) = match &gate {
        Some(g) => (g.url(), g.token.clone().expect("token printed")),
        None => (String::new(), String::new()),
    };
    let mut extra = vec!["--policy", policy.as_str()];
    if over_http {
        extra.extend(["--url", url.as_str(), "--token", token.as_str()]);
    }
    let run =
        crate::mcp_peers::run_driver("FSGATE_MCP2_PYTHON", "mcp2", "mrtr_v2.py", &extra, &dirs);
    let Some(summary) = run else {
        eprintln!("{test}: skipped");
        return;
    };
    assert_eq!(summary["protocolVersion"], "2026-07-28", "{summary}");
    assert_eq!(summary["yes"]["isError"], false, "{summary}");
    assert_eq!(summary["no"]["isError"], true, "{summary}");
    let read = |rel: &str| std::fs::read_to_string(dirs.root.join(rel)).ok();
    assert_eq!(read("ci/yes.yml").as_deref(), Some("yes\n"));
    assert!(read("ci/no.yml").is_none());
    let shown = summary["shown"].as_array().expect("shown").clone();
    assert_eq!(shown.len(), 2, "{summary}");
    assert!(
        shown[0].as_str().unwrap_or_default().contains("ask-ci"),
        "{summary}"
    );
}

#[test]
fn the_python_sdk_answers_input_required_over_stdio() {
    sdk_rounds("the_python_sdk_answers_input_required_over_stdio", false);
}

#[test]
fn the_python_sdk_answers_input_required_over_http() {
    sdk_rounds("the_python_sdk_answers_input_required_over_http", true);
}

/// A stateless answer decides its own call only: the question offers no "allow for this
/// session" (the wire keeps no session), and an `allow_always` a client sends anyway
/// allows that call and nothing after it, for this client or any other of the token.
fn one_answer_one_call(send: &mut dyn FnMut(&Value) -> Value, root: &Path) {
    let call = write(20, "ci/s.yml", "one\n", true);
    let first = send(&call);
    let (_, state) = input_required(&first);
    let options = &first["result"]["inputRequests"]["fsgate_ask"]["params"]["requestedSchema"]["properties"]
        ["decision"]["oneOf"];
    let offered: Vec<String> = options
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|c| c["const"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let done = send(&retry(call, 21, &state, "allow_always"));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        std::fs::read_to_string(root.join("ci/s.yml")).unwrap_or_default(),
        "one\n"
    );
    // A later call that declares no elicitation is refused, as before any answer.
    let plain = send(&write(22, "ci/s.yml", "two\n", false));
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    // One that declares it is asked again.
    input_required(&send(&write(23, "ci/t.yml", "three\n", true)));
    assert!(!root.join("ci/t.yml").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("ci/s.yml")).unwrap_or_default(),
        "one\n"
    );
    assert_eq!(offered, ["allow_once", "reject_once"], "{first}");
}

#[test]
fn a_stateless_allow_always_allows_its_own_call_only_over_stdio() {
    let mut g = McpGate::start(Some(POLICY));
    let root = g.dirs.root.clone();
    let mut send = |msg: &Value| {
        let id = msg["id"].as_u64().expect("id");
        g.send_line(&msg.to_string());
        g.response(id)
    };
    one_answer_one_call(&mut send, &root);
    assert!(g.finish().success());
}

#[test]
fn a_stateless_allow_always_allows_its_own_call_only_over_http() {
    let dirs = Dirs::new();
    let g = HttpGate::start(&dirs, Some(POLICY));
    let bearer = g.bearer();
    // Each request its own connection: the principal's stateless door is shared.
    let mut send = |msg: &Value| stateless_post(&g, &bearer, msg);
    one_answer_one_call(&mut send, &dirs.root);
}

/// One stateless 2026-07-28 request over HTTP, on a connection of its own: its answer
/// (an error comes with 400, a result with 200: the body is the answer).
fn stateless_post(g: &HttpGate, bearer: &str, msg: &Value) -> Value {
    let auth = ("Authorization", bearer);
    let v = ("MCP-Protocol-Version", "2026-07-28");
    let reply = post(g, msg, &[auth, v]);
    let answer = reply.json();
    assert!(answer.is_object(), "{} {}", reply.status, reply.body);
    answer
}
