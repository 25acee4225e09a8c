//! Crash recovery (issue 3, point 4): `kill -9` the gateway in the middle of a stream of
//! writes, start a new one on the same workspace, audit log and backup store, and show
//! the chain verifies (with a `recovered` record when the last line was torn), every
//! reply the client saw has its audit record, and every file holds either its previous
//! content or one complete written version, never a mix.
//!
//! Included from tests/all.rs as `mod crash_gateway;` (uses `crate::common`).

use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Gate, SESSION, TIMEOUT, run_cli};

/// Files written round-robin.
const FILES: u64 = 5;
/// Requests streamed; far more than the gateway can finish before the kill.
const TOTAL: u64 = 4000;
/// Replies to see before the kill.
const KILL_AFTER: usize = 80;
/// Ids of streamed requests start here, clear of the harness's own counter.
const ID_BASE: u64 = 1_000_000;

fn sha(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

fn file_of(n: u64) -> String {
    format!("f{}.txt", n % FILES)
}

fn initial(i: u64) -> String {
    format!("initial content of f{i}\n")
}

/// Version `n`: starts with `v{n}`, and is long enough (about 40 KiB) that a torn write
/// would show.
fn content(n: u64) -> String {
    let mut s = format!("v{n}\n");
    s.push_str(&format!("{n:010}|").repeat(3700));
    s.push_str(&format!("end of v{n}\n"));
    s
}

fn lines_of(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record {l:?}: {e}")))
        .collect()
}

fn kill9(pid: u32) {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -9 {pid} failed");
}

fn verify(log: &std::path::Path) -> (i32, String) {
    let out = run_cli(&["audit", "verify", log.to_str().unwrap()]);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every file holds its initial content or exactly one complete version sent to it.
fn assert_files_whole(g: &Gate, when: &str) {
    for i in 0..FILES {
        let rel = format!("f{i}.txt");
        let got = std::fs::read(g.path(&rel)).unwrap_or_else(|e| panic!("{when}: {rel}: {e}"));
        if got == initial(i).as_bytes() {
            continue;
        }
        let text = String::from_utf8_lossy(&got);
        let n: Option<u64> = text
            .strip_prefix('v')
            .and_then(|t| t.split('\n').next())
            .and_then(|t| t.parse().ok());
        let whole = n.is_some_and(|n| n < TOTAL && n % FILES == i && got == content(n).as_bytes());
        assert!(
            whole,
            "{when}: {rel} holds neither its old content nor one complete version \
             ({} bytes, starts {:?})",
            got.len(),
            &text[..text.len().min(40)]
        );
    }
}

/// Streams TOTAL writes without waiting, kills the gateway with SIGKILL once KILL_AFTER
/// replies have arrived, and returns the stopped gateway with the replies it sent.
fn stream_and_kill() -> (Gate, Vec<Value>) {
    let mut g = Gate::start();
    for i in 0..FILES {
        g.put(&format!("f{i}.txt"), initial(i));
    }
    let paths: Vec<String> = (0..FILES).map(|i| g.abs(&format!("f{i}.txt"))).collect();
    let stdin = g.stdin_handle();
    let writer = std::thread::spawn(move || {
        for n in 0..TOTAL {
            let msg = json!({
                "jsonrpc": "2.0",
                "id": ID_BASE + n,
                "method": "fs/write_text_file",
                "params": {"sessionId": SESSION, "path": paths[(n % FILES) as usize], "content": content(n)},
            });
            let mut line = msg.to_string().into_bytes();
            line.push(b'\n');
            let mut guard = stdin.lock().expect("stdin lock");
            let Some(pipe) = guard.as_mut() else { return n };
            if pipe.write_all(&line).and_then(|_| pipe.flush()).is_err() {
                return n; // the gateway is gone
            }
        }
        TOTAL
    });
    let deadline = Instant::now() + TIMEOUT * 3;
    while g.all_messages().len() < KILL_AFTER {
        assert!(
            Instant::now() < deadline,
            "only {} replies before the deadline\n{}",
            g.all_messages().len(),
            g.stderr()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    kill9(g.pid());
    let status = g.wait_exit(TIMEOUT);
    assert!(!status.success(), "gateway was not killed: {status:?}");
    g.join_readers();
    let sent = writer.join().expect("writer thread");
    let replies = g.all_messages();
    eprintln!(
        "crash: {} requests written, {} replies before kill -9",
        sent,
        replies.len()
    );
    assert!(
        (replies.len() as u64) < sent.min(TOTAL),
        "the kill came after the stream ended ({} replies, {sent} sent): not a mid-stream crash",
        replies.len()
    );
    (g, replies)
}

/// Every reply the client received before the crash has its audit record: success
/// replies by the SHA-256 of the content they wrote, errors by their code.
fn assert_replies_audited(replies: &[Value], pre: &[Value]) {
    let by_sha: HashMap<String, &Value> = pre
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file")
        .filter_map(|r| Some((r["sha256"].as_str()?.to_owned(), r)))
        .collect();
    for resp in replies {
        let n = resp["id"].as_u64().expect("numeric id") - ID_BASE;
        match resp.get("result") {
            Some(_) => {
                let rec = by_sha.get(&sha(content(n))).unwrap_or_else(|| {
                    panic!("reply to write v{n} has no audit record in the crashed log")
                });
                assert_eq!(rec["outcome"], "ok", "{rec}");
                assert_eq!(rec["path"], file_of(n).as_str(), "{rec}");
                assert_eq!(rec["bytes"], content(n).len() as u64, "{rec}");
            }
            None => {
                let code = resp["error"]["code"].as_i64().expect("error code");
                let found = pre.iter().any(|r| {
                    r["kind"] == "request"
                        && r["path"] == file_of(n).as_str()
                        && r["outcome"].as_str() == Some(code.to_string().as_str())
                });
                assert!(found, "error reply {resp} has no audit record");
            }
        }
    }
}

#[test]
fn kill_9_mid_stream_then_restart_keeps_the_chain_and_whole_files() {
    let (g, replies) = stream_and_kill();
    let before = std::fs::read(&g.audit_log).expect("audit log exists");
    let complete_len = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let torn = before[complete_len..].to_vec();
    let pre = lines_of(&before[..complete_len]);
    let last_pre_seq = pre.last().and_then(|r| r["seq"].as_u64()).unwrap_or(0);
    eprintln!(
        "crash: log has {} complete records (last seq {last_pre_seq}), torn tail {} bytes",
        pre.len(),
        torn.len()
    );

    assert_replies_audited(&replies, &pre);
    assert_files_whole(&g, "after kill -9");

    // A new gateway on the same workspace, log and backup store.
    let mut g = Gate::relaunch(g);
    let after_n = TOTAL; // a version number no streamed request used
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("after.txt"), "content": content(after_n)}),
    );
    g.close_stdin();
    let st = g.wait_exit(TIMEOUT);
    assert!(
        st.success(),
        "restarted gateway exit {st:?}\n{}",
        g.stderr()
    );

    let (code, report) = verify(&g.audit_log);
    assert_eq!(code, 0, "audit verify after restart:\n{report}");
    // Every write the kill cut off between intent and outcome was reconciled at start.
    assert!(!report.contains("intent seq"), "{report}");

    let after = std::fs::read(&g.audit_log).unwrap();
    assert!(
        after.starts_with(&before[..complete_len]),
        "the complete records written before the crash were changed"
    );
    let recs = lines_of(&after);
    let recovered: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "recovered").collect();
    if !torn.is_empty() {
        assert_eq!(
            recovered.len(),
            1,
            "the log ended in a torn line of {} bytes but has no `recovered` record",
            torn.len()
        );
        let d = &recovered[0]["details"];
        assert_eq!(d["cut_bytes"], torn.len() as u64, "{}", recovered[0]);
        assert_eq!(d["cut_sha256"], sha(&torn), "{}", recovered[0]);
    } else {
        eprintln!("crash: the kill did not tear the last line this time");
    }
    // The new gateway's request is recorded after the old records.
    let new_write = recs
        .iter()
        .find(|r| {
            r["kind"] == "request" && r["op"] == "write_text_file" && r["path"] == "after.txt"
        })
        .expect("record of the write after restart");
    assert!(new_write["seq"].as_u64().unwrap() > last_pre_seq);
    assert_eq!(new_write["sha256"], sha(content(after_n)));
    assert_files_whole(&g, "after restart");
    let stray: Vec<String> = std::fs::read_dir(&g.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !(n == "after.txt" || (n.starts_with('f') && n.ends_with(".txt") && n.len() == 6))
        })
        .collect();
    eprintln!("crash: other entries left in the workspace: {stray:?}");
}

/// The deterministic half: a kill -9 and then a torn final line as a process killed
/// mid-write leaves it (the start of the next record, no newline).
#[test]
fn a_torn_last_line_is_cut_and_recorded_at_restart() {
    let mut g = Gate::start();
    g.put("a.txt", "a0\n");
    for n in 1..=3 {
        g.ok(
            "fs/write_text_file",
            json!({"path": g.abs("a.txt"), "content": format!("a{n}\n")}),
        );
    }
    kill9(g.pid());
    let _ = g.wait_exit(TIMEOUT);
    let before = std::fs::read(&g.audit_log).unwrap();
    assert!(before.ends_with(b"\n"));
    let last_seq = lines_of(&before).last().unwrap()["seq"].as_u64().unwrap();
    let torn = format!(
        "{{\"seq\":{},\"ts\":\"2030-01-01T00:00:00.000001Z\",\"kind\":\"request\",\"op\":\"wri",
        last_seq + 1
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&g.audit_log)
        .unwrap()
        .write_all(torn.as_bytes())
        .unwrap();

    let mut g = Gate::relaunch(g);
    assert_eq!(
        g.ok("fs/read_text_file", json!({"path": g.abs("a.txt")}))["content"],
        "a3\n"
    );
    g.close_stdin();
    assert!(g.wait_exit(TIMEOUT).success(), "{}", g.stderr());

    let (code, report) = verify(&g.audit_log);
    assert_eq!(code, 0, "audit verify after restart:\n{report}");
    let after = std::fs::read(&g.audit_log).unwrap();
    assert!(
        after.starts_with(&before),
        "records before the tear were changed"
    );
    let recs = lines_of(&after); // every line parses: the fragment is gone
    let rec: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "recovered").collect();
    assert_eq!(rec.len(), 1, "no single `recovered` record: {recs:#?}");
    let r = rec[0];
    assert_eq!(
        r["seq"],
        last_seq + 1,
        "recovered record follows the last whole record"
    );
    assert_eq!(r["details"]["cut_bytes"], torn.len() as u64, "{r}");
    assert_eq!(r["details"]["cut_sha256"], sha(&torn), "{r}");
    assert_eq!(r["details"]["at_offset"], before.len() as u64, "{r}");
    assert!(
        recs.iter()
            .any(|r| r["op"] == "read_text_file" && r["seq"].as_u64() > Some(last_seq)),
        "the request after restart is recorded"
    );
}
