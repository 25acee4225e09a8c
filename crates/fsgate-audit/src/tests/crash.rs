//! kill -9 in the middle of a stream of appends (with rotation and checkpoints going
//! on): the log reopens without operator help, verifies, and holds every record that was
//! acknowledged, with the hash it was acknowledged with.
//!
//! The writer runs in a child process: this test binary itself, re-run on the ignored
//! `crash_child` test with an environment variable naming the log.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

const CHILD_ENV: &str = "FSGATE_AUDIT_CRASH_CHILD";

fn child_settings() -> AuditSettings {
    AuditSettings {
        max_file_bytes: Some(16 * 1024),
        checkpoint_every: Some(50),
        ..settings(FsyncMode::Always)
    }
}

#[test]
#[ignore = "helper process for kill9_mid_stream_loses_nothing_acknowledged"]
fn crash_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let log = Arc::new(open(Path::new(&path), &child_settings()));
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (log, out) = (Arc::clone(&log), Arc::clone(&out));
            std::thread::spawn(move || {
                for i in 0.. {
                    let r = log.append(request(t * 1_000_000 + i)).unwrap();
                    let mut o = out.lock().unwrap();
                    writeln!(o, "ACK {} {}", r.seq, r.hash).unwrap();
                    o.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

#[test]
fn kill9_mid_stream_loses_nothing_acknowledged() {
    let (_d, path) = temp_log();
    let exe = std::env::current_exe().unwrap();
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    for round in 0..4 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "tests::crash::crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let deadline = Instant::now() + Duration::from_secs(60);
        let want = 150 + round * 37;
        let mut got = 0;
        while got < want && Instant::now() < deadline {
            let Some(Ok(line)) = lines.next() else { break };
            if let Some(rest) = line.strip_prefix("ACK ") {
                let (seq, hash) = rest.split_once(' ').unwrap();
                acked.insert(seq.parse().unwrap(), hash.to_owned());
                got += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
        let _ = child.wait();
        // Anything acknowledged before the kill may still be in the pipe.
        for line in lines.map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("ACK ") {
                let (seq, hash) = rest.split_once(' ').unwrap();
                acked.insert(seq.parse().unwrap(), hash.to_owned());
            }
        }
        assert!(
            got >= want,
            "round {round}: the child acknowledged only {got} records"
        );

        // The log reopens by itself (no broken chain) and verifies.
        let log = open_unlocked(&path, &child_settings(), OpenOptions::default())
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        log.close().unwrap();
        drop(log);
        let rep = verify_dir(&path, &VerifyOptions::default());
        assert_intact(&rep);
    }
    // Every acknowledged record is there, with its hash.
    let dir = path.parent().unwrap().to_path_buf();
    let files = crate::series::discover(&[dir]).unwrap()[0].files.clone();
    let mut logged: BTreeMap<u64, String> = BTreeMap::new();
    let mut checks = Vec::new();
    for f in &files {
        for r in records(f) {
            logged.insert(
                r["seq"].as_u64().unwrap(),
                r["hash"].as_str().unwrap().to_owned(),
            );
            if r["kind"] == "start" {
                checks.push(r["details"]["check"].as_str().unwrap().to_owned());
            }
        }
    }
    for (seq, hash) in &acked {
        assert_eq!(
            logged.get(seq),
            Some(hash),
            "acknowledged seq {seq} lost or changed"
        );
    }
    // Four child starts and four reopenings, none of which needed an operator.
    assert_eq!(checks.len(), 8, "{checks:?}");
    assert!(checks.iter().all(|c| c != "break"), "{checks:?}");
    assert!(files.len() > 3, "rotation happened during the stream");
}
