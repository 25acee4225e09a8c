//! MCP `move_file` never replaces its destination: one rename that the kernel refuses if
//! anything is at the name (`RENAME_NOREPLACE`), never a look and then a rename, so of
//! several moves onto one free name exactly one succeeds.

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, text_of};

/// The `move_file` call of `from` to `to` (workspace-relative).
fn move_call(g: &McpGate, from: &str, to: &str) -> Value {
    json!({"name": "move_file", "arguments": {
        "source": g.dirs.abs(from), "destination": g.dirs.abs(to)}})
}

fn content(g: &McpGate, rel: &str) -> Option<String> {
    std::fs::read_to_string(g.dirs.root.join(rel)).ok()
}

/// A move onto an existing file (or directory) is refused naming the rule; both files
/// keep their content, nothing is backed up, and the refusal is the rename's own record,
/// which says it was not to replace.
#[test]
fn move_file_onto_an_existing_file_is_refused_and_recorded() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "source\n");
    g.dirs.put("b.txt", "target\n");
    g.dirs.put("d/keep.txt", "kept\n");
    g.initialize("2025-06-18");
    for (id, to) in [(1, "b.txt"), (2, "d")] {
        let r = g.call(id, "tools/call", move_call(&g, "a.txt", to));
        assert_eq!(r["isError"], json!(true), "{r}");
        let text = text_of(&r);
        assert!(text.contains("destination already exists"), "{text}");
        assert!(text.contains("rule workspace-no-replace"), "{text}");
    }
    assert_eq!(content(&g, "a.txt").as_deref(), Some("source\n"));
    assert_eq!(content(&g, "b.txt").as_deref(), Some("target\n"));
    assert_eq!(content(&g, "d/keep.txt").as_deref(), Some("kept\n"));
    // A directory moved into itself through a link is refused as such (the kernel's
    // EINVAL would otherwise read as a filesystem without RENAME_NOREPLACE).
    std::os::unix::fs::symlink("d", g.dirs.root.join("l")).expect("symlink");
    let r = g.call(3, "tools/call", move_call(&g, "d", "l/inner"));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text_of(&r).contains("cannot move a directory into itself"),
        "{r}"
    );
    assert_eq!(content(&g, "d/keep.txt").as_deref(), Some("kept\n"));
    let recs = g.dirs.audit_records();
    let renames: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "rename")
        .collect();
    assert_eq!(renames.len(), 3, "{recs:#?}");
    for (rec, to) in renames.iter().zip(["b.txt", "d"]) {
        assert_eq!(rec["path"], "a.txt", "{rec}");
        assert_eq!(rec["path2"], to, "{rec}");
        assert_eq!(rec["decision"], "deny", "{rec}");
        assert_eq!(rec["rule"], "workspace-no-replace", "{rec}");
        assert_eq!(rec["args"]["replace"], json!(false), "{rec}");
    }
    // Refused before any intent: nothing was about to change.
    assert!(!recs.iter().any(|r| r["kind"] == "intent"), "{recs:#?}");
    assert!(
        !recs
            .iter()
            .any(|r| r["op"] == "get_file_info" || r["op"] == "stat")
    );
    assert!(g.finish().success());
}

/// Sixteen moves of different files onto one free name, sent at once on one connection
/// (they run side by side): exactly one succeeds, the destination holds that file's
/// content, and every other file is still where it was with its content. Five rounds.
#[test]
fn concurrent_move_files_onto_one_name_move_exactly_one() {
    const SOURCES: u64 = 16;
    let mut g = McpGate::start(None);
    g.initialize("2025-06-18");
    for round in 0..5u64 {
        let dst = format!("dst{round}.txt");
        let src = |i: u64| format!("r{round}/s{i:02}.txt");
        for i in 0..SOURCES {
            g.dirs.put(&src(i), format!("round {round} source {i}\n"));
        }
        let first = 1000 * (round + 1);
        for i in 0..SOURCES {
            let call = move_call(&g, &src(i), &dst);
            g.request(first + i, "tools/call", call);
        }
        let (mut moved, mut refusals) = (Vec::new(), Vec::new());
        for i in 0..SOURCES {
            let r = g.response(first + i);
            let result = &r["result"];
            if result["isError"] == json!(true) {
                assert_eq!(
                    content(&g, &src(i)),
                    Some(format!("round {round} source {i}\n")),
                    "a refused move lost its source"
                );
                refusals.push(text_of(result));
            } else {
                assert!(text_of(result).starts_with("Successfully moved"), "{r}");
                assert_eq!(content(&g, &src(i)), None, "{r}");
                moved.push(i);
            }
        }
        assert_eq!(moved.len(), 1, "round {round}: moved {moved:?}");
        assert_eq!(
            content(&g, &dst),
            Some(format!("round {round} source {}\n", moved[0]))
        );
        for text in refusals {
            assert!(text.contains("rule workspace-no-replace"), "{text}");
        }
        // The move that succeeded is recorded (intent and outcome) as not replacing.
        let src_rel = src(moved[0]);
        let recs = g.dirs.audit_records();
        let done: Vec<&Value> = recs
            .iter()
            .filter(|r| r["op"] == "rename" && r["path"] == src_rel.as_str())
            .filter(|r| r["kind"] == "intent" || r["decision"] == "allow")
            .collect();
        assert_eq!(done.len(), 2, "{done:#?}");
        for rec in done {
            assert_eq!(rec["args"]["replace"], json!(false), "{rec}");
        }
    }
    assert!(g.finish().success());
}

/// `move_file` of a symbolic link moves the link itself: a move that keeps its target
/// inside the workspace succeeds (same target text, recorded as `args.target`); one
/// that would make it lead out is refused (`workspace-link-target`), and one onto an
/// existing link is refused (`workspace-no-replace`); neither changes anything on disk.
#[test]
fn move_file_of_a_symlink_moves_the_link_and_never_leads_out_or_replaces() {
    let mut g = McpGate::start(None);
    g.dirs.put("a.txt", "a\n");
    g.dirs.put("sub2/keep.txt", "k\n");
    g.dirs.put("sub/keep.txt", "k\n");
    let root = g.dirs.root.clone();
    let link = |rel: &str| std::fs::read_link(root.join(rel)).ok();
    let gone = |rel: &str| std::fs::symlink_metadata(root.join(rel)).is_err();
    std::os::unix::fs::symlink("a.txt", root.join("l")).expect("symlink l");
    std::os::unix::fs::symlink("../a.txt", root.join("sub/l")).expect("symlink sub/l");
    std::os::unix::fs::symlink("keep.txt", root.join("sub2/other")).expect("symlink other");
    g.initialize("2025-06-18");

    let r = g.call(1, "tools/call", move_call(&g, "l", "sub2/l2"));
    assert_ne!(r["isError"], json!(true), "{r}");
    assert_eq!(link("sub2/l2"), Some("a.txt".into()));
    assert!(gone("l"), "the source link is still there");

    let r = g.call(2, "tools/call", move_call(&g, "sub/l", "l3"));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text_of(&r).contains("workspace-link-target"), "{r}");
    assert_eq!(link("sub/l"), Some("../a.txt".into()));
    assert!(gone("l3"), "a refused move made its destination");

    let r = g.call(3, "tools/call", move_call(&g, "sub2/l2", "sub2/other"));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text_of(&r).contains("rule workspace-no-replace"), "{r}");
    assert_eq!(link("sub2/l2"), Some("a.txt".into()));
    assert_eq!(link("sub2/other"), Some("keep.txt".into()));
    assert_eq!(content(&g, "a.txt").as_deref(), Some("a\n"));

    let recs = g.dirs.audit_records();
    let renames: Vec<&Value> = recs
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "rename")
        .collect();
    assert_eq!(renames.len(), 3, "{recs:#?}");
    let rules: Vec<(&Value, &Value)> = renames
        .iter()
        .map(|r| (&r["decision"], &r["rule"]))
        .collect();
    assert_eq!(renames[0]["path2"], "sub2/l2", "{rules:?}");
    assert_eq!(renames[0]["decision"], "allow", "{rules:?}");
    assert_eq!(renames[0]["args"]["target"], "a.txt", "{}", renames[0]);
    assert_eq!(renames[1]["decision"], "deny", "{rules:?}");
    assert_eq!(renames[1]["rule"], "workspace-link-target", "{rules:?}");
    assert_eq!(renames[2]["decision"], "deny", "{rules:?}");
    assert_eq!(renames[2]["rule"], "workspace-no-replace", "{rules:?}");
    assert!(g.finish().success());
}
