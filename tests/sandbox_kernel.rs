//! The kernel wall on its own (issue 4): with the test-only `test-hooks` feature the
//! gateway has methods that open paths with plain `std::fs`, bypassing every fsgate gate,
//! so only Landlock can refuse them.

use serde_json::{Value, json};

use crate::common::Gate;

const EACCES: i64 = 13;

/// The sandbox status from `initialize`, or None (after printing why) when this kernel
/// has no Landlock and the test cannot say anything.
fn sandbox_or_skip(gate: &Gate, test: &str) -> Option<Value> {
    let init = gate.ok("initialize", json!({"protocolVersion": 1}));
    let sandbox = init["_meta"]["fsgate"]["sandbox"].clone();
    if sandbox["enforcement"] == json!("not") {
        eprintln!(
            "SKIPPED {test}: this kernel has no Landlock ({})",
            sandbox["detail"]
        );
        return None;
    }
    assert!(
        sandbox["abi"].as_u64().is_some(),
        "sandbox status has an ABI: {sandbox}"
    );
    Some(init)
}

#[test]
fn kernel_refuses_ambient_read_outside_workspace() {
    let outside = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(outside.path(), "outside secret").expect("write");
    let probe = outside.path().to_str().expect("utf-8 path").to_string();
    // The test process itself can read it.
    assert_eq!(
        std::fs::read_to_string(&probe).expect("readable"),
        "outside secret"
    );
    let gate = Gate::with_env(&[("FSGATE_TEST_PROBE", &probe)]);
    let Some(init) = sandbox_or_skip(&gate, "kernel_refuses_ambient_read_outside_workspace") else {
        return;
    };
    // Before confinement the same gateway process read it...
    assert_eq!(
        init["_meta"]["fsgate"]["testProbeBefore"]["ok"],
        json!(true),
        "{init}"
    );
    // ...after confinement the kernel refuses, though no fsgate check runs on this path.
    let r = gate.ok("_fsgate_test/open_ambient", json!({"path": probe}));
    assert_eq!(r["ok"], json!(false), "{r}");
    assert_eq!(r["errno"], json!(EACCES), "{r}");
    let r = gate.ok("_fsgate_test/open_ambient", json!({"path": "/etc/passwd"}));
    assert_eq!(r["errno"], json!(EACCES), "{r}");
    // The wall is selective: the workspace stays readable through the same method.
    gate.put("inside.txt", "inside");
    let r = gate.ok(
        "_fsgate_test/open_ambient",
        json!({"path": gate.abs("inside.txt")}),
    );
    assert_eq!(r, json!({"ok": true, "bytes": 6}));
}

#[test]
fn readonly_policy_makes_the_kernel_refuse_writes() {
    let policy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/readonly.toml"
    ))
    .expect("readonly policy");
    let gate = Gate::with_policy(&policy);
    let Some(init) = sandbox_or_skip(&gate, "readonly_policy_makes_the_kernel_refuse_writes")
    else {
        return;
    };
    assert_eq!(
        init["_meta"]["fsgate"]["sandbox"]["workspaceWrite"],
        json!(false)
    );
    let target = gate.abs("planted.txt");
    let r = gate.ok(
        "_fsgate_test/write_ambient",
        json!({"path": target, "content": "x"}),
    );
    assert_eq!(r["ok"], json!(false), "{r}");
    assert_eq!(r["errno"], json!(EACCES), "{r}");
    assert!(!gate.exists("planted.txt"));
    // Reading still works in the kernel.
    gate.put("readme.md", "hello");
    let r = gate.ok(
        "_fsgate_test/open_ambient",
        json!({"path": gate.abs("readme.md")}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
}

#[test]
fn default_policy_kernel_allows_workspace_writes_and_atomic_replace() {
    let gate = Gate::start();
    if sandbox_or_skip(&gate, "default_policy_kernel_allows_workspace_writes").is_none() {
        return;
    }
    // Every method keeps working under confinement: atomic writes, backups, renames
    // across directories (Refer right), rm.
    gate.ok(
        "fs/write_text_file",
        json!({"sessionId": "s", "path": gate.abs("a/b.txt"), "content": "1"}),
    );
    gate.ok(
        "fs/write_text_file",
        json!({"sessionId": "s", "path": gate.abs("a/b.txt"), "content": "2"}),
    );
    gate.ok(
        "_fsgate/mkdir",
        json!({"sessionId": "s", "path": gate.abs("c")}),
    );
    gate.ok(
        "_fsgate/rename",
        json!({"sessionId": "s", "oldPath": gate.abs("a/b.txt"), "newPath": gate.abs("c/b.txt")}),
    );
    assert_eq!(gate.get("c/b.txt").as_deref(), Some(&b"2"[..]));
    gate.ok(
        "_fsgate/rm",
        json!({"sessionId": "s", "path": gate.abs("c"), "recursive": true}),
    );
    assert!(!gate.exists("c"));
}
