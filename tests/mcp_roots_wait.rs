//! A 2025-era session that declared `roots`: a call that needs them waits for them by
//! itself. The server asks for them (`roots/list`) when a call needs them, even before
//! `notifications/initialized`; while calls wait, the reader serves everything else at
//! once (`ping`, stateless calls, the client's `roots/list` answer); and the end of the
//! input ends the process at once, whatever still waits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, modern_meta};

/// What "at once" is here: far below the 5 s a `roots/list` is given and the 15 s a
/// waiting call was held.
const PROMPT: Duration = Duration::from_secs(4);

fn uri(path: &str) -> String {
    format!("file://{path}")
}

/// `initialize` declaring roots, and no `notifications/initialized`.
fn declare_roots(g: &mut McpGate) {
    let init = g.call(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
               "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert!(init["protocolVersion"].is_string(), "{init}");
}

fn read(path: &str) -> Value {
    json!({"name": "read_text_file", "arguments": {"path": path}})
}

fn answered(g: &McpGate, id: u64) -> Value {
    g.try_response(id, PROMPT)
        .unwrap_or_else(|| panic!("request {id} not answered at once; stderr:\n{}", g.stderr()))
}

#[test]
fn a_call_waiting_for_roots_asks_for_them_and_holds_nothing_else() {
    let mut g = McpGate::start(None);
    g.dirs.put("docs/a.md", "in the root\n");
    g.dirs.put("b.txt", "outside the root\n");
    declare_roots(&mut g);
    g.request(1, "tools/call", read("b.txt"));
    g.request(2, "tools/call", read("docs/a.md"));
    // Far more calls than a connection holds in flight: none holds the reader.
    for id in 100..400 {
        g.request(id, "tools/call", read("docs/a.md"));
    }
    g.request(3, "ping", json!({}));
    assert!(answered(&g, 3)["result"].is_object());
    let stateless = json!({"_meta": modern_meta(), "name": "read_text_file",
                           "arguments": {"path": "b.txt"}});
    g.request(4, "tools/call", stateless);
    let s = answered(&g, 4);
    assert_eq!(s["result"]["isError"], false, "{s}");
    // The calls that need the roots asked for them.
    let ask = g.server_request("roots/list", PROMPT);
    let ask = ask.unwrap_or_else(|| panic!("no roots/list sent; stderr:\n{}", g.stderr()));
    let roots = json!([{"uri": uri(&g.dirs.abs("docs"))}]);
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": roots}});
    g.send_line(&reply.to_string());
    let outside = answered(&g, 1);
    assert_eq!(outside["result"]["isError"], true, "{outside}");
    let inside = answered(&g, 2);
    assert_eq!(inside["result"]["isError"], false, "{inside}");
    for id in 100..400 {
        assert!(answered(&g, id).is_object());
    }
    assert!(g.finish().success());
}

#[test]
fn the_end_of_input_ends_a_session_whose_calls_wait_for_roots() {
    let mut g = McpGate::start(None);
    g.dirs.put("docs/a.md", "x\n");
    declare_roots(&mut g);
    for id in 1..=40 {
        g.request(id, "tools/call", read("docs/a.md"));
    }
    g.request(41, "ping", json!({}));
    assert!(answered(&g, 41)["result"].is_object());
    g.close_input();
    let deadline = Instant::now() + PROMPT;
    while g.exited().is_none() {
        assert!(
            Instant::now() < deadline,
            "fsgate still runs after its input ended; stderr:\n{}",
            g.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every call got an answer: none was served without the roots it waited for.
    for id in 1..=40 {
        let a = answered(&g, id);
        assert!(
            a["error"].is_object() || a["result"]["isError"] == true,
            "served without its roots: {a}"
        );
    }
}

/// Over HTTP: a session that declared roots, sent no `initialized` and never answers
/// `roots/list` holds no other request. Its four calls wait side by side, each ended
/// within the 5 s a `roots/list` is given; meanwhile its `ping` and another session's
/// call are answered at once. (Before 16f8387 no call was answered within 20 s.)
#[test]
fn over_http_calls_waiting_for_roots_hold_no_other_request() {
    use crate::mcp_http::{HttpGate, post};
    let dirs = crate::mcp_harness::Dirs::new();
    dirs.put("docs/a.md", "in the root\n");
    let g = std::sync::Arc::new(HttpGate::start(&dirs, None));
    let bearer = g.bearer();
    let auth = ("Authorization", bearer.as_str());
    let v = ("MCP-Protocol-Version", "2025-11-25");
    let open = |roots: bool| {
        let caps = if roots {
            json!({"roots": {}})
        } else {
            json!({})
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": caps,
            "clientInfo": {"name": "t", "version": "0"}}});
        let r = post(&g, &init, &[auth]);
        assert_eq!(r.status, 200, "{}", r.body);
        let sid = r
            .header("mcp-session-id")
            .expect("a session id")
            .to_string();
        // The session that declared roots sends no `initialized` (its calls must ask).
        if !roots {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let h = [auth, ("Mcp-Session-Id", sid.as_str()), v];
            assert_eq!(post(&g, &note, &h).status, 202);
        }
        sid
    };
    let (waiting, other) = (open(true), open(false));
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "read_text_file", "arguments": {"path": "docs/a.md"}}})
    };
    let started = Instant::now();
    let calls: Vec<_> = (1..=4)
        .map(|id| {
            let (g, sid, bearer) = (g.clone(), waiting.clone(), bearer.clone());
            let msg = call(id);
            std::thread::spawn(move || {
                let h = [
                    ("Authorization", bearer.as_str()),
                    ("Mcp-Session-Id", &sid),
                    v,
                ];
                let r = post(&g, &msg, &h);
                (started.elapsed(), r.status, r.body)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let at_once = |sid: &str, msg: &Value| {
        let t = Instant::now();
        let r = post(&g, msg, &[auth, ("Mcp-Session-Id", sid), v]);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            t.elapsed() < PROMPT,
            "answered after {:?}: {}",
            t.elapsed(),
            r.body
        );
        r.body
    };
    let ping = json!({"jsonrpc": "2.0", "id": 50, "method": "ping", "params": {}});
    assert!(at_once(&waiting, &ping).contains("\"result\""));
    let read = at_once(&other, &call(51));
    assert!(
        read.contains("in the root"),
        "the other session's call: {read}"
    );
    // Answered while the four calls still wait for their roots.
    assert!(
        calls.iter().all(|c| !c.is_finished()),
        "a waiting call ended before the ping and the other session's call were answered"
    );
    let mut took = Vec::new();
    for (id, c) in (1..).zip(calls) {
        let (t, status, body) = c.join().expect("a call's thread");
        assert_eq!(status, 200, "{body}");
        let answer = answer_to(&body, id);
        assert!(answer["result"].is_object(), "an answer: {body}");
        took.push(t);
    }
    // Side by side: the last within a second of the first, all within the 5 s a
    // `roots/list` is given plus room for a loaded machine.
    let (first, last) = (took.iter().min(), took.iter().max());
    let (Some(first), Some(last)) = (first, last) else {
        panic!("no calls")
    };
    assert!(
        *first > Duration::from_secs(3),
        "they waited for roots: {took:?}"
    );
    assert!(
        *last - *first < Duration::from_secs(1),
        "one after another: {took:?}"
    );
    assert!(*last < Duration::from_secs(9), "answered after {took:?}");
}

/// The answer with `id` in a POST's body: the JSON itself, or, where the server chose an
/// event stream (a `roots/list` may travel on it first), the `data:` line that answers.
fn answer_to(body: &str, id: u64) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v["id"] == id && (v["result"].is_object() || v["error"].is_object()))
        .unwrap_or(Value::Null)
}
