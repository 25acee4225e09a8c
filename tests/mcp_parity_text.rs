//! Drop-in parity with the reference MCP filesystem server (issue 14, points 2, 3, 6,
//! 7): read_text_file head/tail, edit_file diffs, search_files patterns, media files.
//! Each test makes the same call on fsgate and on the reference and compares what a
//! client sees; where fsgate differs on purpose (docs/mcp-differences.md) the test
//! asserts both sides.

use serde_json::Value;

use crate::mcp_reference::{Twins, rooted_text};

/// Both texts of one call, each server's root written `{root}`.
fn texts(t: &mut Twins, tool: &str, args: &str) -> (String, String) {
    let (f, r) = t.both(tool, args);
    assert_ne!(f["isError"], Value::Bool(true), "fsgate {tool} {args}: {f}");
    assert_ne!(
        r["isError"],
        Value::Bool(true),
        "reference {tool} {args}: {r}"
    );
    (rooted_text(&f, &t.fsgate), rooted_text(&r, &t.reference))
}

/// The same text on both servers, returned.
fn same(t: &mut Twins, tool: &str, args: &str) -> String {
    let (f, r) = texts(t, tool, args);
    assert_eq!(f, r, "{tool} {args}: fsgate vs reference");
    f
}

#[test]
fn head_and_tail_match_the_reference_where_it_is_not_a_trap() {
    let seed: &[(&str, &[u8])] = &[
        ("nl.txt", b"alpha\nbeta\ngamma\n"),
        ("bare.txt", b"alpha\nbeta\ngamma"),
        ("crlf.txt", b"alpha\r\nbeta\r\ngamma\r\n"),
        ("empty.txt", b""),
    ];
    let Some(mut t) = Twins::start("head_and_tail_match_the_reference", None, seed) else {
        return;
    };
    let read = |file: &str, arg: &str| format!(r#"{{"path": "{{root}}/{file}", {arg}}}"#);
    for file in ["nl.txt", "bare.txt", "crlf.txt", "empty.txt"] {
        for arg in [
            r#""head": 2"#,
            r#""head": 1"#,
            r#""head": 10"#,
            r#""head": 0"#,
            r#""tail": 0"#,
        ] {
            same(&mut t, "read_text_file", &read(file, arg));
        }
        same(
            &mut t,
            "read_text_file",
            &read(file, r#""head": 0, "tail": 0"#),
        );
        same(&mut t, "read_file", &read(file, r#""head": 2"#));
    }
    assert_eq!(
        same(&mut t, "read_text_file", &read("nl.txt", r#""head": 2"#)),
        "alpha\nbeta"
    );
    assert_eq!(
        same(&mut t, "read_text_file", &read("nl.txt", r#""head": 0"#)),
        "alpha\nbeta\ngamma\n"
    );
    // head=0 counts as not given, so it combines with tail as on the reference.
    assert_eq!(
        same(
            &mut t,
            "read_text_file",
            &read("bare.txt", r#""head": 0, "tail": 2"#)
        ),
        "beta\ngamma"
    );
    for n in [1, 2, 3, 10] {
        same(
            &mut t,
            "read_text_file",
            &read("bare.txt", &format!(r#""tail": {n}"#)),
        );
    }
    // Kept on purpose: tail=N of a file ending in a newline is its last N lines; the
    // reference counts the empty string after the final newline as a line (tail=1 is
    // "") and turns CRLF into LF.
    let (f, r) = texts(&mut t, "read_text_file", &read("nl.txt", r#""tail": 2"#));
    assert_eq!((f.as_str(), r.as_str()), ("beta\ngamma\n", "gamma\n"));
    let (f, r) = texts(&mut t, "read_text_file", &read("nl.txt", r#""tail": 1"#));
    assert_eq!((f.as_str(), r.as_str()), ("gamma\n", ""));
    let (f, r) = texts(&mut t, "read_text_file", &read("crlf.txt", r#""tail": 2"#));
    assert_eq!((f.as_str(), r.as_str()), ("beta\r\ngamma\r\n", "gamma\n"));
    // Both refuse head and tail together.
    let (f, r) = t.both("read_text_file", &read("nl.txt", r#""head": 1, "tail": 1"#));
    assert_eq!(
        (f["isError"].clone(), r["isError"].clone()),
        (Value::Bool(true), Value::Bool(true)),
        "{f} {r}"
    );
}
