//! A write's outcome is recorded while its directory entry is synced (issue 34): the
//! outcome says `details.entryPending`, and the next record names the intent in
//! `details.entriesDurable` once the entry is durable. Until a durable record does, a
//! start after a crash treats the change as open and looks at the disk: found applied
//! when the entry made it, not applied when it did not (simulated here by putting the
//! old file back, as a power loss before the directory's sync would leave it). A clean
//! stop names the last entry, and the next start reconciles nothing.
//!
//! Included from tests/all.rs as `mod entry_durable;` (uses `crate::common`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Gate, run_cli};

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .expect("read the log")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("record {l:?}: {e}")))
        .collect()
}

/// Writes `content` to `rel` and returns the seqs of its (intent, outcome) records.
fn write(g: &Gate, rel: &str, content: &str) -> (u64, u64) {
    g.call(
        "fs/write_text_file",
        json!({"path": g.abs(rel), "content": content}),
    )
    .unwrap_or_else(|e| panic!("write {rel}: {e:?}"));
    let recs = records(&g.audit_log);
    let outcome = recs
        .iter()
        .rev()
        .find(|r| r["kind"] == "request" && r["op"] == "write_text_file")
        .expect("the write's outcome");
    assert_eq!(
        outcome["details"]["entryPending"],
        json!(true),
        "the outcome is written beside the entry's sync: {outcome}"
    );
    let intent = outcome["args"]["intent"].as_u64().expect("args.intent");
    (intent, outcome["seq"].as_u64().expect("seq"))
}

fn kill9(g: &Gate) {
    let st = Command::new("kill")
        .args(["-9", &g.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -9 failed");
}

/// Starts a gateway on `old`'s workspace and log after `old` was killed, and stops it
/// cleanly: the records of its start (the reconciliations among them).
fn restart(old: Gate) -> Vec<Value> {
    let before = records(&old.audit_log).len();
    let mut g = Gate::relaunch(old);
    g.close_stdin();
    assert!(
        g.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        g.stderr()
    );
    let out = run_cli(&["audit", "verify", g.audit_log.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "verify:\n{text}");
    assert!(!text.contains("intent seq"), "intent left open:\n{text}");
    records(&g.audit_log).split_off(before)
}

fn reconciled(recs: &[Value]) -> Vec<&Value> {
    recs.iter().filter(|r| r["kind"] == "reconciled").collect()
}

/// Exactly one `reconciled` record among `after`: of `intent`, naming its unconfirmed
/// `outcome`, and finding `found`.
fn assert_one_reconciled(after: &[Value], (intent, outcome): (u64, u64), found: &str) {
    let rec = reconciled(after);
    assert_eq!(rec.len(), 1, "only the unconfirmed write: {after:?}");
    assert_eq!(rec[0]["details"]["intent"], json!(intent));
    assert_eq!(rec[0]["details"]["outcomeSeq"], json!(outcome));
    assert_eq!(rec[0]["details"]["found"], found, "{}", rec[0]);
}

#[test]
fn a_write_killed_after_its_answer_is_reconciled_applied_and_the_one_before_is_not() {
    let g = Gate::start();
    let (first, _) = write(&g, "a.txt", "one\n");
    let (second, outcome) = write(&g, "a.txt", "two\n");
    let recs = records(&g.audit_log);
    let second_intent = recs
        .iter()
        .find(|r| r["seq"] == json!(second))
        .expect("intent");
    assert_eq!(
        second_intent["details"]["entriesDurable"],
        json!([first]),
        "the next record names the first write's entry durable: {second_intent}"
    );
    kill9(&g);
    let after = restart(g);
    assert_one_reconciled(&after, (second, outcome), "applied");
}

#[test]
fn an_entry_lost_after_its_outcome_is_reconciled_not_applied() {
    let g = Gate::start();
    g.put("a.txt", "old\n");
    let (intent, outcome) = write(&g, "a.txt", "new\n");
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"new\n"[..]));
    kill9(&g);
    // What a power loss before the directory's sync leaves: the rename never happened.
    let path = g.path("a.txt");
    std::fs::write(&path, "old\n").expect("put the old file back");
    let after = restart(g);
    assert_one_reconciled(&after, (intent, outcome), "not-applied");
}

#[test]
fn a_clean_stop_names_the_last_entry_and_the_next_start_reconciles_nothing() {
    let mut g = Gate::start();
    let (intent, _) = write(&g, "n.txt", "new\n");
    g.close_stdin();
    assert!(g.wait_exit(Duration::from_secs(30)).success());
    let recs = records(&g.audit_log);
    let stop = recs.last().expect("a record");
    assert_eq!(stop["kind"], "stop", "{stop}");
    assert_eq!(stop["details"]["entriesDurable"], json!([intent]), "{stop}");
    let after = restart(g);
    assert!(reconciled(&after).is_empty(), "{after:?}");
    let start = after
        .iter()
        .find(|r| r["kind"] == "start")
        .expect("a start record");
    assert!(
        start["details"].get("openIntents").is_none(),
        "nothing open: {start}"
    );
}
