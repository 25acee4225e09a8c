//! Size conditions through the real binary over MCP: "files over 1 MiB are read-only" is
//! one deny rule, judged on the larger of a file's current and new size.

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, text_of};

const POLICY: &str = r#"version = 1
[[rule]]
id = "work"
effect = "allow"
ops = ["*"]
paths = ["**"]

[[rule]]
id = "large-files-read-only"
effect = "deny"
ops = ["write", "delete"]
paths = ["**"]
min_size = 1048577
reason = "files over 1 MiB are read-only"

[[rule]]
id = "big-logs-unlisted"
effect = "deny"
ops = ["list", "read"]
paths = ["logs"]
min_size = 1048577
"#;

/// The audit record of the last `op` on `path`.
fn last_record(g: &McpGate, op: &str, path: &str) -> Value {
    g.dirs
        .audit_records()
        .into_iter()
        .rev()
        .find(|r| r["op"] == op && r["path"] == path)
        .unwrap_or_else(|| panic!("no {op} record for {path}"))
}

#[test]
fn files_over_a_mebibyte_are_read_only_whatever_is_written() {
    let mut g = McpGate::start(Some(POLICY));
    let mut big = b"MARK\n".to_vec();
    big.resize(2 * 1024 * 1024, b'x');
    g.dirs.put("big.txt", &big);
    g.dirs.put("small.txt", "small");
    g.initialize("2025-06-18");
    // Overwriting 2 MiB with 9 bytes: judged at 2 MiB, refused, the file unchanged.
    let r = g.tool(
        1,
        "write_file",
        json!({"path": "big.txt", "content": "truncated"}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text_of(&r).contains("files over 1 MiB are read-only"),
        "{r}"
    );
    let rec = last_record(&g, "write_text_file", "big.txt");
    assert_eq!(rec["decision"], json!("deny"), "{rec}");
    assert_eq!(rec["rule"], json!("large-files-read-only"), "{rec}");
    let on_disk = std::fs::read(g.dirs.root.join("big.txt")).expect("read big.txt");
    assert_eq!(on_disk.len(), big.len());
    // Removing it is refused too; reading it is not.
    let r = g.tool(2, "rm", json!({"path": "big.txt"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(g.dirs.root.join("big.txt").exists());
    let r = g.tool(3, "read_text_file", json!({"path": "big.txt", "head": 1}));
    assert_ne!(r["isError"], json!(true), "{r}");
    // An edit that shrinks it and a move (delete at the source) are refused as well.
    let edit = json!({"path": "big.txt", "edits": [{"oldText": "MARK", "newText": "M"}]});
    let r = g.tool(6, "edit_file", edit);
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text_of(&r).contains("files over 1 MiB are read-only"),
        "{r}"
    );
    let r = g.tool(
        7,
        "move_file",
        json!({"source": "big.txt", "destination": "moved.txt"}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text_of(&r).contains("files over 1 MiB are read-only"),
        "{r}"
    );
    assert_eq!(
        std::fs::read(g.dirs.root.join("big.txt")).expect("big.txt"),
        big
    );
    // A small file stays writable, and growing one past 1 MiB is refused.
    let r = g.tool(
        4,
        "write_file",
        json!({"path": "small.txt", "content": "nine byte"}),
    );
    assert_ne!(r["isError"], json!(true), "{r}");
    assert_eq!(
        std::fs::read(g.dirs.root.join("small.txt")).expect("small"),
        b"nine byte"
    );
    let grown = "y".repeat(1024 * 1024 + 1);
    let r = g.tool(
        5,
        "write_file",
        json!({"path": "small.txt", "content": grown}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    assert_eq!(
        last_record(&g, "write_text_file", "small.txt")["rule"],
        json!("large-files-read-only")
    );
}

/// A size condition on `list` hides large files from every listing, including the
/// tree, whose walk reads no metadata of its own.
#[test]
fn a_size_condition_on_list_hides_large_files_from_listings() {
    let mut g = McpGate::start(Some(POLICY));
    g.dirs.put("logs/huge.log", vec![b'l'; 2 * 1024 * 1024]);
    g.dirs.put("logs/small.log", "small");
    g.initialize("2025-06-18");
    for (id, tool, args) in [
        (1, "list_directory", json!({"path": "logs"})),
        (2, "directory_tree", json!({"path": "logs"})),
        (
            3,
            "search_files",
            json!({"path": "logs", "pattern": "*.log"}),
        ),
        // The listings that read sizes for their answer.
        (5, "list_directory_with_sizes", json!({"path": "logs"})),
        (6, "ls", json!({"path": "logs"})),
        // grep's walk reads each file's size for the rule (both files hold an `l`).
        (7, "grep", json!({"path": "logs", "pattern": "l"})),
    ] {
        let r = g.tool(id, tool, args);
        let text = text_of(&r);
        assert!(text.contains("small.log"), "{tool}: {r}");
        assert!(!text.contains("huge.log"), "{tool}: {r}");
    }
    let r = g.tool(4, "get_file_info", json!({"path": "logs/huge.log"}));
    assert_eq!(r["isError"], json!(true), "{r}");
}
