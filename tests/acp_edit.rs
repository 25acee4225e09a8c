//! Integration tests for `_fsgate/edit_text_file`: exactly-once replacement and its error messages.

use serde_json::{Value, json};

use crate::common::{Gate, INVALID_PARAMS, NOT_FOUND, assert_code};

#[test]
fn edit_replaces_the_single_occurrence() {
    let g = Gate::start();
    g.put("e.rs", "fn a() {}\nfn b() {}\n");
    let r = g.ok(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("e.rs"), "oldText": "fn b()", "newText": "fn renamed()"}),
    );
    assert_eq!(r, Value::Null);
    assert_eq!(
        g.get("e.rs").as_deref(),
        Some(&b"fn a() {}\nfn renamed() {}\n"[..])
    );
    // Its audit record names the write rule that allowed it, and the new content's hash.
    let log = std::fs::read_to_string(g.state.join("audit").join("audit.jsonl")).unwrap();
    let rec: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == "request" && r["op"] == "edit_text_file")
        .expect("an edit record");
    assert_eq!(rec["rule"], "workspace-write", "{rec}");
    assert_eq!(rec["decision"], "allow", "{rec}");
    assert_eq!(rec["bytes"], "fn a() {}\nfn renamed() {}\n".len(), "{rec}");
}

#[test]
fn edit_multiline_and_deletion() {
    let g = Gate::start();
    g.put("m.txt", "keep\ndrop 1\ndrop 2\nkeep\n");
    g.ok(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("m.txt"), "oldText": "drop 1\ndrop 2\n", "newText": ""}),
    );
    assert_eq!(g.get("m.txt").as_deref(), Some(&b"keep\nkeep\n"[..]));
}

#[test]
fn overlapping_occurrences_are_ambiguous_too() {
    let g = Gate::start();
    g.put("o.txt", "aaa\n");
    let e = g.err(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("o.txt"), "oldText": "aa", "newText": "X"}),
    );
    assert!(e.message.contains("2 times"), "{e:?}");
    assert_eq!(g.get("o.txt").as_deref(), Some(&b"aaa\n"[..]));
}

#[test]
fn edit_fails_when_old_text_occurs_twice_and_says_so() {
    let g = Gate::start();
    let original = "x = 1\ny = 2\nx = 1\n";
    g.put("d.txt", original);
    let e = g.err(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("d.txt"), "oldText": "x = 1", "newText": "x = 3"}),
    );
    assert!(
        e.message.contains('2'),
        "message must say it occurred 2 times: {e:?}"
    );
    assert_eq!(
        g.get("d.txt").as_deref(),
        Some(original.as_bytes()),
        "a failed edit must not touch the file"
    );
}

#[test]
fn edit_fails_when_old_text_is_absent_and_says_so() {
    let g = Gate::start();
    g.put("z.txt", "alpha\n");
    let e = g.err(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("z.txt"), "oldText": "omega", "newText": "x"}),
    );
    let m = e.message.to_lowercase();
    assert!(
        m.contains('0') || m.contains("not found") || m.contains("no occurrence"),
        "message must say it occurred 0 times: {e:?}"
    );
    assert_ne!(e.code, crate::common::INTERNAL, "{e:?}");
    assert_eq!(g.get("z.txt").as_deref(), Some(&b"alpha\n"[..]));
}

#[test]
fn edit_counts_three_occurrences() {
    let g = Gate::start();
    g.put("t.txt", "ab ab ab");
    let e = g.err(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("t.txt"), "oldText": "ab", "newText": "c"}),
    );
    assert!(
        e.message.contains('3'),
        "message must say it occurred 3 times: {e:?}"
    );
}

#[test]
fn edit_missing_file_and_missing_fields() {
    let g = Gate::start();
    assert_code(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs("no.txt"), "oldText": "a", "newText": "b"}),
        ),
        NOT_FOUND,
    );
    assert!(!g.exists("no.txt"), "edit must not create files");
    g.put("f.txt", "a");
    assert_code(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs("f.txt"), "newText": "b"}),
        ),
        INVALID_PARAMS,
    );
    assert_eq!(g.get("f.txt").as_deref(), Some(&b"a"[..]));
}
