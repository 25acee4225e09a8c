//! The ACP door: every message, however bad, is one audit record; an ls answer stops at
//! the message limit and says so (grep and glob: tests/bounded.rs).

use serde_json::{Value, json};

use crate::common::{
    Gate, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, TIMEOUT, policy_with,
};

/// A message limit small enough to reach cheaply (the policy's floor is 4 KiB).
const SMALL: u64 = 65536;

fn small_limit_gate() -> Gate {
    let policy = policy_with(1 << 20, 1 << 20, "deny", "").replace(
        "binary = \"deny\"",
        &format!("binary = \"deny\"\nmax_message_bytes = {SMALL}"),
    );
    Gate::with_policy(&policy)
}

fn request_records(g: &Gate) -> Vec<Value> {
    std::fs::read_to_string(&g.audit_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "request")
        .collect()
}

/// The response line with this id (or the next with a null id), as raw text.
fn answer_text(g: &Gate, id: &Value) -> String {
    g.wait_response(id).to_string()
}

#[test]
fn each_bad_message_on_the_acp_door_is_exactly_one_audit_record() {
    let mut g = small_limit_gate();
    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"fs/read_text_file","params":{{"path":"{}"}}}}"#,
        "x".repeat(SMALL as usize)
    );
    // (line, id the answer carries, code; None: the message gets no answer)
    let cases: Vec<(String, Value, Option<i64>)> = vec![
        ("{not json".into(), Value::Null, Some(PARSE_ERROR)),
        ("42".into(), Value::Null, Some(INVALID_REQUEST)),
        (
            r#"{"jsonrpc":"1.0","id":"v","method":"fs/read_text_file"}"#.into(),
            json!("v"),
            Some(INVALID_REQUEST),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"m"}"#.into(),
            json!("m"),
            Some(INVALID_REQUEST),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"u","method":"no/such_method","params":{}}"#.into(),
            json!("u"),
            Some(METHOD_NOT_FOUND),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p","method":"fs/read_text_file","params":{"path":5}}"#.into(),
            json!("p"),
            Some(INVALID_PARAMS),
        ),
        (
            r#"[{"jsonrpc":"2.0","id":"b","method":"fs/read_text_file","params":{}}]"#.into(),
            Value::Null,
            Some(INVALID_REQUEST),
        ),
        (oversized, Value::Null, Some(INVALID_REQUEST)),
        (
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#.into(),
            Value::Null,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"r","result":{}}"#.into(),
            Value::Null,
            None,
        ),
    ];
    for (line, id, code) in &cases {
        let before = request_records(&g).len();
        g.send_raw(line);
        let mut want = 1;
        match code {
            Some(code) => {
                let resp = if id.is_null() {
                    g.wait_null_id()
                } else {
                    g.wait_response(id)
                };
                assert_eq!(resp["error"]["code"], json!(code), "{line:.80}: {resp}");
            }
            // No answer: a request behind it (one record more) shows it was taken.
            None => {
                g.ok("_fsgate/stat", json!({"path": g.abs("")}));
                want += 1;
            }
        }
        let recs = request_records(&g);
        assert_eq!(
            recs.len() - before,
            want,
            "one record for {line:.80}: {:#?}",
            &recs[before..]
        );
    }
    let recs = request_records(&g);
    let ops: Vec<&str> = recs.iter().filter_map(|r| r["op"].as_str()).collect();
    assert_eq!(
        ops.iter().filter(|o| **o == "invalid-message").count(),
        6,
        "{ops:?}"
    );
    for name in [
        "no/such_method",
        "fs/read_text_file",
        "session/cancel",
        "unexpected-response",
    ] {
        assert!(ops.contains(&name), "{name} not recorded: {ops:?}");
    }
    g.close_stdin();
    g.wait_exit(TIMEOUT);
}

#[test]
fn an_ls_answer_stops_at_the_message_limit_and_says_so() {
    let g = small_limit_gate();
    let long = "n".repeat(200);
    for i in 0..400 {
        g.put(&format!("many/{long}{i:04}.txt"), "");
    }
    for (method, params, key) in [
        ("_fsgate/ls", json!({"path": g.abs("many")}), "entries"),
        ("_fsgate/glob", json!({"pattern": "many/*.txt"}), "matches"),
    ] {
        let id = g.send(method, params);
        let text = answer_text(&g, &id);
        let resp: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(resp["result"]["truncated"], json!(true), "{method}");
        let n = resp["result"][key].as_array().map_or(0, Vec::len);
        assert!(n > 20 && n < 400, "{method}: {n}");
        assert!(text.len() as u64 <= SMALL, "{method}: {} bytes", text.len());
    }
    let few = g.ok("_fsgate/ls", json!({"path": g.abs("")}));
    assert_eq!(few["entries"].as_array().map(Vec::len), Some(1));
    assert!(few.get("truncated").is_none());
    let rec = request_records(&g)
        .into_iter()
        .find(|r| r["op"] == "ls")
        .expect("ls record");
    assert_eq!(rec["args"]["truncated"], json!(true), "{rec}");
}
