//! Integration tests for the JSON-RPC layer: malformed input, error codes, oversized lines,
//! id echoing, concurrency, EOF shutdown and a clean stdout.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{
    Gate, INTERNAL, INVALID_PARAMS, INVALID_REQUEST, LIMIT, METHOD_NOT_FOUND, PARSE_ERROR,
    assert_code, split,
};

/// Files and bytes per file of the tree that makes a grep slow (tuned to take well over 100 ms).
const BIG_FILES: usize = 200;
const BIG_FILE_BYTES: usize = 64 * 1024;

/// Fills `dir/` with many files of text that the pattern `SLOW_PATTERN` never matches.
fn big_tree(g: &Gate, dir: &str) {
    let line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    let body = line.repeat(BIG_FILE_BYTES / line.len());
    for i in 0..BIG_FILES {
        g.put(&format!("{dir}/d{}/f{i}.txt", i % 20), &body);
    }
}

const SLOW_PATTERN: &str = r"(?i)z[0-9]q\w*never";

/// Asserts the server still answers a plain request correctly.
fn assert_alive(g: &Gate) {
    g.put("alive.txt", "yes");
    let r = g.ok("fs/read_text_file", json!({"path": g.abs("alive.txt")}));
    assert_eq!(r["content"], json!("yes"));
}

#[test]
fn malformed_json_gets_parse_error_and_session_continues() {
    let g = Gate::start();
    g.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"#);
    let resp = g.wait_null_id();
    assert_eq!(resp["id"], Value::Null, "{resp}");
    assert_code(split(&resp), PARSE_ERROR);
    g.send_raw("this is not json at all");
    assert_code(split(&g.wait_null_id()), PARSE_ERROR);
    assert_alive(&g);
}

#[test]
fn invalid_request_gets_minus_32600() {
    let g = Gate::start();
    // `method` is not a string.
    g.send_raw(r#"{"jsonrpc":"2.0","id":7,"method":5}"#);
    let resp = g.wait_response_or_null(&json!(7));
    assert_code(split(&resp), INVALID_REQUEST);
    // No method at all.
    g.send_raw(r#"{"jsonrpc":"2.0","id":8}"#);
    let resp = g.wait_response_or_null(&json!(8));
    assert_code(split(&resp), INVALID_REQUEST);
    // Valid JSON that is not an object.
    g.send_raw("42");
    assert_code(split(&g.wait_null_id()), INVALID_REQUEST);
    assert_alive(&g);
}

/// Regression (found by the `acp_line` fuzz target): a 90-digit id was answered as
/// `1e88`, an id no request of the client's had. An id that cannot come back exactly is
/// refused with id null; an integer of 64 bits comes back as it was sent.
#[test]
fn ids_that_cannot_be_echoed_exactly_are_refused() {
    let g = Gate::start();
    let huge = format!("{}1", "9".repeat(89));
    for id in [huge.as_str(), "1.50"] {
        g.send_raw(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"fs/read_text_file","params":{{"sessionId":"s","path":"{}"}}}}"#,
            g.abs("x.txt")
        ));
        let resp = g.wait_null_id();
        assert_code(split(&resp), INVALID_REQUEST);
        assert!(resp.to_string().contains("echo it exactly"), "{resp}");
    }
    g.send_raw(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"no/such"}"#);
    let resp = g.wait_response_or_null(&json!(u64::MAX));
    assert_eq!(resp["id"], json!(u64::MAX), "{resp}");
    assert_alive(&g);
}

#[test]
fn unknown_method_gets_minus_32601_with_its_id() {
    let g = Gate::start();
    assert_code(g.call("fs/unknown_method", json!({})), METHOD_NOT_FOUND);
    assert_code(
        g.call("_fsgate/nope", json!({"path": g.abs("")})),
        METHOD_NOT_FOUND,
    );
    assert_alive(&g);
}

#[test]
fn bad_params_get_minus_32602() {
    let g = Gate::start();
    g.put("a.txt", "a");
    assert_code(
        g.call("fs/read_text_file", json!([g.abs("a.txt")])),
        INVALID_PARAMS,
    );
    assert_code(
        g.call(
            "fs/read_text_file",
            json!({"path": g.abs("a.txt"), "line": "two"}),
        ),
        INVALID_PARAMS,
    );
    assert_code(
        g.call("_fsgate/rename", json!({"oldPath": g.abs("a.txt")})),
        INVALID_PARAMS,
    );
    assert!(g.exists("a.txt"));
    assert_alive(&g);
}

#[test]
fn ids_are_echoed_with_their_json_type() {
    let g = Gate::start();
    g.put("a.txt", "a");
    let p = json!({"path": g.abs("a.txt")});
    g.send_with_id(json!(0), "fs/read_text_file", p.clone());
    g.send_with_id(json!("0"), "fs/read_text_file", p.clone());
    g.send_with_id(json!("req-abc"), "fs/read_text_file", p);
    for id in [json!(0), json!("0"), json!("req-abc")] {
        let resp = g.wait_response(&id);
        assert_eq!(resp["id"], id, "id must keep its type: {resp}");
        assert_eq!(resp["jsonrpc"], json!("2.0"));
        assert_eq!(split(&resp).expect("read ok")["content"], json!("a"));
    }
}

#[test]
fn pipelined_requests_are_all_answered_by_id() {
    let g = Gate::start();
    for i in 0..30 {
        g.put(&format!("p/{i}.txt"), format!("file {i}"));
    }
    let ids: Vec<Value> = (0..30)
        .map(|i| {
            g.send(
                "fs/read_text_file",
                json!({"path": g.abs(&format!("p/{i}.txt"))}),
            )
        })
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let r = g.wait(id).expect("read ok");
        assert_eq!(
            r["content"],
            json!(format!("file {i}")),
            "response for id {id} carries another request's answer"
        );
    }
}

#[test]
fn oversized_line_is_refused_and_session_continues() {
    let g = Gate::start();
    let content = "a".repeat(17 << 20);
    let line = json!({"jsonrpc": "2.0", "id": 99, "method": "fs/write_text_file",
        "params": {"sessionId": "s", "path": g.abs("huge.txt"), "content": content}})
    .to_string()
        + "\n";
    drop(content);
    let stdin = g.stdin_handle();
    // Written from another thread: if the server stopped reading, the test fails on the
    // response timeout below instead of blocking forever in write().
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut guard = stdin.lock().expect("stdin lock");
        guard
            .as_mut()
            .map(|p| p.write_all(line.as_bytes()).and_then(|_| p.flush()).is_ok())
    });
    let resp = g.wait_response_or_null(&json!(99));
    let err = split(&resp).expect_err("a 17 MiB line must be refused");
    assert!(
        [PARSE_ERROR, INVALID_REQUEST, LIMIT].contains(&err.code),
        "unexpected code for an oversized line: {err:?}"
    );
    let _ = writer.join();
    assert!(
        !g.exists("huge.txt"),
        "the oversized request must not be executed"
    );
    assert_alive(&g);
}

#[test]
fn write_over_max_write_bytes_but_under_line_bound_is_limit_error() {
    let g = Gate::start();
    let content = "b".repeat((10 << 20) + 1);
    assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("big.txt"), "content": content}),
        ),
        LIMIT,
    );
    assert!(!g.exists("big.txt"));
    assert_alive(&g);
}

#[test]
fn slow_grep_does_not_hold_up_a_read() {
    let g = Gate::start();
    big_tree(&g, "big");
    g.put("small.txt", "small");
    let sent = Instant::now();
    let grep = g.send("_fsgate/grep", json!({"pattern": SLOW_PATTERN}));
    std::thread::sleep(Duration::from_millis(20));
    let read = g.send("fs/read_text_file", json!({"path": g.abs("small.txt")}));
    let (read_resp, read_at) = g.wait_response_timed(&read, crate::common::TIMEOUT);
    let (grep_resp, grep_at) = g.wait_response_timed(&grep, Duration::from_secs(30));
    eprintln!(
        "slow grep: read answered after {:?}, grep after {:?}",
        read_at - sent,
        grep_at - sent
    );
    assert_eq!(
        split(&read_resp).expect("read ok")["content"],
        json!("small")
    );
    assert_eq!(split(&grep_resp).expect("grep ok")["matches"], json!([]));
    // With a concurrent server the read comes back first, provided the grep is slow
    // enough to tell the two apart; if not, say so instead of blaming the server.
    assert!(
        grep_at - sent >= Duration::from_millis(40),
        "the big tree grep took only {:?}: enlarge BIG_FILES so the test can tell concurrency apart",
        grep_at - sent
    );
    assert!(
        read_at < grep_at,
        "the read was answered only after the slow grep finished: requests are not served concurrently"
    );
}

#[test]
fn eof_finishes_in_flight_requests_then_exits_zero() {
    let mut g = Gate::start();
    big_tree(&g, "big");
    g.put("small.txt", "small");
    let grep = g.send("_fsgate/grep", json!({"pattern": SLOW_PATTERN}));
    let read = g.send("fs/read_text_file", json!({"path": g.abs("small.txt")}));
    let write = g.send(
        "fs/write_text_file",
        json!({"path": g.abs("written.txt"), "content": "w"}),
    );
    g.close_stdin();
    let started = Instant::now();
    assert_eq!(g.wait(&read).expect("read ok")["content"], json!("small"));
    assert_eq!(g.wait(&write).expect("write ok"), Value::Null);
    let (grep_resp, _) = g.wait_response_timed(&grep, Duration::from_secs(30));
    assert!(
        split(&grep_resp).is_ok(),
        "in-flight grep must complete after EOF: {grep_resp}"
    );
    let status = g.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.code(),
        Some(0),
        "exit after EOF must be 0 (took {:?})\n{}",
        started.elapsed(),
        g.stderr()
    );
    assert_eq!(g.get("written.txt").as_deref(), Some(&b"w"[..]));
}

#[test]
fn eof_on_idle_session_exits_zero() {
    let mut g = Gate::start();
    g.close_stdin();
    let status = g.wait_exit(crate::common::TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", g.stderr());
}

#[test]
fn stdout_carries_nothing_but_json_rpc() {
    let mut g = Gate::with_env(&[("RUST_LOG", "trace")]);
    g.put("a.txt", "a\n");
    g.put(".env", "SECRET=1\n");
    let _ = g.call("initialize", json!({"protocolVersion": 1}));
    let _ = g.call("fs/read_text_file", json!({"path": g.abs("a.txt")}));
    let _ = g.call("fs/read_text_file", json!({"path": g.abs(".env")}));
    let _ = g.call(
        "fs/write_text_file",
        json!({"path": g.abs("b.txt"), "content": "b"}),
    );
    let _ = g.call("_fsgate/ls", json!({"path": g.abs("")}));
    let _ = g.call("_fsgate/grep", json!({"pattern": "a"}));
    let _ = g.call("nope/nope", json!({}));
    g.send_raw("{broken");
    let _ = g.wait_null_id();
    g.close_stdin();
    let status = g.wait_exit(crate::common::TIMEOUT);
    g.join_readers();
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        g.garbage(),
        Vec::<String>::new(),
        "stdout must carry only JSON-RPC messages"
    );
    assert_eq!(
        g.all_messages().len(),
        8,
        "one response per request: {:?}",
        g.all_messages()
    );
    for m in g.all_messages() {
        if let Err(e) = split(&m) {
            assert_ne!(
                e.code, INTERNAL,
                "no request here should be an internal error: {m}"
            );
        }
    }
}
