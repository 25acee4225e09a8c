//! Start-up recovery: torn tails are cut and recorded; broken chains, cut tails and
//! replaced logs are refused unless the operator accepts a recorded break.

use std::io::Write;

use super::*;
use crate::AuditError;
use crate::verify::FailureKind;

fn write_some(path: &Path, n: u64) {
    let log = open(path, &settings(FsyncMode::Always));
    for i in 0..n {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
}

fn reopen(path: &Path, allow: bool) -> Result<AuditLog, AuditError> {
    open_unlocked(
        path,
        &settings(FsyncMode::Always),
        OpenOptions {
            allow_broken_chain: allow,
            ..OpenOptions::default()
        },
    )
}

#[test]
fn a_torn_last_line_is_cut_and_recorded() {
    let (_d, path) = temp_log();
    write_some(&path, 3);
    let torn = b"{\"seq\":6,\"ts\":\"2026-01-01T00:00:00.0";
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(torn)
        .unwrap();
    // verify sees the torn tail as truncation...
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_eq!(rep.error.unwrap().kind, FailureKind::Truncated);
    // ...and the writer cuts it, saying exactly what it cut.
    let log = reopen(&path, false).unwrap();
    log.close().unwrap();
    let recs = records(&path);
    let rec = recs.iter().find(|r| r["kind"] == "recovered").unwrap();
    assert_eq!(rec["seq"], 6);
    assert_eq!(rec["details"]["cut_bytes"], torn.len());
    assert_eq!(
        rec["details"]["cut_sha256"],
        hex::encode(fsgate_base::sha256::Sha256::digest(torn))
    );
    use base64::Engine;
    let copy = base64::engine::general_purpose::STANDARD
        .decode(rec["details"]["cut_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(copy, torn);
    let start = &recs[6];
    assert_eq!(start["details"]["check"], "recovered");
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert!(rep.warnings.iter().any(|w| w.contains("crash recovery")));
}

#[test]
fn an_edited_record_stops_the_start_unless_the_break_is_accepted() {
    let (_d, path) = temp_log();
    write_some(&path, 5);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("src/file_2.rs", "src/file_X.rs", 1);
    std::fs::write(&path, &edited).unwrap();
    let err = reopen(&path, false).err().unwrap();
    let msg = err.to_string();
    assert!(matches!(err, AuditError::BrokenChain { .. }), "{msg}");
    assert!(msg.contains("modified"), "{msg}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        edited,
        "nothing changed"
    );

    let log = reopen(&path, true).unwrap();
    log.append(request(50)).unwrap();
    log.close().unwrap();
    let recs = records(&path);
    // seq 1 start, 2..3 requests 0..1, then the break chained on seq 3.
    let brk = &recs[3];
    assert_eq!(brk["kind"], "break");
    assert_eq!(brk["seq"], 4);
    assert_eq!(brk["details"]["last_good_seq"], 3);
    let aside = brk["details"]["set_aside"].as_str().unwrap();
    let kept = std::fs::read_to_string(path.with_file_name(aside)).unwrap();
    assert_eq!(kept, edited, "the damaged file is kept, whole");
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_intact(&rep);
    assert!(rep.warnings.iter().any(|w| w.contains("break")), "{rep:?}");
}

#[test]
fn a_cut_tail_contradicts_the_checkpoint() {
    let (_d, path) = temp_log();
    write_some(&path, 5);
    let lines = read_lines(&path);
    let kept: String = lines[..lines.len() - 2]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, kept).unwrap();
    let msg = reopen(&path, false).err().unwrap().to_string();
    assert!(msg.contains("truncated"), "{msg}");
    let rep = verify_dir(&path, &VerifyOptions::default());
    assert_eq!(rep.error.unwrap().kind, FailureKind::Truncated);
    // Accepting the break chains on the last record and the new checkpoint matches.
    reopen(&path, true).unwrap().close().unwrap();
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}

#[test]
fn a_cut_tail_with_its_checkpoint_deleted_is_still_caught_through_the_sink() {
    let (d, path) = temp_log();
    let sink = d.path().join("elsewhere.jsonl");
    let mut s = settings(FsyncMode::Always);
    s.checkpoint_sink = Some(sink.display().to_string());
    let log = open(&path, &s);
    for i in 0..5 {
        log.append(request(i)).unwrap();
    }
    log.close().unwrap();
    drop(log);
    // Whoever cuts the tail also removes the checkpoint beside the log...
    let lines = read_lines(&path);
    let kept: String = lines[..lines.len() - 2]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, kept).unwrap();
    std::fs::remove_file(path.with_file_name("audit.jsonl.checkpoint")).unwrap();
    // ... but the sink still holds the head, and the gateway will not start on it.
    let opened = open_unlocked(&path, &s, OpenOptions::default());
    let msg = opened.err().unwrap().to_string();
    assert!(msg.contains("truncated"), "{msg}");
    // An operator who accepts the break starts a recorded new segment; from then on the
    // sink's newest checkpoint is the new one, and normal starts work again.
    let allow = OpenOptions {
        allow_broken_chain: true,
        ..OpenOptions::default()
    };
    let log = open_unlocked(&path, &s, allow).unwrap();
    log.close().unwrap();
    drop(log);
    let log = open_unlocked(&path, &s, OpenOptions::default()).unwrap();
    log.close().unwrap();
}

#[test]
fn a_deleted_log_is_noticed_through_its_checkpoint() {
    let (_d, path) = temp_log();
    write_some(&path, 2);
    std::fs::remove_file(&path).unwrap();
    let msg = reopen(&path, false).err().unwrap().to_string();
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn a_log_that_does_not_start_at_genesis_is_refused() {
    let (_d, path) = temp_log();
    write_some(&path, 3);
    let lines = read_lines(&path);
    let kept: String = lines[1..].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, kept).unwrap();
    std::fs::remove_file(path.with_file_name("audit.jsonl.checkpoint")).unwrap();
    let msg = reopen(&path, false).err().unwrap().to_string();
    assert!(msg.contains("genesis"), "{msg}");
}

#[test]
fn a_break_with_nothing_to_chain_on_starts_a_new_log() {
    let (_d, path) = temp_log();
    write_some(&path, 2);
    std::fs::write(&path, "garbage\n").unwrap();
    let old_id = {
        let cp =
            crate::checkpoint::Checkpoint::read_all(&path.with_file_name("audit.jsonl.checkpoint"))
                .unwrap();
        cp[0].as_ref().unwrap().log.clone()
    };
    let log = reopen(&path, true).unwrap();
    assert_ne!(log.log_id(), old_id);
    log.close().unwrap();
    let recs = records(&path);
    assert_eq!(recs[0]["kind"], "break");
    assert_eq!(recs[0]["seq"], 1);
    assert_intact(&verify_dir(&path, &VerifyOptions::default()));
}
