//! An idle gateway costs nothing while it waits (issue 34): at most three threads, and
//! none of them runs (no tick, no timer) until a request comes or something it set
//! itself falls due (the heartbeat checkpoint, 30 s after the last record).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::thread_states;
use crate::mcp_harness::{McpGate, text_of};

/// How many times each thread of `pid` was scheduled (the third field of its
/// schedstat), by thread id.
fn runs(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        if let Some(n) = stat.split_whitespace().nth(2).and_then(|n| n.parse().ok()) {
            out.insert(t.file_name().to_string_lossy().into_owned(), n);
        }
    }
    out
}

/// Waits until `pid` has at most `max` threads; their states if it never does.
fn settle_threads(pid: u32, max: usize, within: Duration) -> Result<usize, String> {
    let deadline = Instant::now() + within;
    loop {
        let n = runs(pid).len();
        if n <= max {
            return Ok(n);
        }
        if Instant::now() > deadline {
            return Err(format!("{n} threads:\n{}", thread_states(pid)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// After a read (the batch path) and a write (the blocking pool), the threads that
/// served them end; what is left waits without waking: not one run in 2 s.
#[test]
fn an_idle_mcp_gateway_keeps_three_threads_and_never_wakes() {
    let mut gate = McpGate::start(None);
    gate.dirs.put("a.txt", "a\n");
    gate.initialize("2025-06-18");
    let read = gate.tool(2, "read_text_file", json!({"path": "a.txt"}));
    assert_eq!(text_of(&read), "a\n", "{read}");
    let write = gate.tool(3, "write_file", json!({"path": "b.txt", "content": "b"}));
    assert!(write["isError"] != json!(true), "{write}");
    let pid = gate.pid();
    // Helpers end 5 s after their last job.
    if let Err(e) = settle_threads(pid, 3, Duration::from_secs(30)) {
        panic!("an idle gateway keeps more than 3 threads: {e}");
    }
    let before = runs(pid);
    std::thread::sleep(Duration::from_secs(2));
    let after = runs(pid);
    assert_eq!(
        before,
        after,
        "an idle gateway woke up (thread id -> runs):\n{}",
        thread_states(pid)
    );
    // Still serving: the next request wakes it.
    let again = gate.tool(4, "read_text_file", json!({"path": "b.txt"}));
    assert_eq!(text_of(&again), "b", "{again}");
    assert!(gate.finish().success(), "{}", gate.stderr());
}
