//! A gateway that opened its log and then could not serve closes the log with a `stop`
//! that says `start failed` and the error, on every door: a reviewer reads a failed
//! start, not a crash.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::view::{finished, read_records, text};
use crate::common::{bin, canonical_tempdir};

/// `--workspace ROOT --audit-log LOG --backup-dir BACKUPS` for `door`, and the log.
fn gateway(door: &[&str], root: &Path, state: &Path) -> (Command, PathBuf) {
    let log = state.join("audit.jsonl");
    let mut cmd = Command::new(bin());
    cmd.args(door)
        .arg("--workspace")
        .arg(root)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(state.join("backups"))
        .current_dir(root);
    (cmd, log)
}

/// Runs `door` to its end: it must fail, and its log hold a `start`, then last a `stop`
/// whose error contains `error`.
fn fails_with_its_stop(door: &[&str], tail: &[&str], error: &str) {
    let (_ws, root) = canonical_tempdir("fsgate-early-ws");
    let (_state, state) = canonical_tempdir("fsgate-early-state");
    let (mut cmd, log) = gateway(door, &root, &state);
    cmd.args(tail);
    let out = finished(cmd);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{door:?} succeeded: {stderr}");
    let records = read_records(&log);
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"start"), "{kinds:?}\n{stderr}");
    let stop = records.last().filter(|r| r["kind"] == "stop");
    let Some(stop) = stop else {
        panic!("{door:?}: no stop last: {kinds:?}\n{stderr}");
    };
    assert_eq!(stop["details"]["reason"], "start failed", "{stop}");
    let said = stop["details"]["error"].as_str().unwrap_or_default();
    assert!(said.contains(error), "{door:?}: {stop}\n{stderr}");
    assert!(
        stderr.contains(error),
        "{door:?}: the error not said: {stderr}"
    );
    verified(&log);
}

/// `fsgate audit verify` says the log is intact.
fn verified(log: &Path) {
    let mut cmd = Command::new(bin());
    cmd.args(["audit", "verify"]).arg(log);
    let out = finished(cmd);
    assert!(out.status.success(), "{}", text(&out.stdout));
}

#[test]
fn early_serve_whose_port_is_taken_closes_its_log() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let door = ["serve", "--transport", "ws", "--listen", &port];
    fails_with_its_stop(&door, &[], &port);
}

#[test]
fn early_acp_whose_agent_cannot_start_closes_its_log() {
    let agent = ["--", "/nonexistent/fsgate-agent"];
    fails_with_its_stop(&["acp"], &agent, "cannot start the agent");
}

#[test]
fn early_acp_whose_confined_agent_is_not_found_closes_its_log() {
    let agent = ["--", "fsgate-no-such-agent"];
    fails_with_its_stop(&["acp", "--confine-agent"], &agent, "fsgate-no-such-agent");
}

/// A backup store that cannot be opened (its path is a file): the log, opened first,
/// is closed with the error.
#[test]
fn early_gateway_whose_backup_store_cannot_open_closes_its_log() {
    let (_ws, root) = canonical_tempdir("fsgate-early-ws");
    let (_state, state) = canonical_tempdir("fsgate-early-state");
    let log = state.join("audit.jsonl");
    let not_a_dir = state.join("backups");
    std::fs::write(&not_a_dir, "a file\n").expect("write");
    let mut cmd = Command::new(bin());
    cmd.args(["serve", "--workspace"])
        .arg(&root)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(&not_a_dir);
    let out = finished(cmd);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let records = read_records(&log);
    let kinds: Vec<&str> = records.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds, ["start", "stop"], "{stderr}");
    let stop = &records[1];
    assert_eq!(stop["details"]["reason"], "start failed", "{stop}");
    let said = stop["details"]["error"].as_str().unwrap_or_default();
    assert!(said.contains("backups"), "{stop}\n{stderr}");
    verified(&log);
}
