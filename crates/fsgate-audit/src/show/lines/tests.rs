use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Waits (bounded) until `seen` holds `n` lines.
fn wait_for(seen: &Mutex<Vec<String>>, n: usize) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let now = seen.lock().unwrap().clone();
        if now.len() >= n || Instant::now() > end {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn lines_wait_for_their_end_and_overlong_ones_are_skipped() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("log");
    append(&p, "one\ntw");
    let mut r = LineReader::open(&p).unwrap();
    assert_eq!(r.next().unwrap(), Next::Line);
    assert_eq!(r.line(), b"one");
    assert_eq!(r.next().unwrap(), Next::Eof);
    append(&p, "o\n");
    assert_eq!(r.next().unwrap(), Next::Line);
    assert_eq!(r.line(), b"two");
    append(&p, &format!("{}\nthree\n", "x".repeat(MAX_LINE + 10)));
    assert_eq!(r.next().unwrap(), Next::Overlong);
    assert_eq!(r.next().unwrap(), Next::Line);
    assert_eq!(r.line(), b"three");
    assert!(
        r.buf.capacity() <= 2 * (MAX_LINE + 1) + 8192,
        "bounded buffer"
    );
}

#[test]
fn follow_reads_a_rotated_file_to_its_end_then_the_new_one() {
    let d = tempfile::tempdir().unwrap();
    let active = d.path().join("audit.jsonl");
    let rec = |n: u64| format!("{{\"seq\":{n}}}\n");
    append(&active, &(rec(1) + &rec(2)));
    let mut r = LineReader::open(&active).unwrap();
    while r.next().unwrap() != Next::Eof {}
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, st2, a2) = (Arc::clone(&seen), Arc::clone(&stop), active.clone());
    let t = std::thread::spawn(move || {
        let mut each = |l: Option<&[u8]>| {
            if let Some(l) = l {
                s2.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(l).into_owned());
            }
            Ok(())
        };
        follow(&a2, r, Some(2), &mut each, &|| !st2.load(Ordering::SeqCst))
    });
    append(&active, &rec(3));
    assert_eq!(wait_for(&seen, 1), [r#"{"seq":3}"#]);
    // Rotation: the last record lands in the old file, then a new file takes the name.
    let rotated = d.path().join("audit.jsonl.000000000001");
    std::fs::rename(&active, &rotated).unwrap();
    append(&rotated, &rec(4));
    append(&active, &(rec(5) + &rec(6)));
    // Two more rotations at once: each file is read, none twice.
    let second = d.path().join("audit.jsonl.000000000005");
    std::fs::rename(&active, &second).unwrap();
    append(&active, &rec(7));
    let third = d.path().join("audit.jsonl.000000000007");
    std::fs::rename(&active, &third).unwrap();
    append(&active, &format!("{}{}\n", rec(8), "x".repeat(99)));
    let long = "x".repeat(99);
    let want: Vec<String> = (3..=8)
        .map(|n| rec(n).trim_end().to_owned())
        .chain([long.clone()])
        .collect();
    assert_eq!(wait_for(&seen, 7), want);
    // Truncated below what was read: read again from the start.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&active, "y\n");
    let mut want = want;
    want.push("y".into());
    assert_eq!(wait_for(&seen, 8), want);
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap().unwrap();
}
