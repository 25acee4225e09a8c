//! audit/verify.py (the independent verifier) and the Rust verifier must agree: on every
//! test vector, and on logs the writer really writes, intact and tampered with.
//! Skipped, saying so, when python3 or its `cryptography` package is missing.

use std::process::Command;

use serde_json::{Value, json};

use super::vectors::{summary, vectors_dir};
use super::*;
use crate::keys;

fn python_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import cryptography"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let required = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
        || std::env::var_os("FSGATE_REQUIRE_PEERS").is_some();
    assert!(
        ok || !required,
        "python3 with the `cryptography` package is required here (CI / FSGATE_REQUIRE_PEERS) \
         to compare the independent verifier"
    );
    if !ok {
        eprintln!(
            "SKIPPED: python3 with the `cryptography` package is not available; \
             the Python verifier was not compared (pip install cryptography)"
        );
    }
    ok
}

fn script() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("audit")
        .join("verify.py")
}

/// Runs verify.py; returns its exit code and JSON report.
fn python_verify(paths: &[PathBuf], pubkey: Option<&str>, extra: &[&str]) -> (i32, Value) {
    let mut cmd = Command::new("python3");
    cmd.arg(script()).arg("--json");
    if let Some(k) = pubkey {
        cmd.args(["--pubkey", k]);
    }
    cmd.args(extra).args(paths);
    let out = cmd.output().expect("run python3");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify.py printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn rust_verify(paths: &[PathBuf], pubkey: Option<&str>) -> (i32, Value) {
    let opts = VerifyOptions {
        pinned: pubkey.map(|k| keys::parse_public_key(k).unwrap()),
        ..Default::default()
    };
    let rep = verify_paths(paths, &opts);
    (rep.exit_code(), serde_json::to_value(&rep).unwrap())
}

/// What both verifiers must agree on.
fn agreement(code: i32, rep: &Value) -> Value {
    let s = &rep["series"][0];
    let base = |v: &Value| {
        v.as_str()
            .map(series_file_name)
            .map_or(Value::Null, Value::String)
    };
    json!({
        "code": code,
        "verdict": rep["verdict"],
        "records": s["records"],
        "first_seq": s["first_seq"],
        "last_seq": s["last_seq"],
        "first_ts": s["first_ts"],
        "last_ts": s["last_ts"],
        "log_id": s["log_id"],
        "files": s["files"].as_array().map_or(0, Vec::len),
        "checkpoint": [s["checkpoint"]["seq"], s["checkpoint"]["signature"]],
        "open_intents": s["open_intents"],
        "error": [s["error"]["kind"], s["error"]["seq"], s["error"]["line"], base(&s["error"]["file"])],
    })
}

fn series_file_name(p: &str) -> String {
    crate::series::file_name(Path::new(p))
}

fn assert_agree(paths: &[PathBuf], pubkey: Option<&str>, what: &str) -> Value {
    let (rc, r) = rust_verify(paths, pubkey);
    let (pc, p) = python_verify(paths, pubkey, &[]);
    assert_eq!(
        agreement(pc, &p),
        agreement(rc, &r),
        "verifiers disagree on {what}"
    );
    r
}

#[test]
fn both_verifiers_agree_on_every_vector() {
    if !python_ready() {
        return;
    }
    let dir = vectors_dir();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let pubkey = dir.join("pubkey.hex").display().to_string();
    let cases = expected.as_object().unwrap();
    assert!(cases.len() >= 6);
    for (name, want) in cases {
        let case = vec![dir.join(name)];
        let (pc, p) = python_verify(&case, Some(&pubkey), &[]);
        assert_eq!(&summary(&p), want, "verify.py on vector {name}");
        let r = assert_agree(&case, Some(&pubkey), name);
        assert_eq!(&summary(&r), want, "fsgate on vector {name}");
        assert_eq!(pc, if want["verdict"] == "intact" { 0 } else { 1 });
    }
}

#[test]
fn both_proof_checkers_agree_on_every_proof_vector() {
    if !python_ready() {
        return;
    }
    let dir = vectors_dir().join("proofs");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let pubkey = vectors_dir().join("pubkey.hex").display().to_string();
    let cases = expected.as_object().unwrap();
    assert!(cases.len() >= 7);
    for (name, want) in cases {
        let out = Command::new("python3")
            .arg(script())
            .args(["--check-proof"])
            .arg(dir.join(name))
            .args(["--pubkey", &pubkey])
            .output()
            .expect("run python3");
        let code = if want == "valid" { 0 } else { 1 };
        assert_eq!(
            out.status.code(),
            Some(code),
            "verify.py --check-proof {name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Tampers with a copy of `log`'s directory and checks that both verifiers agree.
fn tampered(log: &Path, what: &str, f: impl Fn(&mut Vec<String>)) -> Value {
    let src = log.parent().unwrap();
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
        }
    }
    let target = copy.path().join(log.file_name().unwrap());
    let mut lines = read_lines(&target);
    f(&mut lines);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&target, text).unwrap();
    let r = assert_agree(&[copy.path().to_path_buf()], None, what);
    summary(&r)
}

#[test]
fn both_verifiers_agree_on_logs_the_writer_wrote() {
    if !python_ready() {
        return;
    }
    let (d, path) = temp_log();
    let key = d.path().join("key");
    let pk = keys::generate_key_file(&key).unwrap();
    let pk_hex = hex::encode(pk.to_bytes());
    let s = AuditSettings {
        max_file_bytes: Some(4000),
        checkpoint_every: Some(7),
        signing_key: Some(key.clone()),
        ..settings(FsyncMode::Never)
    };
    let log = open(&path, &s);
    for i in 0..40 {
        let mut ev = request(i);
        ev.args
            .insert("pattern".into(), json!(format!("é\"\\\n\t\u{1}/{i}")));
        log.append(ev).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let dir = vec![path.parent().unwrap().to_path_buf()];
    let r = assert_agree(&dir, Some(&pk_hex), "a rotated, signed log");
    assert_eq!(r["verdict"], "intact");

    // A torn tail, recovered by the writer.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"seq\":44,\"ts\""))
        .unwrap();
    let r = assert_agree(&dir, Some(&pk_hex), "a torn tail");
    assert_eq!(summary(&r)["kind"], "truncated");
    let log = open(&path, &s);
    log.append(request(100)).unwrap();
    log.close().unwrap();
    drop(log);
    assert_eq!(
        assert_agree(&dir, Some(&pk_hex), "after recovery")["verdict"],
        "intact"
    );

    // Pruned behind a signed tombstone.
    let out = crate::prune::prune(
        &path,
        time::OffsetDateTime::now_utc() + time::Duration::days(1),
        Some(&keys::load_signing_key(&key).unwrap()),
        false,
    )
    .unwrap();
    assert!(!out.removed.is_empty());
    assert_eq!(
        assert_agree(&dir, Some(&pk_hex), "after prune")["verdict"],
        "intact"
    );

    // A break accepted by the operator.
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    std::fs::write(
        &path,
        lines[..n - 1]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .replacen("\"ok\"", "\"OK\"", 1),
    )
    .unwrap();
    let log = open_unlocked(
        &path,
        &s,
        OpenOptions {
            allow_broken_chain: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    log.close().unwrap();
    drop(log);
    assert_eq!(
        assert_agree(&dir, Some(&pk_hex), "after a break")["verdict"],
        "intact"
    );

    // Tampering, each way, on a plain unrotated log.
    let (_d2, plain) = temp_log();
    let log = open(&plain, &settings(FsyncMode::Never));
    for i in 0..12 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let kind = |v: Value| v["kind"].as_str().unwrap_or("none").to_owned();
    assert_eq!(
        kind(tampered(&plain, "edit", |l| l[5] =
            l[5].replace("\"read\"", "\"rm\""))),
        "modified"
    );
    assert_eq!(
        kind(tampered(&plain, "delete", |l| {
            l.remove(5);
        })),
        "missing"
    );
    assert_eq!(
        kind(tampered(&plain, "swap", |l| l.swap(5, 6))),
        "reordered"
    );
    assert_eq!(
        kind(tampered(&plain, "cut", |l| l.truncate(9))),
        "truncated"
    );
    assert_eq!(
        kind(tampered(&plain, "spaces", |l| l[2] = l[2].replacen(":", ": ", 1))),
        "malformed"
    );
}

#[test]
fn the_python_verifier_keeps_trusted_state_too() {
    if !python_ready() {
        return;
    }
    let (d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Never));
    log.append(request(1)).unwrap();
    log.close().unwrap();
    drop(log);
    let state = d.path().join("state.json");
    let dir = vec![path.parent().unwrap().to_path_buf()];
    let st = state.display().to_string();
    let (code, rep) = python_verify(&dir, None, &["--trusted", &st]);
    assert_eq!(code, 0, "{rep}");
    assert!(state.exists());
    // The Rust verifier accepts the state the Python one wrote, and vice versa.
    let opts = VerifyOptions {
        trusted: Some(state.clone()),
        ..Default::default()
    };
    assert_intact(&verify_paths(&dir, &opts).series[0]);
    std::fs::write(&path, "").unwrap();
    std::fs::remove_file(path.with_file_name("audit.jsonl.checkpoint")).unwrap();
    let (code, rep) = python_verify(&dir, None, &["--trusted", &st]);
    assert_eq!(
        (code, &rep["series"][0]["error"]["kind"]),
        (1, &json!("truncated"))
    );
}
