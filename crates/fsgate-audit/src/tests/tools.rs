//! The offline tools: verify (files, series, trusted state), prune, show, and the CLI's
//! exit codes.

use super::*;
use crate::cli::{AuditCommand, run_to};
use crate::verify::FailureKind;

fn rotated_log(n: u64) -> (tempfile::TempDir, PathBuf) {
    rotated_log_signed(n, None)
}

fn rotated_log_signed(n: u64, key: Option<PathBuf>) -> (tempfile::TempDir, PathBuf) {
    let (d, path) = temp_log();
    let s = AuditSettings {
        max_file_bytes: Some(2500),
        signing_key: key,
        ..settings(FsyncMode::Never)
    };
    let log = open(&path, &s);
    for i in 0..n {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    (d, path)
}

fn cli(cmd: AuditCommand) -> (i32, String) {
    let mut out = Vec::new();
    let code = run_to(cmd, &mut out);
    (code, String::from_utf8(out).unwrap())
}

fn verify_cmd(paths: Vec<PathBuf>) -> AuditCommand {
    AuditCommand::Verify {
        paths,
        workspace: None,
        json: false,
        trusted: None,
        pubkey: None,
        checkpoints: Vec::new(),
    }
}

#[test]
fn verify_names_a_gap_between_files_and_a_missing_start() {
    let (_d, path) = rotated_log(40);
    let all = crate::series::discover(&[path.parent().unwrap().to_path_buf()]).unwrap();
    let files = all[0].files.clone();
    assert!(files.len() >= 4);
    let (code, out) = cli(verify_cmd(vec![path.parent().unwrap().to_path_buf()]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("INTACT") && out.contains("records checked"),
        "{out}"
    );

    // A middle file gone: a gap.
    std::fs::rename(&files[1], path.with_file_name("moved.away.tmp")).unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    let err = rep.error.unwrap();
    assert_eq!(err.kind, FailureKind::Gap, "{}", err.message);
    std::fs::rename(path.with_file_name("moved.away.tmp"), &files[1]).unwrap();

    // The first file gone, without a tombstone: missing records.
    std::fs::remove_file(&files[0]).unwrap();
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_eq!(rep.error.unwrap().kind, FailureKind::Missing);
    let (code, out) = cli(verify_cmd(vec![path.parent().unwrap().to_path_buf()]));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("TAMPERED") && out.contains("first bad record"),
        "{out}"
    );
}

#[test]
fn verify_exit_codes_and_json() {
    let (_d, path) = rotated_log(5);
    let (code, _) = cli(verify_cmd(vec![path.with_file_name("nope")]));
    assert_eq!(code, 2, "unreadable");
    let (code, out) = cli(AuditCommand::Verify {
        paths: vec![path.parent().unwrap().to_path_buf()],
        workspace: None,
        json: true,
        trusted: None,
        pubkey: None,
        checkpoints: Vec::new(),
    });
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "intact");
    assert_eq!(v["series"][0]["records"], 7);
    assert!(v["series"][0]["error"].is_null());
    let (code, _) = cli(AuditCommand::Verify {
        paths: vec![path.clone()],
        workspace: None,
        json: false,
        trusted: None,
        pubkey: Some("zz".into()),
        checkpoints: Vec::new(),
    });
    assert_eq!(code, 2, "a bad --pubkey is a usage error");
}

#[test]
fn trusted_state_proves_the_log_still_extends_what_was_seen() {
    let (d, path) = temp_log();
    let state = d.path().join("trusted.json");
    let s = settings(FsyncMode::Never);
    let log = open(&path, &s);
    log.append(request(1)).unwrap();
    log.close().unwrap();
    drop(log);
    let opts = VerifyOptions {
        trusted: Some(state.clone()),
        ..Default::default()
    };
    let rep = verify_dir(&path, &opts);
    assert_intact(&rep);
    assert!(
        rep.warnings
            .iter()
            .any(|w| w.contains("no earlier trusted state"))
    );
    assert!(state.exists());
    // The log grows: still extends the trusted head.
    let log = open(&path, &s);
    log.append(request(2)).unwrap();
    log.close().unwrap();
    drop(log);
    let rep = verify_dir(&path, &opts);
    assert_intact(&rep);
    assert!(
        !rep.warnings
            .iter()
            .any(|w| w.contains("no earlier trusted state"))
    );
    // Someone rewrites the whole log (and its checkpoint) from scratch.
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    let log = open(&path, &s);
    log.append(request(3)).unwrap();
    for i in 0..5 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
    let rep = verify_dir(&path, &opts);
    assert_eq!(rep.error.unwrap().kind, FailureKind::Replaced);
}

#[test]
fn prune_removes_old_files_behind_a_signed_tombstone() {
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("k");
    let pk = crate::keys::generate_key_file(&key_path).unwrap();
    let (_d, path) = rotated_log_signed(40, Some(key_path.clone()));
    let dir = path.parent().unwrap().to_path_buf();
    let before = crate::series::discover(std::slice::from_ref(&dir)).unwrap()[0]
        .files
        .len();
    let (code, out) = cli(AuditCommand::Prune {
        before: "2999-01-01".into(),
        path: Some(path.clone()),
        workspace: None,
        signing_key: Some(key_path.clone()),
        dry_run: true,
    });
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would remove"), "{out}");
    // Without the key, a signed log is not pruned: an unsigned tombstone would stop the
    // gateway at its next start.
    let (code, _) = cli(AuditCommand::Prune {
        before: "2999-01-01".into(),
        path: Some(path.clone()),
        workspace: None,
        signing_key: None,
        dry_run: false,
    });
    assert_eq!(code, 2);
    assert_eq!(
        crate::series::discover(std::slice::from_ref(&dir)).unwrap()[0]
            .files
            .len(),
        before
    );
    let (code, out) = cli(AuditCommand::Prune {
        before: "2999-01-01".into(),
        path: Some(path.clone()),
        workspace: None,
        signing_key: Some(key_path.clone()),
        dry_run: false,
    });
    assert_eq!(code, 0, "{out}");
    let after = crate::series::discover(std::slice::from_ref(&dir)).unwrap()[0]
        .files
        .clone();
    assert_eq!(after.len(), 1, "only the active file is left of {before}");
    let opts = VerifyOptions {
        pinned: Some(pk),
        ..Default::default()
    };
    let rep = verify_dir(&path, &opts);
    assert_intact(&rep);
    assert!(
        rep.warnings
            .iter()
            .any(|w| w.contains("pruned") && w.contains("pinned")),
        "{:?}",
        rep.warnings
    );
    // The writer accepts the pruned start, and the chain goes on.
    let s = AuditSettings {
        signing_key: Some(key_path),
        ..settings(FsyncMode::Never)
    };
    let log = open(&path, &s);
    log.append(request(1)).unwrap();
    log.close().unwrap();
    assert_intact(&verify_dir(&path, &opts));
    // A forged (unsigned) tombstone is caught when the key is pinned.
    let tomb = path.with_file_name("audit.jsonl.tombstones");
    let text = std::fs::read_to_string(&tomb).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    v.as_object_mut().unwrap().remove("sig");
    std::fs::write(&tomb, format!("{v}\n")).unwrap();
    let rep = verify_dir(&path, &opts);
    assert_eq!(rep.error.unwrap().kind, FailureKind::BadSignature);
}

#[test]
fn prune_refuses_a_chain_that_does_not_verify() {
    let (_d, path) = rotated_log(30);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"ok\"", "\"OK\"", 1)).unwrap();
    let (code, _) = cli(AuditCommand::Prune {
        before: "2999-01-01".into(),
        path: Some(path.clone()),
        workspace: None,
        signing_key: None,
        dry_run: false,
    });
    assert_eq!(code, 1);
    assert!(
        crate::series::discover(&[path.parent().unwrap().to_path_buf()]).unwrap()[0]
            .files
            .len()
            > 1
    );
}

#[test]
fn show_filters_and_formats() {
    let (_d, path) = rotated_log(20);
    let dir = path.parent().unwrap().to_path_buf();
    let show = |op: Option<&str>, decision: Option<&str>, glob: Option<&str>, json, csv| {
        cli(AuditCommand::Show {
            paths: vec![dir.clone()],
            workspace: None,
            since: Some("2000-01-01".into()),
            until: Some("2999-01-01T00:00:00Z".into()),
            op: op.map(Into::into),
            decision: decision.map(Into::into),
            path: glob.map(Into::into),
            session: None,
            pid: None,
            exe: None,
            json,
            csv,
            stats: false,
            follow: false,
            width: Some(0),
        })
    };
    let (code, out) = show(None, Some("deny"), None, true, false);
    assert_eq!(code, 0);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 4, "requests 0, 5, 10, 15 are denied: {out}");
    assert!(lines.iter().all(|l| l.contains("\"decision\":\"deny\"")));
    let (_, out) = show(Some("read"), None, Some("src/file_1*.rs"), false, true);
    let rows: Vec<_> = out.lines().collect();
    assert!(rows[0].starts_with("seq,ts,kind"));
    // reads are even i: 10, 12, 14, 16, 18.
    assert_eq!(rows.len(), 1 + 5, "{out}");
    let (_, out) = show(Some("start"), None, None, false, false);
    // The writer's own start record reads as the log being opened.
    assert!(out.contains("[log-open]"), "{out}");
    let (code, _) = cli(AuditCommand::Show {
        paths: vec![dir.clone()],
        workspace: None,
        since: Some("yesterday".into()),
        until: None,
        op: None,
        decision: None,
        path: None,
        session: None,
        pid: None,
        exe: None,
        json: false,
        csv: false,
        stats: false,
        follow: false,
        width: None,
    });
    assert_eq!(code, 2);
}

#[test]
fn keygen_writes_a_private_key_and_prints_its_public_half() {
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("k");
    let (code, out) = cli(AuditCommand::Keygen { out: key.clone() });
    assert_eq!(code, 0);
    let pk = crate::keys::load_signing_key(&key).unwrap().verifying_key();
    assert_eq!(out.trim(), hex::encode(pk.to_bytes()));
    let (code, _) = cli(AuditCommand::Keygen { out: key });
    assert_eq!(code, 2, "never overwrites");
}

#[test]
fn verify_reads_in_chunks_and_looks_ahead_across_them() {
    crate::chain::chunks::CHUNK_OVERRIDE.store(16 * 1024, std::sync::atomic::Ordering::Relaxed);
    let (_d, path) = temp_log();
    let log = open(&path, &settings(FsyncMode::Never));
    for i in 0..1500 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    drop(log);
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert_eq!(rep.records, 1502);
    let lines = read_lines(&path);
    let check = |edit: &dyn Fn(&mut Vec<String>), kind: FailureKind, seq: u64, line: u64| {
        let mut l = lines.clone();
        edit(&mut l);
        let text: String = l.iter().map(|x| format!("{x}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let err = verify_dir(&path, &VerifyOptions::default()).error.unwrap();
        assert_eq!(
            (err.kind, err.seq, err.line),
            (kind, Some(seq), Some(line)),
            "{}",
            err.message
        );
    };
    for k in [37usize, 250, 777, 1300] {
        // Moved far away (chunks later): reordered, found by looking past the chunk.
        check(
            &|l| {
                let moved = l.remove(k);
                l.push(moved);
            },
            FailureKind::Reordered,
            k as u64 + 2,
            k as u64 + 1,
        );
        check(
            &|l| drop(l.remove(k)),
            FailureKind::Missing,
            k as u64 + 2,
            k as u64 + 1,
        );
    }
    crate::chain::chunks::CHUNK_OVERRIDE.store(0, std::sync::atomic::Ordering::Relaxed);
}
