//! The audit crate's own program gives every published test vector its expected
//! verdict, as `fsgate audit verify` does: a reviewer needs nothing else of fsgate.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../audit/vectors")
}

/// `fsgate-audit verify --json --pubkey KEY DIR`: the exit code and the report.
fn verify(dir: &Path) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_fsgate-audit"))
        .args(["verify", "--json", "--pubkey"])
        .arg(vectors().join("pubkey.hex"))
        .arg(dir)
        .output()
        .expect("run fsgate-audit");
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), report)
}

#[test]
fn every_vector_gets_its_expected_verdict() {
    let text = std::fs::read_to_string(vectors().join("expected.json")).expect("expected.json");
    let expected: Value = serde_json::from_str(&text).expect("expected.json is JSON");
    let cases = expected.as_object().expect("an object of cases");
    assert!(cases.len() >= 10, "{} cases", cases.len());
    for (case, want) in cases {
        let (code, report) = verify(&vectors().join(case));
        assert_eq!(report["verdict"], want["verdict"], "{case}: {report}");
        let intact = want["verdict"] == "intact";
        assert_eq!(code, if intact { 0 } else { 1 }, "{case}: {report}");
        if !intact {
            let e = &report["series"][0]["error"];
            assert_eq!(
                [&e["kind"], &e["seq"], &e["line"]],
                [&want["kind"], &want["seq"], &want["line"]],
                "{case}"
            );
        }
    }
}

#[test]
fn an_unreadable_log_exits_2() {
    let (code, _) = verify(Path::new("/nonexistent/audit.jsonl"));
    assert_eq!(code, 2);
}
