use serde_json::json;

use super::*;

fn refused(line: &str) -> Refusal {
    match classify_agent_line(line.as_bytes()) {
        Relay::Refuse(r) => r,
        other => panic!("{line} should be refused, got {other:?}"),
    }
}

#[test]
fn plain_messages_are_forwarded() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}"#,
        r#"{"jsonrpc":"2.0","id":0,"result":{"stopReason":"end_turn"}}"#,
        r#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"fsgate/x"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"_zed/fs"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"terminals"}"#,
        r#"  {"jsonrpc":"2.0","method":"session\/update"}  "#,
    ] {
        assert!(
            matches!(classify_agent_line(line.as_bytes()), Relay::Forward(_)),
            "{line}"
        );
    }
}

#[test]
fn exact_file_and_terminal_requests_are_fsgates() {
    match classify_agent_line(
        br#"{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file","params":{"path":"/a"}}"#,
    ) {
        Relay::Serve { id, method, params } => {
            assert_eq!((id, method.as_str()), (json!(0), "fs/read_text_file"));
            assert_eq!(params["path"], "/a");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        classify_agent_line(br#"{"jsonrpc":"2.0","id":"a","method":"_fsgate/ls"}"#),
        Relay::Serve { .. }
    ));
    assert!(matches!(
        classify_agent_line(br#"{"jsonrpc":"2.0","id":5,"method":"terminal/create"}"#),
        Relay::Terminal { id: Some(_), .. }
    ));
    assert!(matches!(
        classify_agent_line(br#"{"jsonrpc":"2.0","method":"terminal/kill"}"#),
        Relay::Terminal { id: None, .. }
    ));
}

#[test]
fn look_alike_methods_are_refused_and_answered() {
    for method in [
        "FS/read_text_file",
        "Fs/write_text_file",
        " fs/read_text_file",
        "fs/read_text_file\t",
        "fs/read_text_file\u{200B}",
        "\u{FEFF}fs/read_text_file",
        "\u{FF46}\u{FF53}/read_text_file",
        "_FSGATE/rm",
        "TERMINAL/create",
        "fs\\read_text_file",
        "fs.read_text_file",
        "fs",
    ] {
        let line = json!({"jsonrpc": "2.0", "id": 9, "method": method}).to_string();
        let r = refused(&line);
        assert_eq!(r.ids, vec![json!(9)], "{method:?}");
        assert_eq!(r.error["code"], code::REFUSED, "{method:?}");
        assert_eq!(r.name, method);
    }
}

#[test]
fn escaped_guarded_methods_are_refused() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"fs\/read_text_file"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"\u0066s/read_text_file"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file\u0000"}"#,
    ] {
        assert_eq!(refused(line).ids, vec![json!(1)], "{line}");
    }
}

#[test]
fn duplicate_and_odd_members_are_refused() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","method":"fs/read_text_file"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","method":"session/x"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"session/x"}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"session/x"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","params":{},"params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","METHOD":"fs/read_text_file"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","Method":"fs/read_text_file"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","\u006dethod":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/x","_meta":1,"_meta":2}"#,
    ] {
        let r = refused(line);
        assert_eq!(r.error["code"], code::INVALID_REQUEST, "{line}");
        assert_eq!(r.ids.len(), 1, "{line}");
    }
    // A response named twice is dropped, never answered: its id is the editor's.
    let r = refused(r#"{"jsonrpc":"2.0","id":3,"result":1,"result":2}"#);
    assert!(r.ids.is_empty());
}

#[test]
fn malformed_lines_batches_and_odd_types_are_refused() {
    for (line, ids) in [
        ("not json", 0),
        ("[]", 0),
        ("17", 0),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":["fs/read_text_file"]}"#,
            1,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":null}"#, 1),
        (r#"{"id":4,"method":"session/x"}"#, 1),
        (
            r#"{"jsonrpc":"1.0","id":4,"method":"fs/write_text_file"}"#,
            1,
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"fs/read_text_file"}"#,
            0,
        ),
        (r#"{"jsonrpc":"2.0","method":"fs/read_text_file"}"#, 0),
        (
            r#"[{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file"},{"jsonrpc":"2.0","id":8,"method":"x"},{"id":9,"result":1}]"#,
            2,
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} trailing",
            0,
        ),
    ] {
        assert_eq!(refused(line).ids.len(), ids, "{line}");
    }
    assert!(matches!(
        classify_agent_line(b"{\"method\":\"\xff\"}"),
        Relay::Refuse(_)
    ));
}

#[test]
fn guarded_names() {
    for m in [
        "fs/x",
        "FS/x",
        "fs",
        "fs:x",
        "_fsgate/x",
        "terminal/x",
        "Terminal.x",
    ] {
        assert!(is_guarded(m), "{m}");
    }
    for m in [
        "fsx/y",
        "fs_x",
        "session/new",
        "_fsgatex",
        "terminals/x",
        "x/fs/y",
    ] {
        assert!(!is_guarded(m), "{m}");
    }
}

mod generated {
    use proptest::prelude::*;

    use super::*;

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "\"jsonrpc\"",
            "\"id\"",
            "\"method\"",
            "\"params\"",
            "\"result\"",
            "\"METHOD\"",
            "\"Id\"",
            "\"\\u006dethod\"",
            "\" method\"",
            "\"_meta\"",
        ])
        .prop_map(str::to_string)
    }

    fn value() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "\"2.0\"",
            "1",
            "\"1\"",
            "null",
            "{}",
            "[]",
            "\"fs/read_text_file\"",
            "\"FS/read_text_file\"",
            "\"fs\\/read_text_file\"",
            "\" fs/x\"",
            "\"_fsgate/ls\"",
            "\"terminal/create\"",
            "\"session/update\"",
            "\"\\uff46s/x\"",
            "[\"fs/x\"]",
        ])
        .prop_map(str::to_string)
    }

    proptest! {
        /// Whatever members a line has, a relayed one names no guarded method under any
        /// reading (first or last duplicate, any key spelling), and fsgate serves only
        /// exact spellings.
        #[test]
        fn relayed_lines_are_unambiguous(members in prop::collection::vec((key(), value()), 0..6), batch in any::<bool>()) {
            let body = members.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(",");
            let line = if batch { format!("[{{{body}}}]") } else { format!("{{{body}}}") };
            match classify_agent_line(line.as_bytes()) {
                Relay::Forward(_) => {
                    prop_assert!(!batch);
                    let v: Value = serde_json::from_str(&line).expect("relayed lines parse");
                    for (_, val) in &members {
                        if let Ok(Value::String(s)) = serde_json::from_str::<Value>(val) {
                            let named_method = v.get("method") == Some(&Value::String(s.clone()));
                            prop_assert!(!(named_method && is_guarded(&s)), "{line}");
                        }
                    }
                    let keys: Vec<String> = members.iter().map(|(k, _)| skeleton(&serde_json::from_str::<String>(k).unwrap_or_default())).collect();
                    let mut unique = keys.clone();
                    unique.sort();
                    unique.dedup();
                    prop_assert_eq!(unique.len(), keys.len(), "{}", line);
                    prop_assert!(members.iter().all(|(k, _)| !k.contains(['M', 'I', ' ', '\\'])), "{}", line);
                }
                Relay::Serve { method, .. } | Relay::Terminal { method, .. } => {
                    prop_assert_eq!(skeleton(&method), method.clone());
                    prop_assert!(line.contains(&format!("\"method\":\"{method}\"")), "{}", line);
                }
                Relay::Refuse(_) => {}
            }
        }
    }
}

#[test]
fn requests_whose_id_would_not_come_back_exactly_are_refused() {
    // A 90-digit id would be answered as 1e88: no request of the agent's would match.
    let huge = format!("{}1", "9".repeat(89));
    for id in [huge.as_str(), "1.50", "1e3"] {
        for method in ["fs/read_text_file", "session/prompt"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#);
            let r = refused(&line);
            assert!(r.ids.is_empty(), "{line}");
            assert_eq!(r.error["message"], jsonrpc::INEXACT_ID);
        }
    }
    let line = format!(r#"{{"jsonrpc":"2.0","id":{huge},"result":null}}"#);
    assert!(matches!(
        classify_agent_line(line.as_bytes()),
        Relay::Forward(_)
    ));
}

#[test]
fn top_level_keys_written_with_escapes_are_refused() {
    // Found by `generated::relayed_lines_are_unambiguous`: the key decoded to `method`,
    // so the line was taken for a terminal notification and relayed with its escape.
    for line in [
        r#"{"jsonrpc":"2.0","\u006dethod":"terminal/create"}"#,
        r#"{"jsonrpc":"2.0","id":3,"\u006dethod":"session/prompt"}"#,
        r#"{"jsonrpc":"2.0","i\u0064":3,"method":"fs/read_text_file"}"#,
    ] {
        refused(line);
    }
}

#[test]
fn a_carriage_return_inside_a_line_is_refused() {
    // Read by a line reader that also ends lines at `\r`, the middle piece is an
    // fs request of its own.
    let hidden = r#"{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/a"}}"#;
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"x":{}{hidden}{}}}}}"#,
        '\r', '\r'
    );
    assert_eq!(refused(&line).ids, Vec::<Value>::new());
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":1,{}"method":"session/prompt"}}"#,
        '\r'
    );
    assert_eq!(refused(&line).ids, vec![json!(1)]);
}

#[test]
fn requests_under_fsgates_own_ids_are_refused() {
    for line in [
        r#"{"jsonrpc":"2.0","id":"fsgate-ask-1","method":"session/request_permission","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":"fsgate-ask-9","method":"terminal/create","params":{}}"#,
    ] {
        let r = refused(line);
        assert_eq!(r.ids.len(), 1, "{line}");
        assert!(
            r.error["message"]
                .as_str()
                .unwrap()
                .contains("fsgate's own")
        );
    }
    // A response under such an id is the agent's answer to an editor request: relayed.
    let line = r#"{"jsonrpc":"2.0","id":"fsgate-ask-1","result":{}}"#;
    assert!(matches!(
        classify_agent_line(line.as_bytes()),
        Relay::Forward(_)
    ));
}

#[test]
fn agent_messages_naming_fsgates_tool_calls_are_refused() {
    for line in [
        // Rewriting the question a person is looking at, or a change note.
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"fsgate-ask-3","title":"read README.md"}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"fsgate-change-9","title":"fsgate: wrote a.txt"}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"fsgate\u002dask-3"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"fsgate-ask-3"},"options":[]}}"#,
    ] {
        let r = refused(line);
        assert!(
            r.error["message"]
                .as_str()
                .unwrap()
                .contains("fsgate's own"),
            "{line}: {:?}",
            r.error
        );
    }
    let own = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"call-1"}}}"#;
    assert!(matches!(
        classify_agent_line(own.as_bytes()),
        Relay::Forward(_)
    ));
}
