//! Integration tests for `initialize`, `fs/read_text_file` and `_fsgate/read_file`.

use serde_json::{Value, json};

use crate::common::{Gate, INVALID_PARAMS, NOT_FOUND, assert_code};

#[test]
fn initialize_advertises_fs_capabilities_under_default_policy() {
    let g = Gate::start();
    let r = g.ok(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(r["protocolVersion"], json!(1), "{r}");
    assert_eq!(
        r["clientCapabilities"]["fs"]["readTextFile"],
        json!(true),
        "{r}"
    );
    assert_eq!(
        r["clientCapabilities"]["fs"]["writeTextFile"],
        json!(true),
        "{r}"
    );
    assert!(
        r["_meta"]["fsgate"].is_object(),
        "_meta.fsgate must be an object: {r}"
    );
}

#[test]
fn read_whole_file() {
    let g = Gate::start();
    g.put("src/main.rs", "fn main() {}\n// é ü 日本\n");
    let r = g.ok("fs/read_text_file", json!({"path": g.abs("src/main.rs")}));
    assert_eq!(r, json!({"content": "fn main() {}\n// é ü 日本\n"}));
}

#[test]
fn read_line_and_limit_window() {
    let g = Gate::start();
    g.put("f.txt", "l1\nl2\nl3\nl4\nl5\n");
    let read = |params: Value| g.ok("fs/read_text_file", params)["content"].clone();
    let p = g.abs("f.txt");
    assert_eq!(
        read(json!({"path": p, "line": 2, "limit": 2})),
        json!("l2\nl3\n"),
        "line is 1-based"
    );
    assert_eq!(
        read(json!({"path": p, "line": 1, "limit": 1})),
        json!("l1\n")
    );
    assert_eq!(
        read(json!({"path": p, "limit": 3})),
        json!("l1\nl2\nl3\n"),
        "limit alone starts at line 1"
    );
    assert_eq!(
        read(json!({"path": p, "line": 4})),
        json!("l4\nl5\n"),
        "line alone reads to the end"
    );
    assert_eq!(
        read(json!({"path": p, "line": 4, "limit": 10})),
        json!("l4\nl5\n"),
        "window past the end returns what exists"
    );
    assert_eq!(
        read(json!({"path": p, "line": 6})),
        json!(""),
        "window starting past the end is empty"
    );
    assert_eq!(read(json!({"path": p, "line": 100, "limit": 5})), json!(""));
}

#[test]
fn read_window_without_trailing_newline() {
    let g = Gate::start();
    g.put("f.txt", "a\nb\nc");
    let p = g.abs("f.txt");
    let r = g.ok(
        "fs/read_text_file",
        json!({"path": p, "line": 3, "limit": 1}),
    );
    assert_eq!(r["content"], json!("c"));
    let r = g.ok("fs/read_text_file", json!({"path": p, "line": 2}));
    assert_eq!(r["content"], json!("b\nc"));
}

#[test]
fn read_empty_file() {
    let g = Gate::start();
    g.put("empty.txt", "");
    let r = g.ok("fs/read_text_file", json!({"path": g.abs("empty.txt")}));
    assert_eq!(r["content"], json!(""));
}

#[test]
fn read_missing_file_is_not_found() {
    let g = Gate::start();
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("nope.txt")})),
        NOT_FOUND,
    );
    assert_code(
        g.call("_fsgate/read_file", json!({"path": g.abs("dir/nope.txt")})),
        NOT_FOUND,
    );
}

#[test]
fn read_relative_path_is_invalid_params() {
    let g = Gate::start();
    g.put("a.txt", "x");
    assert_code(
        g.call("fs/read_text_file", json!({"path": "a.txt"})),
        INVALID_PARAMS,
    );
}

#[test]
fn read_missing_path_field_is_invalid_params() {
    let g = Gate::start();
    assert_code(g.call("fs/read_text_file", json!({})), INVALID_PARAMS);
    assert_code(
        g.call("fs/read_text_file", json!({"path": 42})),
        INVALID_PARAMS,
    );
}

#[test]
fn read_file_returns_utf8_for_text() {
    let g = Gate::start();
    g.put("t.md", "# title\nbody\n");
    let r = g.ok("_fsgate/read_file", json!({"path": g.abs("t.md")}));
    assert_eq!(
        r,
        json!({"content": "# title\nbody\n", "encoding": "utf-8"})
    );
}

#[test]
fn read_after_write_through_gateway_round_trips() {
    let g = Gate::start();
    let p = g.abs("notes/today.md");
    g.ok(
        "fs/write_text_file",
        json!({"path": p, "content": "one\ntwo\n"}),
    );
    let r = g.ok(
        "fs/read_text_file",
        json!({"path": p, "line": 2, "limit": 1}),
    );
    assert_eq!(r["content"], json!("two\n"));
}

#[test]
fn read_of_directory_is_an_error_but_not_internal() {
    let g = Gate::start();
    g.put("d/x.txt", "x");
    let e = g.err("fs/read_text_file", json!({"path": g.abs("d")}));
    assert_ne!(
        e.code,
        crate::common::INTERNAL,
        "reading a directory is the caller's mistake: {e:?}"
    );
}

#[test]
fn non_ascii_and_spaced_names_round_trip() {
    let g = Gate::start();
    g.put("dossier été/naïve file.txt", "ok\n");
    let r = g.ok(
        "fs/read_text_file",
        json!({"path": g.abs("dossier été/naïve file.txt")}),
    );
    assert_eq!(r["content"], json!("ok\n"));
    let ls = g.ok("_fsgate/ls", json!({"path": g.abs("dossier été")}));
    assert_eq!(
        ls["entries"][0]["path"],
        json!(g.abs("dossier été/naïve file.txt"))
    );
}
