//! The kernel wall on its own (issue 4). `fsgate-wallprobe` (a test-only program, built
//! only with the `test-bins` feature) starts exactly as `fsgate serve` does, then opens
//! paths with plain `std::fs`, bypassing every fsgate check, so only Landlock can refuse
//! them. The `fsgate` binary itself has no such method (checked below).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Gate, METHOD_NOT_FOUND, skip_or_fail};

const EACCES: i64 = 13;

/// A running `fsgate-wallprobe` on a fresh workspace.
struct Probe {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Its first line: the sandbox status and the read made before confinement.
    first: Value,
    root: std::path::PathBuf,
    _dirs: Vec<tempfile::TempDir>,
}

impl Probe {
    /// Starts the probe, or None when this build or kernel cannot show the wall (which
    /// fails the test under CI).
    fn start(test: &str, policy: Option<&str>, probe_env: Option<&str>) -> Option<Probe> {
        let bin = option_env!("CARGO_BIN_EXE_fsgate-wallprobe").unwrap_or_default();
        // Cargo names the program even when a build without the feature left it out.
        if bin.is_empty() || !std::path::Path::new(bin).exists() {
            skip_or_fail(
                test,
                "built without `--features test-bins` (scripts/test.sh has it)",
            );
            return None;
        };
        let ws = tempfile::tempdir().expect("tempdir");
        let state = tempfile::tempdir().expect("tempdir");
        let root = ws.path().canonicalize().expect("canonical");
        let mut cmd = Command::new(bin);
        cmd.arg("--workspace").arg(&root);
        cmd.arg("--audit-log").arg(state.path().join("audit.jsonl"));
        cmd.arg("--backup-dir").arg(state.path().join("backups"));
        if let Some(text) = policy {
            let file = state.path().join("policy.toml");
            std::fs::write(&file, text).expect("policy");
            cmd.arg("--policy").arg(file);
        }
        if let Some(p) = probe_env {
            cmd.env("FSGATE_TEST_PROBE", p);
        }
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn fsgate-wallprobe");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("first line");
        let first: Value = serde_json::from_str(&line).expect("status JSON");
        let probe = Probe {
            child,
            stdin,
            stdout,
            first,
            root,
            _dirs: vec![ws, state],
        };
        if probe.first["sandbox"]["enforcement"] == "not" {
            let detail = probe.first["sandbox"]["detail"].to_string();
            drop(probe);
            skip_or_fail(test, &format!("no Landlock here: {detail}"));
            return None;
        }
        Some(probe)
    }

    fn ask(&mut self, req: Value) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{req}")
            .and_then(|()| stdin.flush())
            .expect("send");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("answer");
        serde_json::from_str(&line).expect("answer JSON")
    }

    fn read(&mut self, path: &str) -> Value {
        self.ask(json!({"op": "read", "path": path}))
    }

    fn abs(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn kernel_refuses_ambient_read_outside_workspace() {
    let test = "kernel_refuses_ambient_read_outside_workspace";
    let outside = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(outside.path(), "outside secret").expect("write");
    let probe = outside.path().to_str().expect("utf-8 path").to_string();
    // The test process itself can read it.
    assert_eq!(
        std::fs::read_to_string(&probe).expect("readable"),
        "outside secret"
    );
    let Some(mut p) = Probe::start(test, None, Some(&probe)) else {
        return;
    };
    // Before confinement the same process read it...
    assert_eq!(p.first["probeBefore"]["ok"], json!(true), "{}", p.first);
    assert_eq!(p.first["sandbox"]["enforcement"], "fully", "{}", p.first);
    // ...after confinement the kernel refuses, though no fsgate check runs on this path.
    let r = p.read(&probe);
    assert_eq!(
        (r["ok"].clone(), r["errno"].clone()),
        (json!(false), json!(EACCES)),
        "{r}"
    );
    let r = p.read("/etc/passwd");
    assert_eq!(r["errno"], json!(EACCES), "{r}");
    // The wall is selective: the workspace stays readable the same way.
    std::fs::write(p.root.join("inside.txt"), "inside").expect("write");
    let inside = p.abs("inside.txt");
    assert_eq!(p.read(&inside), json!({"ok": true, "bytes": 6}));
}

#[test]
fn readonly_policy_makes_the_kernel_refuse_writes() {
    let test = "readonly_policy_makes_the_kernel_refuse_writes";
    let policy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/readonly.toml"
    ))
    .expect("readonly policy");
    let Some(mut p) = Probe::start(test, Some(&policy), None) else {
        return;
    };
    assert_eq!(
        p.first["sandbox"]["workspaceWrite"],
        json!(false),
        "{}",
        p.first
    );
    let target = p.abs("planted.txt");
    let r = p.ask(json!({"op": "write", "path": target, "content": "x"}));
    assert_eq!(
        (r["ok"].clone(), r["errno"].clone()),
        (json!(false), json!(EACCES)),
        "{r}"
    );
    assert!(!p.root.join("planted.txt").exists());
    // Reading still works in the kernel.
    std::fs::write(p.root.join("readme.md"), "hello").expect("write");
    let readme = p.abs("readme.md");
    assert_eq!(p.read(&readme)["ok"], json!(true));
}

#[test]
fn the_fsgate_binary_has_no_ambient_methods() {
    // Regression: a `test-hooks` build of `fsgate` itself answered these, and read any
    // file on a kernel without Landlock. Whatever features the suite is built with,
    // the binary under test must not.
    let g = Gate::start();
    for method in ["_fsgate_test/open_ambient", "_fsgate_test/write_ambient"] {
        let e = g.err(method, json!({"path": "/etc/passwd", "content": "x"}));
        assert_eq!(e.code, METHOD_NOT_FOUND, "{method}: {e:?}");
    }
}

#[test]
fn default_policy_kernel_allows_workspace_writes_and_atomic_replace() {
    let gate = Gate::start();
    let init = gate.ok("initialize", json!({"protocolVersion": 1}));
    if init["_meta"]["fsgate"]["sandbox"]["enforcement"] == "not" {
        skip_or_fail(
            "default_policy_kernel_allows_workspace_writes_and_atomic_replace",
            "no Landlock here",
        );
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
