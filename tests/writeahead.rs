//! Write-ahead records (issue 10, point 1): a change happens only after its intent is
//! durable in the audit log. An audit log that refuses writes (immutable, removed, moved
//! away) means every change is refused and the workspace keeps its content; a `kill -9`
//! at any of the change's syscalls leaves an intent that the next start reconciles with
//! what the disk shows, and the chain verifies with no intent left open.
//!
//! Included from tests/all.rs as `mod writeahead;` (uses `crate::common`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Gate, INTERNAL, SESSION, bin, run_cli};

fn sha(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record {l:?}: {e}")))
        .collect()
}

/// Every change that can be asked for, on a workspace holding `a.txt` = "old" and
/// `dir/b.txt`.
fn every_change(g: &Gate) -> Vec<(&'static str, Value)> {
    vec![
        (
            "fs/write_text_file",
            json!({"path": g.abs("a.txt"), "content": "new"}),
        ),
        (
            "fs/write_text_file",
            json!({"path": g.abs("n/e/w.txt"), "content": "new"}),
        ),
        (
            "_fsgate/edit_text_file",
            json!({"path": g.abs("a.txt"), "oldText": "old", "newText": "new"}),
        ),
        (
            "_fsgate/mkdir",
            json!({"path": g.abs("made"), "recursive": true}),
        ),
        (
            "_fsgate/rm",
            json!({"path": g.abs("dir"), "recursive": true}),
        ),
        (
            "_fsgate/rename",
            json!({"path": g.abs("a.txt"), "oldPath": g.abs("a.txt"), "newPath": g.abs("moved.txt")}),
        ),
    ]
}

fn assert_untouched(g: &Gate) {
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"old"[..]));
    assert_eq!(g.get("dir/b.txt").as_deref(), Some(&b"b"[..]));
    for gone in ["n", "made", "moved.txt"] {
        assert!(
            !g.exists(gone),
            "{gone} was created although its intent was not recorded"
        );
    }
}

/// Runs `chattr` (root, on a filesystem with the immutable attribute).
fn chattr(flag: &str, path: &Path) {
    let out = Command::new("chattr")
        .arg(flag)
        .arg(path)
        .output()
        .expect("run chattr (e2fsprogs)");
    assert!(
        out.status.success(),
        "chattr {flag} {}: {} (these tests need root and a filesystem with the immutable attribute)",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Clears the immutable attribute again, even when the test fails.
struct Immutable(Vec<PathBuf>);

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("chattr").arg("-i").arg(p).status();
        }
    }
}

#[test]
fn an_immutable_audit_log_refuses_every_change_and_nothing_changes() {
    let g = Gate::start();
    g.put("a.txt", "old");
    g.put("dir/b.txt", "b");
    // A read first, so the log has reserved its space before it becomes immutable.
    g.ok("fs/read_text_file", json!({"path": g.abs("a.txt")}));
    let dir = g.audit_log.parent().expect("log dir").to_path_buf();
    let guard = Immutable(vec![g.audit_log.clone(), dir.clone()]);
    chattr("+i", &g.audit_log);
    chattr("+i", &dir);
    for (method, params) in every_change(&g) {
        let e = g.err(method, params);
        assert_eq!(e.code, INTERNAL, "{method}: {e:?}");
        assert!(
            e.message.contains("nothing was changed"),
            "{method}: {}",
            e.message
        );
    }
    assert_untouched(&g);
    drop(guard);
    // Writable again: changes resume, each with its intent and outcome.
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("a.txt"), "content": "new"}),
    );
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"new"[..]));
    let recs = records(&g.audit_log);
    let intent = recs
        .iter()
        .find(|r| r["kind"] == "intent")
        .expect("an intent record");
    assert_eq!(intent["sha256"], sha("new"));
    assert_eq!(intent["args"]["oldSha256"], sha("old"));
    let outcome = recs.last().expect("records");
    assert_eq!(outcome["args"]["intent"], intent["seq"], "{outcome}");
}

#[test]
fn a_removed_or_replaced_audit_directory_refuses_every_change() {
    for replace in [false, true] {
        let g = Gate::start();
        g.put("a.txt", "old");
        g.put("dir/b.txt", "b");
        g.ok("fs/read_text_file", json!({"path": g.abs("a.txt")}));
        let dir = g.audit_log.parent().expect("log dir").to_path_buf();
        if replace {
            std::fs::rename(&dir, dir.with_extension("moved")).expect("move log dir");
            std::fs::create_dir(&dir).expect("new log dir");
        } else {
            std::fs::remove_dir_all(&dir).expect("remove log dir");
        }
        for (method, params) in every_change(&g) {
            let e = g.err(method, params);
            assert_eq!(e.code, INTERNAL, "replace={replace} {method}: {e:?}");
        }
        assert_untouched(&g);
    }
}

// ---- kill -9 at syscall-precise points --------------------------------------------

/// A scratch workspace, state directory and policy for one sweep.
struct Scene {
    _dirs: Vec<tempfile::TempDir>,
    root: PathBuf,
    log: PathBuf,
    backups: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let ws = tempfile::tempdir().expect("tempdir");
        let state = tempfile::tempdir().expect("tempdir");
        let root = ws.path().canonicalize().expect("canonical");
        let st = state.path().canonicalize().expect("canonical");
        std::fs::write(root.join("a.txt"), "old").expect("seed");
        std::fs::create_dir_all(root.join("dir")).expect("seed");
        std::fs::write(root.join("dir/b.txt"), "b").expect("seed");
        Scene {
            log: st.join("audit").join("audit.jsonl"),
            backups: st.join("backups"),
            root,
            _dirs: vec![ws, state],
        }
    }

    fn serve(&self, program: &str, pre: &[String]) -> Command {
        self.serve_on(program, pre, "acp")
    }

    fn serve_on(&self, program: &str, pre: &[String], transport: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(pre)
            .arg("serve")
            .args(["--transport", transport])
            .arg("--workspace")
            .arg(&self.root)
            .arg("--audit-log")
            .arg(&self.log)
            .arg("--backup-dir")
            .arg(&self.backups)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// Sends one request to a gateway that strace kills at the `n`th `syscall`; Some
    /// if it was killed, None if it ran to the end (n is past the last such call).
    fn run_killed(&self, op: &str, syscall: &str, n: u32) -> Option<()> {
        let pre: Vec<String> = [
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            &format!("trace={syscall}"),
            "-e",
            &format!("inject={syscall}:signal=KILL:when={n}"),
            bin(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (transport, input) = input(self, op);
        let mut child = self
            .serve_on("strace", &pre, transport)
            .spawn()
            .expect("run strace");
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = std::io::Write::write_all(&mut stdin, input.as_bytes());
        // End of input: the gateway answers the request, then stops.
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                return (!st.success()).then_some(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("gateway under strace did not finish");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts and stops a plain gateway (it reconciles at start).
    fn restart(&self) {
        let mut child = self.serve(bin(), &[]).spawn().expect("spawn fsgate");
        drop(child.stdin.take());
        let st = child.wait().expect("wait");
        assert!(st.success(), "restart failed: {st:?}");
    }

    fn content(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root.join(rel)).ok()
    }
}

/// After a kill and a restart: the chain verifies with no intent left open, every
/// intent is closed, and what each reconciliation says matches the disk.
fn check_after_crash(s: &Scene, op: &str, what: &str) {
    // MCP `move_file`: a rename that never replaces, onto the same free name.
    let op = if op == "move" { "rename" } else { op };
    let out = run_cli(&["audit", "verify", s.log.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what}: verify failed:\n{text}");
    assert!(
        !text.contains("intent seq"),
        "{what}: intent left open:\n{text}"
    );
    let recs = records(&s.log);
    for r in recs.iter().filter(|r| r["kind"] == "reconciled") {
        let found = r["details"]["found"].as_str().unwrap_or_default();
        let a = s.content("a.txt");
        let expect = match (op, found) {
            ("write-new", "applied") => s.content("n.txt").as_deref() == Some(&b"new"[..]),
            ("write-new", "not-applied") => s.content("n.txt").is_none(),
            ("write", "applied") | ("edit", "applied") => a.as_deref() == Some(&b"new"[..]),
            ("write", "not-applied") | ("edit", "not-applied") => a.as_deref() == Some(&b"old"[..]),
            ("mkdir", "applied") => s.root.join("made").is_dir(),
            ("mkdir", "not-applied") => !s.root.join("made").exists(),
            ("rm", "applied") => !s.root.join("dir").exists(),
            ("rename", "applied") => {
                a.is_none() && s.content("moved.txt").as_deref() == Some(&b"old"[..])
            }
            ("rename", "not-applied") => {
                a.as_deref() == Some(&b"old"[..]) && s.content("moved.txt").is_none()
            }
            _ => found == "neither",
        };
        assert!(
            expect,
            "{what}: reconciled {found:?} but the disk differs: {r}"
        );
    }
    // Whatever the disk shows, a record announced it.
    let changed = match op {
        "write-new" => s.content("n.txt").is_some(),
        "write" | "edit" => s.content("a.txt").as_deref() != Some(&b"old"[..]),
        "mkdir" => s.root.join("made").exists(),
        "rm" => !s.root.join("dir/b.txt").exists(),
        _ => s.content("a.txt").is_none(),
    };
    if changed {
        assert!(
            recs.iter().any(|r| r["kind"] == "intent"),
            "{what}: the workspace changed with no intent in the log"
        );
    }
}

/// The door and the input lines that ask for `op`: MCP's `move_file` (its handshake,
/// then the call), or the ACP request of every other change.
fn input(s: &Scene, op: &str) -> (&'static str, String) {
    if op != "move" {
        return ("acp", format!("{}\n", request(s, op)));
    }
    let p = |rel: &str| s.root.join(rel).to_string_lossy().into_owned();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "move_file",
            "arguments": {"source": p("a.txt"), "destination": p("moved.txt")}}}),
    ];
    ("mcp", lines.iter().map(|l| format!("{l}\n")).collect())
}

fn request(s: &Scene, op: &str) -> Value {
    let p = |rel: &str| s.root.join(rel).to_string_lossy().into_owned();
    let (method, params) = match op {
        "write-new" => (
            "fs/write_text_file",
            json!({"path": p("n.txt"), "content": "new"}),
        ),
        "write" => (
            "fs/write_text_file",
            json!({"path": p("a.txt"), "content": "new"}),
        ),
        "edit" => (
            "_fsgate/edit_text_file",
            json!({"path": p("a.txt"), "oldText": "old", "newText": "new"}),
        ),
        "mkdir" => (
            "_fsgate/mkdir",
            json!({"path": p("made"), "recursive": true}),
        ),
        "rm" => ("_fsgate/rm", json!({"path": p("dir"), "recursive": true})),
        _ => (
            "_fsgate/rename",
            json!({"oldPath": p("a.txt"), "newPath": p("moved.txt")}),
        ),
    };
    let mut params = params;
    params["sessionId"] = json!(SESSION);
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

#[test]
fn kill_9_at_every_syscall_of_a_change_then_restart_reconciles_it() {
    // `-f`: the syncs a write runs beside its request (content, backup file, backup
    // directory) are killed at too, on whichever thread runs them.
    let sweeps: &[(&str, &[&str])] = &[
        ("write", &["renameat", "linkat", "fdatasync", "fsync"]),
        ("write-new", &["linkat", "fdatasync", "fsync"]),
        ("edit", &["renameat", "fdatasync", "fsync"]),
        ("mkdir", &["mkdirat", "fdatasync"]),
        ("rm", &["unlinkat", "fdatasync"]),
        ("rename", &["renameat", "fdatasync"]),
        ("move", &["renameat2", "fdatasync", "fsync"]),
    ];
    let (mut kills, mut moves_found) = (0, Vec::new());
    for (op, syscalls) in sweeps {
        for syscall in *syscalls {
            for n in 1..=24 {
                let s = Scene::new();
                let what = format!("{op}, kill at {syscall} #{n}");
                if s.run_killed(op, syscall, n).is_none() {
                    break;
                }
                kills += 1;
                s.restart();
                check_after_crash(&s, op, &what);
                if *op == "move" {
                    let recs = records(&s.log);
                    let found = recs.iter().filter(|r| r["kind"] == "reconciled");
                    moves_found.extend(found.map(|r| r["details"]["found"].clone()));
                }
            }
        }
    }
    eprintln!("writeahead: {kills} kills, each reconciled; move_file: {moves_found:?}");
    // A no-replace rename killed at its rename is reconciled as not applied. Killed at a
    // later sync it may be either, by which syncs the helper threads made first (spare
    // files are made and synced off the request's path): `check_after_crash` holds each
    // verdict to what the disk shows, so only the deterministic one is required here.
    assert!(
        moves_found.contains(&json!("not-applied")),
        "{moves_found:?}"
    );
    assert!(
        kills >= 20,
        "only {kills} kill points were reached: is strace working?"
    );
}

#[test]
fn every_sync_of_a_change_reaches_the_disk() {
    // Regression: the root's handle is O_PATH, so syncing it after a rename failed with
    // EBADF, silently, and the new directory entry was not durable before the reply.
    let s = Scene::new();
    let trace = s._dirs[1].path().join("trace.txt");
    let pre: Vec<String> = ["-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"]
        .iter()
        .map(|a| a.to_string())
        .chain([trace.display().to_string(), bin().to_string()])
        .collect();
    let mut child = s.serve("strace", &pre).spawn().expect("run strace");
    let mut stdin = child.stdin.take().expect("stdin");
    for op in ["write", "mkdir", "rename", "rm"] {
        let _ = std::io::Write::write_all(&mut stdin, format!("{}\n", request(&s, op)).as_bytes());
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    let text = std::fs::read_to_string(&trace).expect("trace");
    assert!(text.contains("fsync("), "no fsync traced:\n{text}");
    let failed: Vec<&str> = text.lines().filter(|l| l.contains("= -1")).collect();
    assert!(
        failed.is_empty(),
        "syncs that failed:\n{}",
        failed.join("\n")
    );
}

impl Scene {
    /// `fsgate backup restore a.txt` under strace, killed at the `n`th `syscall`; Some if
    /// it was killed, None if it ran to the end.
    fn restore_killed(&self, syscall: &str, n: u32) -> Option<()> {
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-o", "/dev/null"])
            .arg(format!("-etrace={syscall}"))
            .arg(format!("-einject={syscall}:signal=KILL:when={n}"))
            .arg(bin())
            .args(["backup", "restore", "--workspace"])
            .arg(&self.root)
            .arg("--audit-log")
            .arg(&self.log)
            .arg("--backup-dir")
            .arg(&self.backups)
            .arg("a.txt")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let st = cmd.status().expect("run strace");
        (!st.success()).then_some(())
    }
}

#[test]
fn kill_9_during_a_backup_restore_then_restart_reconciles_it() {
    let mut kills = 0;
    for syscall in ["renameat", "fdatasync", "fsync"] {
        for n in 1..=24 {
            let s = Scene::new();
            // A change through the gateway leaves "old" in the backup store.
            let mut child = s.serve(bin(), &[]).spawn().expect("spawn");
            let mut stdin = child.stdin.take().expect("stdin");
            let _ = std::io::Write::write_all(
                &mut stdin,
                format!("{}\n", request(&s, "write")).as_bytes(),
            );
            drop(stdin);
            assert!(child.wait().expect("wait").success());
            assert_eq!(s.content("a.txt").as_deref(), Some(&b"new"[..]));
            let what = format!("restore, kill at {syscall} #{n}");
            if s.restore_killed(syscall, n).is_none() {
                break;
            }
            kills += 1;
            s.restart();
            let out = run_cli(&["audit", "verify", s.log.to_str().expect("utf-8")]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{what}: verify failed:\n{text}");
            assert!(
                !text.contains("intent seq"),
                "{what}: intent left open:\n{text}"
            );
            let recs = records(&s.log);
            let intent = recs
                .iter()
                .find(|r| r["kind"] == "intent" && r["op"] == "restore");
            let a = s.content("a.txt");
            match intent {
                // Killed before its intent: the file must be untouched.
                None => assert_eq!(a.as_deref(), Some(&b"new"[..]), "{what}"),
                Some(i) => {
                    let closed = recs.iter().any(|r| {
                        r["args"]["intent"] == i["seq"] || r["details"]["intent"] == i["seq"]
                    });
                    assert!(closed, "{what}: restore intent not closed");
                    if let Some(r) = recs.iter().find(|r| r["kind"] == "reconciled") {
                        let want = match r["details"]["found"].as_str() {
                            Some("applied") => &b"old"[..],
                            Some("not-applied") => &b"new"[..],
                            other => panic!("{what}: reconciled {other:?}"),
                        };
                        assert_eq!(a.as_deref(), Some(want), "{what}: {r}");
                    }
                }
            }
        }
    }
    eprintln!("writeahead: {kills} kills during restores, each reconciled");
    assert!(
        kills >= 5,
        "only {kills} kill points reached: is strace working?"
    );
}
