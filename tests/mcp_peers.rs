//! The real peers: the official MCP Python SDK clients, 2.x (stateless 2026-07-28 era via
//! `server/discover`, and the initialize handshake) and 1.x (initialize handshake), each
//! running one end-to-end session (tests/peers/mcp/scenario.py) against the binary.
//!
//! Interpreters: `$FSGATE_MCP2_PYTHON` / `$FSGATE_MCP1_PYTHON`, else the venvs
//! `.peers/mcp2` and `.peers/mcp1` that `scripts/install-peers.sh` creates. Without them
//! the tests print `SKIPPED: ...` and pass, except under CI (`crate::common::skip_or_fail`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mcp_harness::Dirs;

/// Exit code of a driver that cannot import its SDK.
const SKIP: i32 = 77;

fn python(var: &str, venv: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".peers")
        .join(venv)
        .join("bin/python");
    p.exists().then_some(p)
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers/mcp")
        .join(name)
}

/// The workspace the scenario expects: fixture.json, a binary PNG, a binary file named
/// like a PNG, and a file outside.
pub(crate) fn fixture() -> Dirs {
    let dirs = Dirs::new();
    let text = std::fs::read_to_string(script("fixture.json")).expect("fixture.json");
    let files: serde_json::Map<String, Value> =
        serde_json::from_str(&text).expect("fixture.json is an object");
    for (rel, content) in &files {
        dirs.put(rel, content.as_str().unwrap_or_default());
    }
    dirs.put("img/pixel.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    dirs.put("img/fake.png", b"\x7fELF\x02\x01\x01\0");
    std::fs::write(dirs.outside.join("outside.txt"), "OUTSIDE SECRET").expect("outside file");
    dirs
}

/// Runs a driver; `None` if it was skipped (reason printed).
pub(crate) fn run_driver(
    py_var: &str,
    venv: &str,
    driver: &str,
    extra: &[&str],
    dirs: &Dirs,
) -> Option<Value> {
    let Some(py) = python(py_var, venv) else {
        crate::common::skip_or_fail(
            driver,
            &format!(
                "no Python for it: set {py_var} or run ./scripts/install-peers.sh (.peers/{venv})"
            ),
        );
        return None;
    };
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let mut child = Command::new(&py)
        .arg(script(driver))
        .args(extra)
        .args(["--bin", env!("CARGO_BIN_EXE_fsgate")])
        .args([
            "--workspace",
            &s(&dirs.root),
            "--outside",
            &s(&dirs.outside),
            "--state",
            &s(&dirs.state),
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{driver} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("driver output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(SKIP) {
        crate::common::skip_or_fail(driver, stdout.trim());
        return None;
    }
    assert!(
        out.status.success(),
        "{driver} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    Some(serde_json::from_str(last).unwrap_or_else(|e| panic!("{driver} summary {last:?}: {e}")))
}

/// What the scenario leaves behind, checked on disk and in the audit log (every
/// request of the session recorded under `transport`).
pub(crate) fn check_effects(dirs: &Dirs, transport: &str) {
    let read = |rel: &str| std::fs::read_to_string(dirs.root.join(rel)).ok();
    assert_eq!(read("out/new.txt").as_deref(), Some("edited\n"));
    assert_eq!(
        read("src/main.rs").as_deref(),
        Some("fn main() {\n    let x = 1;\n}\n")
    );
    assert_eq!(
        read("moved.md").as_deref(),
        Some("# Guide\nTODO: write\n"),
        "dry run wrote nothing"
    );
    assert!(!dirs.root.join("docs/guide.md").exists() && !dirs.root.join("out/w2.txt").exists());
    assert!(dirs.root.join("made/deep").is_dir() && dirs.root.join("made2/x").is_dir());
    assert_eq!(read(".env").as_deref(), Some("API_KEY=sekrit\n"));
    assert!(
        !dirs
            .root
            .parent()
            .is_some_and(|p| p.join("escape.txt").exists())
    );
    assert_eq!(
        std::fs::read_to_string(dirs.outside.join("outside.txt"))
            .ok()
            .as_deref(),
        Some("OUTSIDE SECRET")
    );
    assert!(!dirs.outside.join("x.txt").exists());
    let text = std::fs::read_to_string(dirs.audit_log()).unwrap_or_default();
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let requests: Vec<&Value> = records.iter().filter(|r| r["kind"] == "request").collect();
    assert!(
        requests.len() > 50,
        "every call is audited: {} records",
        requests.len()
    );
    assert!(requests.iter().all(|r| r["transport"] == transport));
    assert!(
        requests.iter().any(|r| r["decision"] == "deny"),
        "refusals are audited"
    );
}

#[test]
fn python_sdk_2x_stateless_era_session() {
    let dirs = fixture();
    let Some(summary) = run_driver(
        "FSGATE_MCP2_PYTHON",
        "mcp2",
        "client_v2.py",
        &["--mode", "auto"],
        &dirs,
    ) else {
        return;
    };
    assert_eq!(summary["protocolVersion"], "2026-07-28", "{summary}");
    assert_eq!(summary["serverName"], "fsgate", "{summary}");
    assert!(summary["checks"].as_u64().unwrap_or(0) > 200, "{summary}");
    check_effects(&dirs, "mcp");
}

#[test]
fn python_sdk_2x_handshake_era_session() {
    let dirs = fixture();
    let Some(summary) = run_driver(
        "FSGATE_MCP2_PYTHON",
        "mcp2",
        "client_v2.py",
        &["--mode", "legacy"],
        &dirs,
    ) else {
        return;
    };
    assert!(
        summary["protocolVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("2025-")),
        "{summary}"
    );
    assert!(summary["checks"].as_u64().unwrap_or(0) > 200, "{summary}");
    check_effects(&dirs, "mcp");
}

#[test]
fn python_sdk_1x_session() {
    let dirs = fixture();
    let Some(summary) = run_driver("FSGATE_MCP1_PYTHON", "mcp1", "client_v1.py", &[], &dirs) else {
        return;
    };
    assert!(
        summary["sdk"].as_str().is_some_and(|v| v.starts_with("1.")),
        "{summary}"
    );
    assert!(
        summary["protocolVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("2025-")),
        "{summary}"
    );
    assert!(summary["checks"].as_u64().unwrap_or(0) > 200, "{summary}");
    check_effects(&dirs, "mcp");
}
