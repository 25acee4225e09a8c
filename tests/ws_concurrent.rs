//! Many WebSocket clients at once: 8 clients, each on its own thread, pipelining
//! requests; every answer matches its request, and each connection is its own session
//! in the audit log.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::json;

use crate::ws_harness::{WsClient, WsGate};

/// One client's rounds: 5 writes in flight, then 5 reads, then a list and a stat;
/// returns how many requests it made.
fn one_client(addr: &str, token: &str, i: usize, rounds: usize) -> usize {
    let mut c = WsClient::open(addr, token);
    for r in 0..rounds {
        let names: Vec<String> = (0..5).map(|k| format!("/c{i}/r{r}-f{k}.txt")).collect();
        let writes: Vec<_> = names
            .iter()
            .map(|n| c.send("write", json!({"path": n, "content": format!("{i}:{n}")})))
            .collect();
        for id in writes {
            let a = c.answer(&id);
            assert_eq!(a["data"], json!({}), "{a}");
        }
        let reads: Vec<_> = names
            .iter()
            .map(|n| c.send("read", json!({"path": n})))
            .collect();
        for (id, n) in reads.iter().zip(&names) {
            assert_eq!(c.answer(id)["data"]["content"], format!("{i}:{n}"));
        }
        let list = c.send("list", json!({"path": format!("/c{i}")}));
        let stat = c.send("stat", json!({"path": names[0]}));
        let listing = c.answer(&list);
        let have: Vec<_> = listing["data"]["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["path"].as_str())
            .collect();
        assert!(
            names.iter().all(|n| have.contains(&n.as_str())),
            "{names:?} in {have:?}"
        );
        let st = c.answer(&stat);
        assert_eq!(
            st["data"]["size"].as_u64(),
            Some(format!("{i}:{}", names[0]).len() as u64),
            "{st}"
        );
    }
    // Other clients' files are visible too: one workspace.
    c.ok("read", json!({"path": "/shared.txt"}));
    c.close();
    rounds * (5 + 5 + 2) + 1
}

#[test]
fn eight_clients_at_once_each_its_own_session() {
    let gate = WsGate::start(None, |root| {
        std::fs::write(root.join("shared.txt"), "shared").expect("shared");
    });
    let started = Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (addr, token) = (gate.addr.clone(), gate.token.clone());
            std::thread::spawn(move || one_client(&addr, &token, i, 10))
        })
        .collect();
    let requests: usize = threads
        .into_iter()
        .map(|t| t.join().expect("client thread"))
        .sum();
    assert_eq!(requests, 8 * (10 * 12 + 1));
    println!("8 clients, {requests} requests in {:?}", started.elapsed());
    for i in 0..8 {
        for r in 0..10 {
            let p = gate.root.join(format!("c{i}/r{r}-f0.txt"));
            let want = format!("{i}:/c{i}/r{r}-f0.txt");
            assert_eq!(std::fs::read_to_string(&p).expect("written file"), want);
        }
    }
    let mut per_session: HashMap<String, usize> = HashMap::new();
    for r in gate.audit_requests() {
        *per_session
            .entry(r["session"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert_eq!(per_session.len(), 8, "{per_session:?}");
    assert!(per_session.values().all(|n| *n == 121), "{per_session:?}");
}

/// The server's threads named `name` (from /proc: the kernel's view, not the server's).
fn threads_named(pid: u32, name: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// Waits up to 10 s for `want` threads named `name`; the count last seen.
fn settle_threads(pid: u32, name: &str, want: usize) -> usize {
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let n = threads_named(pid, name);
        if n == want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Each connection runs on a thread of its own, which ends with it: connections that
/// come and go leave no thread behind, and one that stays is still served.
#[test]
fn each_connection_has_a_thread_that_ends_with_it() {
    const CONN: &str = "fsgate-ws-conn";
    let gate = WsGate::start(None, |root| {
        std::fs::write(root.join("a.txt"), "a\n").expect("a.txt");
    });
    let pid = gate.pid();
    let mut stay = gate.client();
    assert_eq!(stay.ok("read", json!({"path": "/a.txt"}))["content"], "a\n");
    for round in 0..3 {
        let mut clients: Vec<WsClient> = (0..4).map(|_| gate.client()).collect();
        for c in &mut clients {
            let a = c.ok("read", json!({"path": "/a.txt"}));
            assert_eq!(a["content"], "a\n", "round {round}");
        }
        assert_eq!(
            settle_threads(pid, CONN, 5),
            5,
            "round {round}: 1 + 4 connections"
        );
        for c in clients {
            c.close();
        }
        assert_eq!(
            settle_threads(pid, CONN, 1),
            1,
            "round {round}: threads left behind"
        );
    }
    let a = stay.ok("stat", json!({"path": "/a.txt"}));
    assert_eq!(a["size"], 2, "{a}");
}

/// A server stopped (SIGTERM) while a connection has pipelined reads queued writes its
/// `stop` record last: the reads still running are recorded before it, none after.
#[test]
fn a_stop_with_reads_queued_records_nothing_after_its_stop_record() {
    for round in 0..6u64 {
        let mut gate = WsGate::start(None, |root| {
            for i in 0..8 {
                let text = format!("file {i}\n").repeat(8 * 1024);
                std::fs::write(root.join(format!("f{i}.txt")), text).expect("write");
            }
        });
        let mut c = gate.client();
        for i in 0..400 {
            c.send(
                "read",
                json!({"path": format!("/f{}.txt", i % 8), "requestId": i}),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(3 * round));
        assert!(gate.terminate(), "exit status: {}", gate.stderr());
        let records = gate.audit_records();
        let last = records.last().expect("records");
        assert_eq!(last["kind"], "stop", "round {round}: last record {last}");
        drop(c);
    }
}
