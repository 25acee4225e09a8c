//! The audit verifier on corrupted logs: a real log (records, a write-ahead intent, a
//! signed shutdown checkpoint) is written once by the audit writer; each run applies
//! the fuzzer's bytes to it as edits (overwrite, insert, delete, truncate at offsets),
//! to the log or its checkpoint file, or replaces the log with them, and runs
//! `fsgate audit verify` on the directory. No panic; the unmodified log is intact.
#![no_main]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use fsgate_audit::series::checkpoint_name;
use fsgate_audit::verify::{Verdict, VerifyOptions, verify_paths};
use fsgate_audit::{AuditEvent, AuditLog, AuditSettings, FsyncMode, OpenOptions};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, json};

const POLICY: &str = "5f0c6e3b1a2d4c8e9f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e";

struct Fixture {
    dir: PathBuf,
    log: PathBuf,
    checkpoint: PathBuf,
    log_bytes: Vec<u8>,
    checkpoint_bytes: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        let keys = tempfile::Builder::new()
            .prefix("fsgate-fuzz-key-")
            .tempdir_in(base)
            .unwrap()
            .keep();
        let dir = tempfile::Builder::new()
            .prefix("fsgate-fuzz-audit-")
            .tempdir_in(base)
            .unwrap()
            .keep();
        let key = keys.join("signing.key");
        std::fs::write(&key, "11".repeat(32)).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let log = dir.join("audit.jsonl");
        let settings = AuditSettings {
            fsync: FsyncMode::Never,
            heartbeat_secs: Some(0),
            max_file_bytes: Some(0),
            checkpoint_every: Some(4),
            signing_key: Some(key),
            ..Default::default()
        };
        let audit = AuditLog::open(&log, &settings, POLICY, OpenOptions::default()).unwrap();
        for i in 0..6u64 {
            audit.append(event(i)).unwrap();
        }
        let mut details = Map::new();
        details.insert("note".into(), json!("fuzz fixture \u{202e} é"));
        audit
            .append(AuditEvent::lifecycle("reload", details))
            .unwrap();
        audit.close().unwrap();
        let checkpoint = dir.join(checkpoint_name("audit.jsonl"));
        let f = Fixture {
            log_bytes: std::fs::read(&log).unwrap(),
            checkpoint_bytes: std::fs::read(&checkpoint).unwrap_or_default(),
            dir,
            log,
            checkpoint,
        };
        assert_eq!(verify(&f), Verdict::Intact, "the fixture verifies");
        f
    })
}

fn event(i: u64) -> AuditEvent {
    let mut args = Map::new();
    args.insert("line".into(), json!(i));
    AuditEvent {
        session: format!("s{}", i % 2),
        transport: "acp".into(),
        peer: "pid=1,uid=0".into(),
        op: if i % 2 == 0 { "read" } else { "write" }.into(),
        path: Some(format!("src/f{i}.rs")),
        args,
        decision: if i % 3 == 0 { "deny" } else { "allow" }.into(),
        rule: Some("workspace-read".into()),
        outcome: "ok".into(),
        bytes: Some(10 * i),
        duration_us: i,
        ..Default::default()
    }
}

fn verify(f: &Fixture) -> Verdict {
    let rep = verify_paths(std::slice::from_ref(&f.dir), &VerifyOptions::default());
    let _ = rep.series.iter().map(|s| s.render()).count();
    rep.verdict
}

/// Applies 4-byte edits `[op, offset hi, offset lo, byte]` to `bytes`.
fn mutate(bytes: &mut Vec<u8>, edits: &[u8]) {
    for e in edits.chunks_exact(4) {
        let at = usize::from(u16::from_be_bytes([e[1], e[2]]));
        let at = if bytes.is_empty() {
            0
        } else {
            at % (bytes.len() + 1)
        };
        match e[0] % 4 {
            0 if at < bytes.len() => bytes[at] = e[3],
            1 => bytes.insert(at, e[3]),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            3 => bytes.truncate(at),
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (mut log, mut ckpt) = (f.log_bytes.clone(), f.checkpoint_bytes.clone());
    match mode % 3 {
        0 => mutate(&mut log, rest),
        1 => mutate(&mut ckpt, rest),
        _ => log = rest.to_vec(),
    }
    std::fs::write(&f.log, &log).unwrap();
    std::fs::write(&f.checkpoint, &ckpt).unwrap();
    let verdict = verify(f);
    if log == f.log_bytes && ckpt == f.checkpoint_bytes {
        assert_eq!(verdict, Verdict::Intact);
    }
});
