//! Walks the gateway cannot see to the end, and names that look like the gateway's own
//! (issue 11, points 1 and 2): what the gateway will not inspect, it will not change,
//! and no name an agent can create changes how a file is treated.
//!
//! Included from tests/all.rs as `mod escape_walks;` (uses `crate::common`).

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Gate, glob_paths, grep_hits, run_cli, skip_or_fail};

/// The JSON-RPC code for a limit.
const LIMIT: i64 = -32004;

/// `n` nested directories named `d`, as a workspace-relative path.
fn chain(n: usize) -> String {
    vec!["d"; n].join("/")
}

/// The workspace paths `fsgate backup list --json` knows.
fn backed_up(g: &Gate) -> Vec<String> {
    let dir = g.state.join("backups");
    let out = run_cli(&[
        "backup",
        "list",
        "--backup-dir",
        dir.to_str().unwrap_or(""),
        "--json",
    ]);
    if !out.status.success() {
        // No store yet: nothing was backed up.
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .flat_map(|l| match serde_json::from_str::<Value>(l) {
            Ok(Value::Array(a)) => a,
            Ok(v) => vec![v],
            Err(_) => Vec::new(),
        })
        .filter_map(|v| v["rel_path"].as_str().map(str::to_owned))
        .collect()
}

/// Every file name under `dir` on disk (relative), however deep.
fn files_on_disk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[test]
fn a_user_dir_moved_below_a_deep_chain_is_never_removed_without_its_backup() {
    let g = Gate::start();
    g.put("src/main.rs", "fn main() {}\n");
    g.put("src/lib/util.rs", "pub fn util() {}\n");
    // The agent builds a chain deeper than any walk looks, moves the user's directory
    // to its bottom and removes the top.
    let bottom = chain(300);
    let built = g.call(
        "_fsgate/mkdir",
        json!({"sessionId": "s", "path": g.abs(&bottom), "recursive": true}),
    );
    let moved = g.call(
        "_fsgate/rename",
        json!({"sessionId": "s", "oldPath": g.abs("src"), "newPath": g.abs(&format!("{bottom}/src"))}),
    );
    let removed = g.call(
        "_fsgate/rm",
        json!({"sessionId": "s", "path": g.abs("d"), "recursive": true}),
    );
    let on_disk = files_on_disk(&g.root);
    let saved = backed_up(&g);
    for name in ["main.rs", "util.rs"] {
        let kept = on_disk.iter().any(|p| p.ends_with(name));
        let restorable = saved.iter().any(|p| p.ends_with(name));
        assert!(
            kept || restorable,
            "{name} was deleted without a backup (mkdir {built:?}, rename {moved:?}, rm {removed:?}; backups {saved:?})"
        );
    }
    // The gateway refuses to nest that deep at all: the chain never existed.
    let err = built.expect_err("a 300-level mkdir is refused");
    assert_eq!(err.code, LIMIT, "{err:?}");
    assert!(err.message.contains("256"), "{err:?}");
}

#[test]
fn a_tree_deeper_than_the_walk_is_neither_removed_nor_moved() {
    let g = Gate::start();
    // Made outside the gateway (a user's tool, a checkout): 300 levels, a secret at 301.
    let bottom = chain(300);
    g.put(&format!("{bottom}/.env"), "API_KEY=hunter2\n");
    g.put(&format!("{bottom}/notes.txt"), "deep notes\n");
    g.put("d/top.txt", "top\n");
    let err = g.err(
        "_fsgate/rm",
        json!({"sessionId": "s", "path": g.abs("d"), "recursive": true}),
    );
    assert_eq!(err.code, LIMIT, "{err:?}");
    assert!(
        err.message.contains("256") && err.message.contains("levels"),
        "{err:?}"
    );
    assert!(
        g.exists(&format!("{bottom}/.env")),
        "the deep .env was deleted"
    );
    assert!(
        g.exists("d/top.txt"),
        "rm refused, yet something was removed"
    );
    let err = g.err(
        "_fsgate/rename",
        json!({"sessionId": "s", "oldPath": g.abs("d"), "newPath": g.abs("moved")}),
    );
    assert_eq!(err.code, LIMIT, "{err:?}");
    assert!(g.exists(&format!("{bottom}/.env")));
    // Read-only walks say they were cut instead of answering as if complete.
    let res = g.ok(
        "_fsgate/glob",
        json!({"sessionId": "s", "pattern": "**/*.txt"}),
    );
    assert_eq!(res["truncated"], json!(true), "{res}");
    assert!(glob_paths(&res).iter().any(|p| p.ends_with("d/top.txt")));
    let res = g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "notes", "path": g.abs("d")}),
    );
    assert_eq!(res["truncated"], json!(true), "{res}");
}

#[test]
fn a_tree_within_the_limit_is_removed_whole_with_every_file_backed_up() {
    let g = Gate::start();
    let bottom = chain(250);
    g.put(&format!("{bottom}/deep.txt"), "deep\n");
    g.put("d/top.txt", "top\n");
    g.ok(
        "_fsgate/rm",
        json!({"sessionId": "s", "path": g.abs("d"), "recursive": true}),
    );
    assert!(!g.exists("d"));
    let saved = backed_up(&g);
    assert!(saved.contains(&format!("{bottom}/deep.txt")), "{saved:?}");
    assert!(saved.contains(&"d/top.txt".to_owned()), "{saved:?}");
}

#[test]
fn names_like_the_gateways_temp_files_are_ordinary_names() {
    let g = Gate::start();
    g.put("src/.fsgate-tmp-payload.js", "const needle = 1;\n");
    g.put("src/user.txt", "the user's own words\n");
    let ls = g.ok(
        "_fsgate/ls",
        json!({"sessionId": "s", "path": g.abs("src")}),
    );
    let names: Vec<&str> = ls["entries"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&".fsgate-tmp-payload.js"), "{ls}");
    let globbed = glob_paths(&g.ok(
        "_fsgate/glob",
        json!({"sessionId": "s", "pattern": "**/*.js"}),
    ));
    assert!(
        globbed
            .iter()
            .any(|p| p.ends_with("src/.fsgate-tmp-payload.js")),
        "{globbed:?}"
    );
    let hits = grep_hits(&g.ok(
        "_fsgate/grep",
        json!({"sessionId": "s", "pattern": "needle"}),
    ));
    assert!(
        hits.iter()
            .any(|(p, _, _)| p.ends_with(".fsgate-tmp-payload.js")),
        "{hits:?}"
    );
    // A user file renamed to such a name, then its directory removed: backed up.
    g.ok(
        "_fsgate/rename",
        json!({"sessionId": "s", "oldPath": g.abs("src/user.txt"), "newPath": g.abs("src/.fsgate-tmp-x")}),
    );
    g.ok(
        "_fsgate/rm",
        json!({"sessionId": "s", "path": g.abs("src"), "recursive": true}),
    );
    let saved = backed_up(&g);
    for p in ["src/.fsgate-tmp-x", "src/.fsgate-tmp-payload.js"] {
        assert!(
            saved.contains(&p.to_owned()),
            "{p} not backed up: {saved:?}"
        );
    }
}

#[test]
fn many_writes_under_the_kernel_sandbox_leave_no_stray_names() {
    let test = "many_writes_under_the_kernel_sandbox_leave_no_stray_names";
    let g = Gate::with_env(&[("RUST_LOG", "fsgate=info")]);
    let init = g.ok("initialize", json!({"protocolVersion": 1}));
    let enforced = &init["_meta"]["fsgate"]["sandbox"]["enforcement"];
    if enforced == "not" || enforced.is_null() {
        skip_or_fail(test, &format!("no Landlock here: {init}"));
        return;
    }
    for i in 0..200 {
        let path = g.abs(&format!("w/f{}.txt", i % 7));
        g.ok(
            "fs/write_text_file",
            json!({"sessionId": "s", "path": path, "content": format!("version {i}\n")}),
        );
    }
    let mut names = files_on_disk(&g.root.join("w"));
    names.sort();
    let want: Vec<String> = (0..7).map(|i| format!("f{i}.txt")).collect();
    assert_eq!(names, want, "stray names after the writes");
    assert_eq!(g.get("w/f3.txt").as_deref(), Some(&b"version 199\n"[..]));
    // Which temporary file the writes used here (for the record; both are correct).
    let named = g.stderr().contains("cannot link an O_TMPFILE");
    eprintln!(
        "{test}: temporary files were {}",
        if named {
            "named (fallback)"
        } else {
            "unnamed (O_TMPFILE)"
        }
    );
}
