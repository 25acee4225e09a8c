//! A rotated log named by its active file: `fsgate audit verify|show|report|prune` and
//! `verify --trusted` take the whole series (the rotated files beside it), as the
//! directory does; a rotated file really missing from the series is named.
//!
//! Included from tests/all.rs as `mod audit_series;` (uses `crate::common`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Gate, TIMEOUT, run_cli};

/// A gateway's log rotated every 2 KiB (every few records), after a stop: the active
/// file's path and the gateway (which keeps the directories).
fn rotated_log() -> (Gate, PathBuf) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let default = std::fs::read_to_string(repo.join("policies/default.toml")).expect("policy");
    let mut g = Gate::with_policy(&format!("{default}\n[audit]\nmax_file_bytes = 2048\n"));
    for i in 0..16 {
        g.ok(
            "fs/write_text_file",
            json!({"sessionId": "s1", "path": g.abs(&format!("f{i}.txt")), "content": "x"}),
        );
    }
    g.close_stdin();
    assert_eq!(g.wait_exit(TIMEOUT).code(), Some(0), "{}", g.stderr());
    let active = g.audit_log.clone();
    assert!(
        rotated(&active).len() >= 3,
        "the log did not rotate: {:?}",
        rotated(&active)
    );
    (g, active)
}

/// The rotated files beside `active`, oldest first.
fn rotated(active: &Path) -> Vec<PathBuf> {
    let dir = active.parent().expect("log dir");
    let prefix = format!("{}.0", active.file_name().expect("name").to_string_lossy());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("log dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

/// `fsgate audit verify --json ARGS`: exit code and report.
fn verify(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["audit", "verify", "--json"];
    all.extend_from_slice(args);
    let out = run_cli(&all);
    let rep = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from audit verify ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), rep)
}

/// `audit/verify.py --json FILE`, the independent verifier, if python3 is here.
fn python_verify(file: &str) -> Option<(i32, Value)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(out) = Command::new("python3")
        .arg(repo.join("audit").join("verify.py"))
        .args(["--json", file])
        .output()
    else {
        crate::common::skip_or_fail("audit_series (verify.py)", "python3 is not available");
        return None;
    };
    let rep = serde_json::from_slice(&out.stdout).expect("JSON from verify.py");
    Some((out.status.code().unwrap_or(-1), rep))
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn the_active_file_of_a_rotated_log_stands_for_its_whole_series() {
    let (_g, active) = rotated_log();
    let file = path_str(&active);
    let dir = path_str(active.parent().expect("dir"));
    let (code, by_dir) = verify(&[&dir]);
    assert_eq!(code, 0, "{by_dir}");
    let (code, by_file) = verify(&[&file]);
    assert_eq!(code, 0, "verify ACTIVE: {by_file}");
    let (s, d) = (&by_file["series"][0], &by_dir["series"][0]);
    assert_eq!(s["first_seq"], 1, "{s}");
    assert_eq!(s["records"], d["records"], "{s}");
    assert_eq!(s["last_seq"], d["last_seq"], "{s}");
    assert_eq!(
        s["files"].as_array().map(Vec::len),
        Some(rotated(&active).len() + 1),
        "{s}"
    );
    if let Some((pc, p)) = python_verify(&file) {
        assert_eq!(pc, 0, "verify.py ACTIVE: {p}");
        assert_eq!(p["series"][0]["records"], d["records"], "{p}");
    }
    // show: every record of the series, from seq 1.
    let out = run_cli(&["audit", "show", "--json", &file]);
    assert_eq!(out.status.code(), Some(0));
    let shown: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(Some(shown.len() as u64), d["records"].as_u64());
    assert_eq!(shown[0]["seq"], 1);
    // report: the page's verdict.
    let tmp = tempfile::tempdir().expect("tempdir");
    let page = tmp.path().join("report.html");
    let out = run_cli(&["audit", "report", "--html", &path_str(&page), &file]);
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(html.contains("class=\"word\">INTACT<"), "not intact");
    // --trusted: remembered, then proved extended, on the active file.
    let state = path_str(&tmp.path().join("trusted.json"));
    for _ in 0..2 {
        let (code, rep) = verify(&["--trusted", &state, &file]);
        assert_eq!(code, 0, "verify --trusted ACTIVE: {rep}");
    }
}

#[test]
fn prune_and_then_verify_on_the_active_file_keep_the_series() {
    let (_g, active) = rotated_log();
    let file = path_str(&active);
    let files = rotated(&active);
    // The cut-off: the first record of the third rotated file, so the two oldest go.
    let third = std::fs::read_to_string(&files[2]).expect("third file");
    let first: Value = serde_json::from_str(third.lines().next().expect("a line")).expect("JSON");
    let before = first["ts"].as_str().expect("ts").to_string();
    let out = run_cli(&["audit", "prune", "--before", &before, &file]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let left = rotated(&active);
    assert!(
        !left.is_empty() && left.len() < files.len(),
        "pruned {} of {} rotated files",
        files.len() - left.len(),
        files.len()
    );
    let (code, rep) = verify(&[&file]);
    assert_eq!(code, 0, "verify ACTIVE after prune: {rep}");
    let warnings = rep["series"][0]["warnings"].to_string();
    assert!(warnings.contains("were pruned"), "{warnings}");
}

#[test]
fn a_rotated_file_missing_from_the_series_is_named() {
    let (_g, active) = rotated_log();
    let file = path_str(&active);
    let files = rotated(&active);
    let name = |p: &Path| p.file_name().expect("name").to_string_lossy().into_owned();
    // One in the middle: the gap names it.
    let middle = &files[1];
    std::fs::remove_file(middle).expect("rm");
    let (code, rep) = verify(&[&file]);
    assert_eq!(code, 1, "{rep}");
    let err = &rep["series"][0]["error"];
    assert_eq!(err["kind"], "gap", "{err}");
    let msg = err["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("{} is missing", name(middle))),
        "{msg}"
    );
    // The first one (seq 1 on): the missing start names it.
    std::fs::remove_file(&files[0]).expect("rm");
    let (code, rep) = verify(&[&file]);
    assert_eq!(code, 1, "{rep}");
    let err = &rep["series"][0]["error"];
    assert_eq!(err["kind"], "missing", "{err}");
    let msg = err["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!("{} is missing", name(&files[0]))),
        "{msg}"
    );
    assert!(name(&files[0]).ends_with(".000000000001"), "{files:?}");
}
