//! Test-only methods (feature `test-hooks`, never in release builds) that bypass every
//! gate but the kernel's, so tests can show the Landlock wall holding on its own.
//!
//! # Ambient Authority
//! These methods call `std::fs` with paths straight from the request: that is their
//! point. They exist only in builds with the `test-hooks` feature.

use serde_json::{Value, json};

fn outcome(r: std::io::Result<usize>) -> Value {
    match r {
        Ok(n) => json!({"ok": true, "bytes": n}),
        Err(e) => json!({
            "ok": false,
            "errno": e.raw_os_error(),
            "kind": format!("{:?}", e.kind()),
            "message": e.to_string(),
        }),
    }
}

/// Answers `_fsgate_test/open_ambient {path}` (read with plain std::fs) and
/// `_fsgate_test/write_ambient {path, content}` (write with plain std::fs).
pub fn answer(method: &str, params: &Value) -> Option<Value> {
    let path = params
        .get("path")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match method {
        "_fsgate_test/open_ambient" => Some(outcome(std::fs::read(path).map(|b| b.len()))),
        "_fsgate_test/write_ambient" => {
            let content = params
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Some(outcome(
                std::fs::write(path, content).map(|_| content.len()),
            ))
        }
        _ => None,
    }
}

/// Before confinement: reads the file named by `FSGATE_TEST_PROBE`, so a test can show
/// the same process could read it before Landlock was applied.
pub fn probe_before_confinement() -> Value {
    match std::env::var("FSGATE_TEST_PROBE") {
        Ok(p) => outcome(std::fs::read(&p).map(|b| b.len())),
        Err(_) => Value::Null,
    }
}
