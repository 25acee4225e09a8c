//! Tests of the audit log as a whole: writer, recovery, tools, vectors, the Python
//! verifier, and the (ignored) measurements.

mod bench;
mod crash;
mod failures;
mod python;
mod recovery;
mod tools;
mod vectors;
mod writer;

use std::path::{Path, PathBuf};

use serde_json::{Map, json};

use super::verify::{SeriesReport, Verdict, VerifyOptions, verify_paths};
use super::{AuditEvent, AuditLog, AuditSettings, FsyncMode, OpenOptions};

/// Settings for tests: no heartbeat thread, no rotation unless asked.
pub(crate) fn settings(fsync: FsyncMode) -> AuditSettings {
    AuditSettings {
        fsync,
        heartbeat_secs: Some(0),
        max_file_bytes: Some(0),
        ..Default::default()
    }
}

pub(crate) const POLICY: &str = "5f0c6e3b1a2d4c8e9f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e";

pub(crate) fn open(path: &Path, s: &AuditSettings) -> AuditLog {
    open_unlocked(path, s, OpenOptions::default()).expect("open audit log")
}

/// Opens the log, waiting while it is `Locked`. A child that another test of this
/// process spawns holds a copy of every descriptor from its fork until its exec closes
/// them, the lock's among them, so a log this test has just closed can look held by
/// another process for that moment (longer on a loaded machine).
pub(crate) fn open_unlocked(
    path: &Path,
    s: &AuditSettings,
    opts: OpenOptions,
) -> Result<AuditLog, super::AuditError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match AuditLog::open(path, s, POLICY, opts) {
            Err(super::AuditError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
}

/// A plausible request record.
pub(crate) fn request(i: u64) -> AuditEvent {
    let mut args = Map::new();
    args.insert("line".into(), json!(i));
    args.insert("limit".into(), json!(50));
    AuditEvent {
        session: format!("sess-{}", i % 3),
        transport: "acp".into(),
        peer: "pid=4242,uid=1000".into(),
        op: if i.is_multiple_of(2) { "read" } else { "write" }.into(),
        path: Some(format!("src/file_{i}.rs")),
        args,
        decision: if i.is_multiple_of(5) { "deny" } else { "allow" }.into(),
        rule: Some("workspace-read".into()),
        reason: i.is_multiple_of(5).then(|| "secret file".to_owned()),
        outcome: if i.is_multiple_of(5) { "-32003" } else { "ok" }.into(),
        bytes: Some(4096),
        sha256: Some("9f".repeat(32)),
        duration_us: 120 + i,
        ..Default::default()
    }
}

/// Verifies the directory holding `log`.
pub(crate) fn verify_dir(log: &Path, opts: &VerifyOptions) -> SeriesReport {
    let dir = log.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut rep = verify_paths(&[dir], opts);
    assert_eq!(rep.series.len(), 1, "{rep:?}");
    rep.series.remove(0)
}

pub(crate) fn assert_intact(rep: &SeriesReport) {
    assert_eq!(rep.verdict, Verdict::Intact, "{}", rep.render());
}

/// The record lines of a file.
pub(crate) fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The parsed records of a file.
pub(crate) fn records(path: &Path) -> Vec<serde_json::Value> {
    read_lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).expect("json record"))
        .collect()
}

/// A temp dir and the log path inside it.
pub(crate) fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("logs").join("audit.jsonl");
    (dir, path)
}
