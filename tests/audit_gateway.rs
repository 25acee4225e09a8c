//! The audit log as the real gateway writes it, and `fsgate audit ...` on the command
//! line: one record per request, both verifiers (fsgate and audit/verify.py) agree on
//! the gateway's own log, intact and tampered, and on every test vector; exit codes.
//!
//! Included from tests/all.rs as `mod audit_gateway;` (uses `crate::common`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Gate, TIMEOUT, run_cli};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// python3 with `cryptography`, or a printed reason to skip the Python half.
fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import cryptography"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::common::skip_or_fail(
            "audit_gateway (Python half)",
            "python3 with the `cryptography` package is not available",
        );
    }
    ok
}

/// `fsgate audit verify --json ARGS`: exit code and report.
fn fsgate_verify(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["audit", "verify", "--json"];
    all.extend_from_slice(args);
    let out = run_cli(&all);
    let rep = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from fsgate audit verify ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), rep)
}

/// `python3 audit/verify.py --json ARGS`: exit code and report.
fn python_verify(args: &[&str]) -> (i32, Value) {
    let out = Command::new("python3")
        .arg(repo().join("audit").join("verify.py"))
        .arg("--json")
        .args(args)
        .output()
        .expect("run python3");
    let rep = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from verify.py ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), rep)
}

/// What the two verifiers must agree on.
fn verdict(code: i32, rep: &Value) -> Value {
    let s = &rep["series"][0];
    json!({
        "code": code,
        "verdict": rep["verdict"],
        "records": s["records"],
        "last_seq": s["last_seq"],
        "checkpoint": s["checkpoint"]["seq"],
        "error": [s["error"]["kind"], s["error"]["seq"], s["error"]["line"]],
    })
}

/// Both verifiers on `args`; asserts they agree and returns fsgate's report.
fn both(args: &[&str]) -> (i32, Value) {
    let (code, rep) = fsgate_verify(args);
    if python_ready() {
        let (pc, p) = python_verify(args);
        assert_eq!(
            verdict(pc, &p),
            verdict(code, &rep),
            "verifiers disagree on {args:?}"
        );
    }
    (code, rep)
}

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("record is JSON"))
        .collect()
}

/// Runs a few requests through a real gateway and shuts it down cleanly.
fn gateway_log() -> (Gate, PathBuf) {
    let mut g = Gate::start();
    g.put(".env", "SECRET=1\n");
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("notes.txt"), "content": "hello audit\n"}),
    );
    g.ok("fs/read_text_file", json!({"path": g.abs("notes.txt")}));
    let _ = g.call("fs/read_text_file", json!({"path": g.abs(".env")}));
    g.close_stdin();
    g.wait_exit(TIMEOUT);
    let dir = g.state.join("audit");
    (g, dir)
}

#[test]
fn every_request_is_one_record_and_the_gateway_log_verifies() {
    let (_g, dir) = gateway_log();
    let recs = records(&dir);
    let requests: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "request").collect();
    assert_eq!(requests.len(), 3, "{recs:#?}");
    assert_eq!(recs[0]["kind"], "start");
    assert_eq!(
        recs.last().unwrap()["kind"],
        "stop",
        "clean shutdown records its stop"
    );
    let hello = hex::encode(Sha256::digest(b"hello audit\n"));
    assert_eq!(
        requests[0]["sha256"],
        hello.as_str(),
        "the write proves what was written"
    );
    assert_eq!(
        requests[1]["sha256"],
        hello.as_str(),
        "the read proves what was seen"
    );
    assert_eq!(requests[2]["decision"], "deny");
    assert!(
        requests
            .iter()
            .all(|r| r["policy_sha256"].as_str().is_some_and(|h| h.len() == 64))
    );

    let d = dir.display().to_string();
    let (code, rep) = both(&[&d]);
    assert_eq!(code, 0, "{rep:#}");
    assert_eq!(rep["series"][0]["checkpoint"]["kind"], "shutdown");
    assert_eq!(
        rep["series"][0]["checkpoint"]["seq"], rep["series"][0]["last_seq"],
        "the shutdown checkpoint covers the whole log"
    );
}

#[test]
fn tampering_with_the_gateway_log_is_named_by_both_verifiers() {
    let (_g, dir) = gateway_log();
    let lines: Vec<String> = std::fs::read_to_string(dir.join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let n = lines.len();
    // The first successful request, with at least one record after it.
    let k = lines
        .iter()
        .position(|l| l.contains("\"kind\":\"request\"") && l.contains("\"outcome\":\"ok\""))
        .expect("a successful request");
    assert!(k + 1 < n);
    type Tamper = Box<dyn Fn(&mut Vec<String>)>;
    let cases: Vec<(&str, Tamper)> = vec![
        (
            "modified",
            Box::new(move |l| l[k] = l[k].replace("\"ok\"", "\"OK\"")),
        ),
        ("missing", Box::new(move |l| drop(l.remove(k)))),
        ("reordered", Box::new(move |l| l.swap(k, k + 1))),
        ("truncated", Box::new(move |l| l.truncate(n - 1))),
    ];
    for (want, tamper) in cases {
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
        }
        let mut l = lines.clone();
        tamper(&mut l);
        let text: String = l.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(copy.path().join("audit.jsonl"), text).unwrap();
        let d = copy.path().display().to_string();
        let (code, rep) = both(&[&d]);
        assert_eq!(code, 1, "{want}: {rep:#}");
        assert_eq!(rep["series"][0]["error"]["kind"], want, "{rep:#}");
    }
}

#[test]
fn verify_on_every_vector_matches_the_expected_verdicts() {
    let vectors = repo().join("audit").join("vectors");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(vectors.join("expected.json")).unwrap())
            .unwrap();
    let key = vectors.join("pubkey.hex").display().to_string();
    for (case, want) in expected.as_object().unwrap() {
        let d = vectors.join(case).display().to_string();
        let (code, rep) = both(&["--pubkey", &key, &d]);
        assert_eq!(rep["verdict"], want["verdict"], "{case}");
        assert_eq!(
            code,
            if want["verdict"] == "intact" { 0 } else { 1 },
            "{case}"
        );
        if want["verdict"] != "intact" {
            let e = &rep["series"][0]["error"];
            assert_eq!(
                [&e["kind"], &e["seq"], &e["line"]],
                [&want["kind"], &want["seq"], &want["line"]],
                "{case}"
            );
        }
    }
}

#[test]
fn audit_commands_exit_codes_and_formats() {
    let (_g, dir) = gateway_log();
    let d = dir.display().to_string();
    // Unreadable.
    let out = run_cli(&["audit", "verify", "/nonexistent/audit.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    // Human output names what was validated.
    let out = run_cli(&["audit", "verify", &d]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("INTACT") && text.contains("records checked"),
        "{text}"
    );
    // show: table, JSON lines (unchanged records), CSV.
    let out = run_cli(&["audit", "show", &d, "--decision", "deny", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let shown: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0]["path"], ".env");
    let out = run_cli(&["audit", "show", &d, "--path", "*.txt", "--csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.starts_with("seq,ts,kind"), "{csv}");
    assert_eq!(
        csv.lines().count(),
        4,
        "header, the write's intent and outcome, read: {csv}"
    );
    assert!(
        csv.lines().nth(1).is_some_and(|l| l.contains(",intent,")),
        "{csv}"
    );
    let out = run_cli(&["audit", "show", &d, "--op", "start"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("[start]"));
    // keygen, and prune with nothing old enough.
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("audit.key");
    let out = run_cli(&["audit", "keygen", "--out", &key.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 64);
    let out = run_cli(&[
        "audit",
        "prune",
        "--before",
        "2000-01-01",
        "--signing-key",
        &key.display().to_string(),
        &d,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to prune"));
}

/// Mounts a tmpfs of `size` at `dir`, or says why not (the test is then skipped).
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        crate::common::skip_or_fail(
            "audit_gateway (full disk)",
            "cannot mount a tmpfs here (needs root)",
        );
    }
    ok
}

/// A gateway whose audit log is on a tmpfs of 1 MiB (`mnt`), unmounted when dropped.
struct FullDisk {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    mnt: PathBuf,
    child: Option<std::process::Child>,
}

impl FullDisk {
    /// `fsgate serve --transport TRANSPORT` on a fresh workspace with its log on the
    /// tmpfs; None when no tmpfs can be mounted here (see [`mount_tmpfs`]).
    fn start(transport: &str) -> Option<FullDisk> {
        use std::process::Stdio;
        let tmp = tempfile::tempdir().unwrap();
        let (ws, mnt) = (tmp.path().join("ws"), tmp.path().join("mnt"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        if !mount_tmpfs(&mnt, "1m") {
            return None;
        }
        let child = Command::new(crate::common::bin())
            .args(["serve", "--transport", transport, "--workspace"])
            .arg(&ws)
            .arg("--audit-log")
            .arg(mnt.join("audit.jsonl"))
            .arg("--backup-dir")
            .arg(tmp.path().join("backups"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Some(FullDisk {
            _tmp: tmp,
            ws,
            mnt,
            child: Some(child),
        })
    }
}

impl Drop for FullDisk {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

#[test]
fn a_full_audit_disk_refuses_changes_through_the_gateway_and_changes_no_file() {
    use std::io::{BufRead, BufReader, Write};
    let Some(mut g) = FullDisk::start("acp") else {
        return;
    };
    let (ws, mnt, log) = (g.ws.clone(), g.mnt.clone(), g.mnt.join("audit.jsonl"));
    let mut child = g.child.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let file = ws.join("a.txt");
    let mut write = |id: u64, content: &str| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
            "params": {"sessionId": "s", "path": file, "content": content}});
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    assert!(write(1, "v1").get("result").is_some());
    // Fill the audit disk to the last byte.
    let filler = mnt.join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
    // Changes go on while the log's reserved space lasts; then they are refused, and a
    // refused change leaves the file as the last acknowledged one made it.
    let mut last_ok = "v1".to_string();
    let mut refused = None;
    for id in 2..5000u64 {
        let content = format!("v{id}");
        let r = write(id, &content);
        if r.get("result").is_some() {
            last_ok = content;
        } else {
            assert_eq!(r["error"]["code"], -32603, "{r}");
            refused = Some(id);
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), last_ok);
        if refused.is_some() {
            break;
        }
    }
    let refused = refused.expect("the full audit disk never refused a change");
    let r = write(refused + 1, "while-full");
    assert!(r.get("error").is_some(), "{r}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), last_ok);
    // Space returns: changes work again, and the log holds every acknowledged change.
    std::fs::remove_file(&filler).unwrap();
    let mut healed = false;
    for id in refused + 2..refused + 10 {
        if write(id, "after").get("result").is_some() {
            healed = true;
            break;
        }
    }
    assert!(healed, "changes still refused after space returned");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "after");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let (code, rep) = fsgate_verify(&[log.to_str().unwrap()]);
    assert_eq!(code, 0, "{rep}");
    let recs = records(&mnt);
    let acknowledged = recs
        .iter()
        .filter(|r| r["op"] == "write_text_file" && r["outcome"] == "ok")
        .count();
    // Ids 1 .. refused-1 and the one "after" write were acknowledged.
    assert_eq!(
        acknowledged as u64, refused,
        "every acknowledged write is recorded"
    );
}

/// The MCP door records the answers the SDK gives (`tools/list` here) on the same job
/// that writes them: when the audit disk is full, such a request gets the log's error
/// instead of its result, and nothing unrecorded goes out; once space returns it is
/// answered again, and every result that went out has its record.
#[test]
fn a_full_audit_disk_turns_an_mcp_answer_into_an_error() {
    use std::io::{BufRead, BufReader, Write};
    let Some(mut g) = FullDisk::start("mcp") else {
        return;
    };
    let (mnt, log) = (g.mnt.clone(), g.mnt.join("audit.jsonl"));
    let mut child = g.child.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], id, "{v}");
        v
    };
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "full-disk", "version": "1"}});
    assert!(call(1, "initialize", init).get("result").is_some());
    let filler = mnt.join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
    let mut answered = 1u64;
    let mut refused = None;
    for id in 2..20_000u64 {
        let r = call(id, "tools/list", json!({}));
        if r.get("result").is_some() {
            answered += 1;
            continue;
        }
        assert_eq!(r["error"]["code"], -32603, "{r}");
        refused = Some(id);
        break;
    }
    let refused = refused.expect("the full audit disk never refused an answer");
    std::fs::remove_file(&filler).unwrap();
    let healed = (refused + 1..refused + 10)
        .find(|&id| call(id, "tools/list", json!({})).get("result").is_some());
    assert!(
        healed.is_some(),
        "answers still refused after space returned"
    );
    answered += 1;
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let (code, rep) = fsgate_verify(&[log.to_str().unwrap()]);
    assert_eq!(code, 0, "{rep}");
    let recs = records(&mnt);
    let ok = |op: &str| {
        recs.iter()
            .filter(|r| r["op"] == op && r["outcome"] == "ok")
            .count() as u64
    };
    assert_eq!(
        ok("initialize") + ok("tools/list"),
        answered,
        "every result that went out is recorded"
    );
}

/// Start-up leaves the `start` checkpoint to a thread of its own, and the built-in
/// content rules compile on first use: the log's two `start` records (the log's, then
/// the gateway's with its transport) still come before the first request's record, and
/// a secret is still refused by the very first request.
#[test]
fn the_start_records_precede_the_first_request_which_is_still_scanned() {
    let mut g = Gate::start();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    g.put("cfg.ini", format!("aws_access_key_id = {key}\n"));
    let e = g.err("fs/read_text_file", json!({"path": g.abs("cfg.ini")}));
    assert!(
        e.message.contains("content:aws-access-key-id"),
        "the first read is scanned: {e:?}"
    );
    g.close_stdin();
    g.wait_exit(TIMEOUT);
    let dir = g.state.join("audit");
    let recs = records(&dir);
    assert_eq!(recs[0]["kind"], "start", "{recs:#?}");
    assert!(recs[0]["details"]["check"].is_string(), "{recs:#?}");
    assert_eq!(recs[1]["kind"], "start", "{recs:#?}");
    assert_eq!(recs[1]["details"]["transport"], "acp", "{recs:#?}");
    let first_request = recs
        .iter()
        .position(|r| r["kind"] == "request")
        .expect("the read is recorded");
    assert!(first_request > 1, "{recs:#?}");
    assert_eq!(recs[first_request]["decision"], "deny");
    let d = dir.display().to_string();
    let (code, rep) = fsgate_verify(&[&d]);
    assert_eq!(code, 0, "{rep:#}");
}
