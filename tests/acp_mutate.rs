//! Integration tests for `_fsgate/mkdir`, `_fsgate/rm` and `_fsgate/rename`.

use serde_json::{Value, json};

use crate::common::{Gate, NOT_FOUND, assert_code};

#[test]
fn mkdir_creates_directory() {
    let g = Gate::start();
    let r = g.ok("_fsgate/mkdir", json!({"path": g.abs("newdir")}));
    assert_eq!(r, Value::Null);
    assert!(g.path("newdir").is_dir());
}

#[test]
fn mkdir_nested_needs_recursive() {
    let g = Gate::start();
    let e = g.err("_fsgate/mkdir", json!({"path": g.abs("x/y/z")}));
    assert_eq!(e.code, NOT_FOUND, "{e:?}");
    assert!(e.message.contains("recursive"), "says what to do: {e:?}");
    // `data.path` is the path, exactly, so a client can use it.
    assert_eq!(e.data.as_ref().unwrap()["path"], json!(g.abs("x/y/z")));
    assert!(
        !g.exists("x"),
        "non-recursive mkdir must not create parents"
    );
    g.ok(
        "_fsgate/mkdir",
        json!({"path": g.abs("x/y/z"), "recursive": true}),
    );
    assert!(g.path("x/y/z").is_dir());
}

#[test]
fn rm_file() {
    let g = Gate::start();
    g.put("gone.txt", "bye");
    let r = g.ok("_fsgate/rm", json!({"path": g.abs("gone.txt")}));
    assert_eq!(r, Value::Null);
    assert!(!g.exists("gone.txt"));
}

#[test]
fn rm_missing_is_not_found() {
    let g = Gate::start();
    assert_code(
        g.call("_fsgate/rm", json!({"path": g.abs("never.txt")})),
        NOT_FOUND,
    );
}

#[test]
fn rm_empty_directory() {
    let g = Gate::start();
    std::fs::create_dir(g.path("e")).expect("mkdir");
    g.ok("_fsgate/rm", json!({"path": g.abs("e")}));
    assert!(!g.exists("e"));
}

#[test]
fn rm_non_empty_directory_requires_recursive() {
    let g = Gate::start();
    g.put("full/a.txt", "a");
    g.put("full/sub/b.txt", "b");
    g.err("_fsgate/rm", json!({"path": g.abs("full")}));
    assert_eq!(
        g.get("full/a.txt").as_deref(),
        Some(&b"a"[..]),
        "failed rm must not remove anything"
    );
    assert_eq!(g.get("full/sub/b.txt").as_deref(), Some(&b"b"[..]));
    g.ok(
        "_fsgate/rm",
        json!({"path": g.abs("full"), "recursive": true}),
    );
    assert!(!g.exists("full"));
}

#[test]
fn rm_symlink_removes_link_not_target() {
    let g = Gate::start();
    g.put("target.txt", "still here");
    g.symlink("target.txt", "link.txt");
    g.ok("_fsgate/rm", json!({"path": g.abs("link.txt")}));
    assert!(!g.exists("link.txt"), "the link must be gone");
    assert_eq!(
        g.get("target.txt").as_deref(),
        Some(&b"still here"[..]),
        "the target must survive"
    );
}

#[test]
fn rm_symlink_to_directory_removes_link_not_contents() {
    let g = Gate::start();
    g.put("realdir/keep.txt", "keep");
    g.symlink("realdir", "dirlink");
    g.ok("_fsgate/rm", json!({"path": g.abs("dirlink")}));
    assert!(!g.exists("dirlink"), "the link must be gone");
    assert_eq!(
        g.get("realdir/keep.txt").as_deref(),
        Some(&b"keep"[..]),
        "rm followed the symlink"
    );
}

#[test]
fn recursive_rm_of_symlink_to_directory_never_empties_the_target() {
    let g = Gate::start();
    g.put("realdir/keep.txt", "keep");
    g.put("realdir/sub/more.txt", "more");
    g.symlink("realdir", "dirlink");
    // Removing the link is allowed to be refused; following it is not.
    let _ = g.call(
        "_fsgate/rm",
        json!({"path": g.abs("dirlink"), "recursive": true}),
    );
    assert_eq!(
        g.get("realdir/keep.txt").as_deref(),
        Some(&b"keep"[..]),
        "rm -r followed the symlink"
    );
    assert_eq!(
        g.get("realdir/sub/more.txt").as_deref(),
        Some(&b"more"[..]),
        "rm -r followed the symlink"
    );
}

#[test]
fn rename_file_and_directory() {
    let g = Gate::start();
    g.put("old.txt", "content");
    let r = g.ok(
        "_fsgate/rename",
        json!({"oldPath": g.abs("old.txt"), "newPath": g.abs("new.txt")}),
    );
    assert_eq!(r, Value::Null);
    assert!(!g.exists("old.txt"));
    assert_eq!(g.get("new.txt").as_deref(), Some(&b"content"[..]));
    g.put("d1/inner.txt", "i");
    g.ok(
        "_fsgate/rename",
        json!({"oldPath": g.abs("d1"), "newPath": g.abs("d2")}),
    );
    assert_eq!(g.get("d2/inner.txt").as_deref(), Some(&b"i"[..]));
    assert!(!g.exists("d1"));
}

#[test]
fn rename_missing_source_is_not_found() {
    let g = Gate::start();
    assert_code(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("ghost"), "newPath": g.abs("b")}),
        ),
        NOT_FOUND,
    );
    assert!(!g.exists("b"));
}

/// A link is moved as a link (never followed), replacing a link at the destination;
/// one that would lead out of the workspace from its new place is refused, recorded.
#[test]
fn rename_of_a_symlink_moves_the_link_and_one_leading_out_is_refused() {
    let g = Gate::start();
    g.put("target.txt", "t\n");
    g.put("other.txt", "o\n");
    g.symlink("target.txt", "link.txt");
    g.symlink("other.txt", "old.txt");
    g.ok(
        "_fsgate/rename",
        json!({"oldPath": g.abs("link.txt"), "newPath": g.abs("old.txt")}),
    );
    let link = |rel: &str| std::fs::read_link(g.path(rel)).ok();
    assert_eq!(link("old.txt"), Some("target.txt".into()));
    assert_eq!(link("link.txt"), None);
    assert_eq!(g.get("target.txt").as_deref(), Some(&b"t\n"[..]));
    assert_eq!(g.get("other.txt").as_deref(), Some(&b"o\n"[..]));
    g.symlink("../target.txt", "d/up");
    let e = assert_code(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("d/up"), "newPath": g.abs("up")}),
        ),
        crate::common::REFUSED,
    );
    assert_eq!(e.data.as_ref().unwrap()["rule"], "workspace-link-target");
    assert_eq!(link("d/up"), Some("../target.txt".into()));
    assert!(std::fs::symlink_metadata(g.path("up")).is_err());
    let log = std::fs::read_to_string(&g.audit_log).expect("audit log");
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let renames: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "rename")
        .collect();
    assert_eq!(renames.len(), 2, "{renames:?}");
    assert_eq!(renames[0]["decision"], "allow");
    assert_eq!(renames[0]["args"]["target"], "target.txt");
    assert_eq!(renames[1]["decision"], "deny");
    assert_eq!(renames[1]["rule"], "workspace-link-target");
}

#[test]
fn an_overlong_name_is_invalid_params_with_a_short_message() {
    let g = Gate::start();
    let long = "n".repeat(300);
    let path = g.abs(&format!("{long}/{long}/{long}/{long}/{long}.txt"));
    let e = g.err("fs/write_text_file", json!({"path": path, "content": "x"}));
    assert_eq!(e.code, crate::common::INVALID_PARAMS, "{e:?}");
    assert!(e.message.contains("too long"), "{e:?}");
    assert!(
        e.message.len() < 600,
        "the whole path was echoed: {} bytes",
        e.message.len()
    );
}

#[test]
fn rename_onto_itself_says_so() {
    let g = Gate::start();
    g.put("same.txt", "s\n");
    let e = g.err(
        "_fsgate/rename",
        json!({"oldPath": g.abs("same.txt"), "newPath": g.abs("same.txt")}),
    );
    assert_eq!(e.code, crate::common::INVALID_PARAMS, "{e:?}");
    assert!(e.message.contains("same entry"), "{e:?}");
    assert_eq!(g.get("same.txt").as_deref(), Some(&b"s\n"[..]));
}

/// Reads are answered in batches beside changes, yet a read sees every change the
/// connection sent before it: pipelined without waiting, each read after a write (or a
/// removal) of the same path must see it. The demo pipelines exactly like this.
#[test]
fn pipelined_reads_see_the_changes_sent_before_them() {
    let g = Gate::start();
    g.put("gone.txt", "old\n");
    let mut checks = Vec::new();
    for i in 0..40 {
        let path = g.abs(&format!("d{i}/f.txt"));
        let content = format!("version {i}\n");
        g.send(
            "fs/write_text_file",
            json!({"path": path, "content": content}),
        );
        checks.push((g.send("fs/read_text_file", json!({"path": path})), content));
    }
    g.send("_fsgate/rm", json!({"path": g.abs("gone.txt")}));
    let listed = g.send("_fsgate/ls", json!({"path": g.abs("")}));
    let stat = g.send("_fsgate/stat", json!({"path": g.abs("gone.txt")}));
    for (id, content) in checks {
        assert_eq!(g.wait_response(&id)["result"]["content"], json!(content));
    }
    let names: Vec<Value> = g.wait_response(&listed)["result"]["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].clone())
        .collect();
    assert!(names.contains(&json!("d39")), "{names:?}");
    assert!(!names.contains(&json!("gone.txt")), "{names:?}");
    assert_code(g.wait(&stat), NOT_FOUND);
}
