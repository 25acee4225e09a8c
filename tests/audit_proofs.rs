//! One record proved: checkpoints commit to a Merkle tree over the records (signed C2SP
//! note), `fsgate audit prove` writes an inclusion or consistency proof, and
//! `fsgate audit check-proof` (and audit/verify.py) check it with the public key alone,
//! across rotations, a clean restart and a `kill -9`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine;
use serde_json::json;

use crate::common::{Gate, bin};

fn fsgate(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run fsgate")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A signing key in `dir`; returns (key file, public key hex).
fn keygen(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("signing.key");
    let out = fsgate(&["audit", "keygen", "--out", &key.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let pk = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (key, pk)
}

/// The default policy, signing checkpoints, rotating every 2 KiB, with a checkpoint
/// every `every` records.
fn policy(key: &Path, every: u64) -> String {
    let default = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .expect("default policy");
    format!(
        "{default}\n[audit]\nmax_file_bytes = 2048\ncheckpoint_every = {every}\nsigning_key = {:?}\n",
        key.display().to_string()
    )
}

fn traffic(g: &Gate, n: usize, tag: &str) {
    for i in 0..n {
        let path = g.abs(&format!("{tag}-{i}.txt"));
        g.ok(
            "fs/write_text_file",
            json!({"sessionId": "s", "path": path, "content": format!("{tag} {i}\n")}),
        );
        g.ok("fs/read_text_file", json!({"sessionId": "s", "path": path}));
    }
}

fn stop(mut g: Gate) -> Gate {
    g.close_stdin();
    let st = g.wait_exit(std::time::Duration::from_secs(20));
    assert!(st.success(), "gateway exit: {st:?}\n{}", g.stderr());
    g
}

fn rotated_files(log: &Path) -> usize {
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&format!("{name}."))
                && n[name.len() + 1..].bytes().all(|b| b.is_ascii_digit())
        })
        .count()
}

fn check(proof: &Path, pk: &str) -> Output {
    fsgate(&[
        "audit",
        "check-proof",
        &proof.display().to_string(),
        "--pubkey",
        pk,
    ])
}

fn python_check(proof: &Path, pk: &str) -> Option<i32> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("audit/verify.py");
    let out = Command::new("python3")
        .arg(script)
        .args([
            "--check-proof",
            &proof.display().to_string(),
            "--pubkey",
            pk,
        ])
        .output()
        .ok()?;
    out.status.code()
}

#[test]
fn a_record_is_proved_across_rotations_and_restarts_and_checked_with_the_key_alone() {
    let keys = tempfile::tempdir().expect("tempdir");
    let (key, pk) = keygen(keys.path());
    let g = Gate::with_policy(&policy(&key, 1000));
    traffic(&g, 20, "a");
    // A crash: no shutdown checkpoint, and the latest one (at start) lies before the
    // active file, so the next start rebuilds the tree from the rotated files.
    let pid = g.pid();
    assert!(
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let g = Gate::relaunch(g);
    traffic(&g, 10, "b");
    let g = stop(g);
    let g = Gate::relaunch(g);
    traffic(&g, 5, "c");
    let g = stop(g);
    let log = g.audit_log.clone();
    assert!(rotated_files(&log) >= 3, "the log rotated");

    // The directory: the whole series (its rotated files beside the active one).
    let dir = log.parent().unwrap().display().to_string();
    let v = fsgate(&["audit", "verify", &dir, "--pubkey", &pk]);
    assert!(v.status.success(), "{}", text(&v));
    let cp = std::fs::read_to_string(log.with_file_name("audit.jsonl.checkpoint")).unwrap();
    assert!(cp.contains("\"root\":") && cp.contains("\"note\":"), "{cp}");

    let out_dir = tempfile::tempdir().expect("tempdir");
    for seq in [1u64, 7, 40] {
        let proof = out_dir.path().join(format!("{seq}.tlog-proof"));
        let p = fsgate(&[
            "audit",
            "prove",
            &log.display().to_string(),
            &seq.to_string(),
            "--out",
            &proof.display().to_string(),
        ]);
        assert!(p.status.success(), "{}", text(&p));
        let body = std::fs::read_to_string(&proof).unwrap();
        assert!(body.starts_with("c2sp.org/tlog-proof@v1\nextra "), "{body}");
        assert!(body.contains(&format!("\nindex {}\n", seq - 1)), "{body}");
        let c = check(&proof, &pk);
        assert!(c.status.success(), "{}", text(&c));
        assert!(
            text(&c).contains(&format!("VALID  record seq {seq} ")),
            "{}",
            text(&c)
        );
        assert_eq!(
            python_check(&proof, &pk),
            Some(0),
            "verify.py --check-proof"
        );
    }

    // The proof stands alone: the log gone, it still checks.
    let proof = out_dir.path().join("7.tlog-proof");
    let alone = out_dir.path().join("alone.tlog-proof");
    std::fs::copy(&proof, &alone).unwrap();
    drop(g);
    assert!(check(&alone, &pk).status.success());

    // Another record in the same place, another key, a cut path: invalid (exit 1).
    let body = std::fs::read_to_string(&proof).unwrap();
    let extra = body.lines().nth(1).unwrap().strip_prefix("extra ").unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let record = String::from_utf8(b64.decode(extra).unwrap()).unwrap();
    let edited = record.replace("\"decision\":\"allow\"", "\"decision\":\"deny\"");
    assert_ne!(edited, record);
    let forged = body.replace(extra, &b64.encode(edited));
    std::fs::write(&alone, forged).unwrap();
    let c = check(&alone, &pk);
    assert_eq!(c.status.code(), Some(1), "{}", text(&c));
    assert!(text(&c).starts_with("INVALID"), "{}", text(&c));
    let other = out_dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (_, other_pk) = keygen(&other);
    assert_eq!(check(&proof, &other_pk).status.code(), Some(1));
    let cut: Vec<&str> = body
        .lines()
        .filter(|l| *l != body.lines().nth(3).unwrap())
        .collect();
    std::fs::write(&alone, cut.join("\n") + "\n").unwrap();
    assert_eq!(check(&alone, &pk).status.code(), Some(1));
}

#[test]
fn a_later_checkpoint_is_proved_to_extend_an_earlier_one() {
    let keys = tempfile::tempdir().expect("tempdir");
    let (key, pk) = keygen(keys.path());
    let g = stop({
        let g = Gate::with_policy(&policy(&key, 4));
        traffic(&g, 6, "a");
        g
    });
    let cp = g.audit_log.with_file_name("audit.jsonl.checkpoint");
    let old = keys.path().join("old.checkpoint");
    std::fs::copy(&cp, &old).unwrap();
    let g = Gate::relaunch(g);
    traffic(&g, 9, "b");
    let g = stop(g);
    let proof = keys.path().join("consistency.proof");
    let p = fsgate(&[
        "audit",
        "prove",
        "--consistency",
        &old.display().to_string(),
        &cp.display().to_string(),
        "--out",
        &proof.display().to_string(),
    ]);
    assert!(p.status.success(), "{}", text(&p));
    let c = check(&proof, &pk);
    assert!(c.status.success(), "{}", text(&c));
    assert!(text(&c).contains("extends tree size"), "{}", text(&c));
    assert_eq!(
        python_check(&proof, &pk),
        Some(0),
        "verify.py --check-proof"
    );

    // A record not yet covered by any checkpoint cannot be proved (exit 2, says why).
    let log = g.audit_log.display().to_string();
    let p = fsgate(&["audit", "prove", &log, "100000"]);
    assert_eq!(p.status.code(), Some(2));
    assert!(
        text(&p).contains("not covered by the checkpoint"),
        "{}",
        text(&p)
    );
}
